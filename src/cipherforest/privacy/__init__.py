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

The public names are imported on first use (see :mod:`cipherforest._lazy`), so that SEAL and
the protocol code load only when used.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "MAX_CIPHER": ".gipe",
    "CipherSpaceError": ".gipe",
    "GiniPreservingEncryptor": ".gipe",
    "GipeDecryptionError": ".gipe",
    "GipeRekeyWarning": ".gipe",
    "HEError": ".he",
    "PrivateForestClient": ".client",
    "PrivateForestServer": ".server",
    "ProtocolError": ".protocol",
    "ProtocolStats": ".client",
    "StateFileError": "._state_file",
    "cipher_max": ".gipe",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers see the names (X as X marks a re-export)
    from ._state_file import StateFileError as StateFileError
    from .client import PrivateForestClient as PrivateForestClient
    from .client import ProtocolStats as ProtocolStats
    from .gipe import MAX_CIPHER as MAX_CIPHER
    from .gipe import CipherSpaceError as CipherSpaceError
    from .gipe import GiniPreservingEncryptor as GiniPreservingEncryptor
    from .gipe import GipeDecryptionError as GipeDecryptionError
    from .gipe import GipeRekeyWarning as GipeRekeyWarning
    from .gipe import cipher_max as cipher_max
    from .he import HEError as HEError
    from .protocol import ProtocolError as ProtocolError
    from .server import PrivateForestServer as PrivateForestServer
