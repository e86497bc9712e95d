"""Privacy: Gini-impurity-preserving encryption (GIPE) of features and its leakage analysis.

* :class:`GiniPreservingEncryptor` — the paper's scheme as a scikit-learn transformer;
  ``fit_transform`` / ``transform`` give the integer cipher matrix a
  :class:`~cipherforest.ensemble.RandomForestClassifier` trains and predicts on.
* :class:`PrivateForestClient` / :class:`PrivateForestServer` — the paper's encrypted random
  forest: GIPE features, CKKS (or exact BFV) labels, one round trip per tree level.
* :mod:`cipherforest.privacy.leakage` — the bitwise leakage matrix (Roy et al., CCS 2022;
  the paper's appendix E) of a column under GIPE or order-preserving encryption.
* :mod:`cipherforest.privacy.attacks` — attacks on the encrypted forest from what a server
  holds (cipher matrix, transcript, trees), each scored against the majority-class baseline.
"""

from ._state_file import StateFileError
from .client import PrivateForestClient, ProtocolStats
from .gipe import (
    MAX_CIPHER,
    CipherSpaceError,
    GiniPreservingEncryptor,
    GipeDecryptionError,
    GipeRekeyWarning,
    cipher_max,
)
from .he import HEError
from .protocol import ProtocolError
from .server import PrivateForestServer

__all__ = [
    "MAX_CIPHER",
    "CipherSpaceError",
    "GiniPreservingEncryptor",
    "GipeDecryptionError",
    "GipeRekeyWarning",
    "HEError",
    "PrivateForestClient",
    "PrivateForestServer",
    "ProtocolError",
    "ProtocolStats",
    "StateFileError",
    "cipher_max",
]
