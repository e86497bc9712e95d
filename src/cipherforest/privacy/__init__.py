"""Privacy: Gini-impurity-preserving encryption (GIPE) of features and its leakage analysis.

* :class:`GiniPreservingEncryptor` — the paper's scheme as a scikit-learn transformer;
  ``fit_transform`` / ``transform`` give the integer cipher matrix a
  :class:`~cipherforest.ensemble.RandomForestClassifier` trains and predicts on.
* :mod:`cipherforest.privacy.leakage` — the bitwise leakage matrix (Roy et al., CCS 2022;
  the paper's appendix E) of a column under GIPE or order-preserving encryption.
"""

from ._state_file import StateFileError
from .gipe import (
    MAX_CIPHER,
    CipherSpaceError,
    GiniPreservingEncryptor,
    GipeDecryptionError,
    GipeRekeyWarning,
    cipher_max,
)

__all__ = [
    "MAX_CIPHER",
    "CipherSpaceError",
    "GiniPreservingEncryptor",
    "GipeDecryptionError",
    "GipeRekeyWarning",
    "StateFileError",
    "cipher_max",
]
