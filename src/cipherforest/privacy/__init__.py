"""Privacy random forests: GIPE feature encryption, encrypted labels, the protocol, attacks.

* :class:`GiniPreservingEncryptor` — the paper's scheme as a scikit-learn transformer
  (:mod:`.gipe`); ``fit_transform`` / ``transform`` give the integer cipher matrix a
  :class:`~cipherforest.ensemble.RandomForestClassifier` trains and predicts on.
* :class:`PrivateForestRegressor` — the regression forest on the same server: GIPE features,
  targets privatised by randomized response on bins (:mod:`.target_dp`), leaf values from
  the true targets on the client.
* :class:`PrivateForestClient` / :class:`PrivateForestServer` — the encrypted random
  forest: GIPE features, CKKS (or exact BFV) labels (:mod:`.he`), one round trip per tree
  level (:mod:`.protocol`); :class:`PrivateForestSimulator` grows the same forest on clear
  labels for experiments (:class:`PrivateForestRegressorSimulator`: the regressor's, the
  server's side in-process); :class:`PrivateGradientBoostingSimulator` boosts on randomized-
  response labels with the leaf values refitted by the client (:mod:`.boosting`);
  :class:`PrivateGradientBoostingClassifier` is that boosting through the protocol,
  :class:`PrivateGradientBoostingRegressor` its squared-error twin on privatised targets.
* :mod:`.dp` — label-DP mechanisms and the budget accountant; :class:`PrivacyLedger` — the
  client-side record of what each release of a dataset's labels spent (cumulative ε).
* :mod:`.package` — a fitted or staged client saved to a private directory.
* :mod:`cipherforest.privacy.leakage` — the bitwise leakage matrix (Roy et al., CCS 2022;
  the paper's appendix E) of a column under GIPE or order-preserving encryption.
* :mod:`cipherforest.privacy.attacks` — attacks on the encrypted forest from what a server
  holds (cipher matrix, transcript, trees), each scored against the majority-class baseline.

docs/architecture.md draws the layers and the data flow of a private fit. The public names
are imported on first use (see :mod:`cipherforest._lazy`), so that SEAL and the protocol
code load only when used.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "MAX_CIPHER": ".gipe",
    "CipherSpaceError": ".gipe",
    "ClientSession": ".protocol",
    "GiniPreservingEncryptor": ".gipe",
    "GipeDecryptionError": ".gipe",
    "GipeRekeyWarning": ".gipe",
    "HEError": ".he",
    "LedgerError": ".ledger",
    "PrivacyLedger": ".ledger",
    "PrivateForestClient": ".client",
    "PrivateForestRegressor": ".regressor",
    "PrivateForestRegressorSimulator": ".simulation",
    "PrivateForestServer": ".protocol",
    "PrivateForestSimulator": ".simulation",
    "PrivateGradientBoostingClassifier": ".boosting_client",
    "PrivateGradientBoostingRegressor": ".boosting_client",
    "PrivateGradientBoostingSimulator": ".boosting",
    "ProtocolError": ".protocol",
    "ProtocolStats": ".protocol",
    "ServerDeviationWarning": ".client",
    "StateFileError": ".state_file",
    "cipher_max": ".gipe",
    "ridge_leaf_values": ".leaf_refit",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers see the names (X as X marks a re-export)
    from .boosting import PrivateGradientBoostingSimulator as PrivateGradientBoostingSimulator
    from .boosting_client import (
        PrivateGradientBoostingClassifier as PrivateGradientBoostingClassifier,
    )
    from .boosting_client import (
        PrivateGradientBoostingRegressor as PrivateGradientBoostingRegressor,
    )
    from .client import PrivateForestClient as PrivateForestClient
    from .client import ServerDeviationWarning as ServerDeviationWarning
    from .gipe import MAX_CIPHER as MAX_CIPHER
    from .gipe import CipherSpaceError as CipherSpaceError
    from .gipe import GiniPreservingEncryptor as GiniPreservingEncryptor
    from .gipe import GipeDecryptionError as GipeDecryptionError
    from .gipe import GipeRekeyWarning as GipeRekeyWarning
    from .gipe import cipher_max as cipher_max
    from .he import HEError as HEError
    from .leaf_refit import ridge_leaf_values as ridge_leaf_values
    from .ledger import LedgerError as LedgerError
    from .ledger import PrivacyLedger as PrivacyLedger
    from .protocol import ClientSession as ClientSession
    from .protocol import PrivateForestServer as PrivateForestServer
    from .protocol import ProtocolError as ProtocolError
    from .protocol import ProtocolStats as ProtocolStats
    from .regressor import PrivateForestRegressor as PrivateForestRegressor
    from .simulation import PrivateForestRegressorSimulator as PrivateForestRegressorSimulator
    from .simulation import PrivateForestSimulator as PrivateForestSimulator
    from .state_file import StateFileError as StateFileError
