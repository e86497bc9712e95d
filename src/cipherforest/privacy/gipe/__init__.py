"""Gini-impurity-preserving encryption (GIPE) of numeric features.

* :mod:`.encryptor` — :class:`GiniPreservingEncryptor` (the scikit-learn transformer), its
  modes and constants, and its state files;
* :mod:`.column_state` — :class:`~.column_state.ColumnState`, one feature's secret state;
* :mod:`.kernels` — the numba kernels over that state's arrays, and the arrays' layout;
* :mod:`.codebook` — the states of the label-independent modes ``"order"`` and
  ``"quantile"``;
* :mod:`.cipher2` — the authenticated encryption of a row's positions (cipher2).
"""

from ..state_file import StateFileError
from .cipher2 import GipeDecryptionError
from .column_state import CipherSpaceError
from .encryptor import (
    DEFAULT_MODE,
    DEFAULT_N_BINS,
    MAX_CIPHER,
    MODES,
    GiniPreservingEncryptor,
    GipeRekeyWarning,
    cipher_max,
)

__all__ = [
    "DEFAULT_MODE",
    "DEFAULT_N_BINS",
    "MAX_CIPHER",
    "MODES",
    "CipherSpaceError",
    "GiniPreservingEncryptor",
    "GipeDecryptionError",
    "GipeRekeyWarning",
    "StateFileError",
    "cipher_max",
]
