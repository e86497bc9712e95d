"""Fixtures of the GIPE encryptor's tests."""

from __future__ import annotations

import pytest
from sklearn.datasets import load_breast_cancer


@pytest.fixture(scope="module")
def cancer():
    """Breast cancer, ``(X, y)``: distinct values in most columns, two classes."""
    return load_breast_cancer(return_X_y=True)
