"""Fixtures of the private forest's tests."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, load_wine
from sklearn.model_selection import train_test_split


@pytest.fixture(scope="module")
def wine():
    """Wine split 70/30, stratified: ``(X_train, X_test, y_train, y_test)``. A module that
    needs the whole set (``X, y``) defines its own ``wine``, which takes precedence."""
    X, y = load_wine(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


@pytest.fixture(scope="module")
def diabetes_300():
    """Diabetes in a fixed shuffle, 300 training rows and 142 test rows: ``(X, y, X_test,
    y_test)``."""
    X, y = load_diabetes(return_X_y=True)
    idx = np.random.RandomState(0).permutation(X.shape[0])
    return X[idx[:300]], y[idx[:300]], X[idx[300:]], y[idx[300:]]
