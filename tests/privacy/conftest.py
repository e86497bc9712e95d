"""Fixtures of the private forest's tests."""

from __future__ import annotations

import pytest
from sklearn.datasets import load_wine
from sklearn.model_selection import train_test_split


@pytest.fixture(scope="module")
def wine():
    """Wine split 70/30, stratified: ``(X_train, X_test, y_train, y_test)``. A module that
    needs the whole set (``X, y``) defines its own ``wine``, which takes precedence."""
    X, y = load_wine(return_X_y=True)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
