"""cipherforest: fast scikit-learn compatible tree ensembles, trainable on encrypted data.

``import cipherforest`` is cheap: the estimators (and scikit-learn, numba and SEAL behind
them) are imported on first use of their names (see :mod:`cipherforest._lazy`).
"""

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

_EXPORTS = {
    "AdaBoostClassifier": ".ensemble",
    "AdaBoostRegressor": ".ensemble",
    "BaggingClassifier": ".ensemble",
    "BaggingRegressor": ".ensemble",
    "DecisionTreeClassifier": ".tree",
    "DecisionTreeRegressor": ".tree",
    "ExtraTreeClassifier": ".tree",
    "ExtraTreeRegressor": ".tree",
    "ExtraTreesClassifier": ".ensemble",
    "ExtraTreesRegressor": ".ensemble",
    "GradientBoostingClassifier": ".ensemble",
    "GradientBoostingRegressor": ".ensemble",
    "RandomForestClassifier": ".ensemble",
    "RandomForestRegressor": ".ensemble",
    "__version__": "._version",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers see the names (X as X marks a re-export)
    from ._version import __version__ as __version__
    from .ensemble import AdaBoostClassifier as AdaBoostClassifier
    from .ensemble import AdaBoostRegressor as AdaBoostRegressor
    from .ensemble import BaggingClassifier as BaggingClassifier
    from .ensemble import BaggingRegressor as BaggingRegressor
    from .ensemble import ExtraTreesClassifier as ExtraTreesClassifier
    from .ensemble import ExtraTreesRegressor as ExtraTreesRegressor
    from .ensemble import GradientBoostingClassifier as GradientBoostingClassifier
    from .ensemble import GradientBoostingRegressor as GradientBoostingRegressor
    from .ensemble import RandomForestClassifier as RandomForestClassifier
    from .ensemble import RandomForestRegressor as RandomForestRegressor
    from .tree import DecisionTreeClassifier as DecisionTreeClassifier
    from .tree import DecisionTreeRegressor as DecisionTreeRegressor
    from .tree import ExtraTreeClassifier as ExtraTreeClassifier
    from .tree import ExtraTreeRegressor as ExtraTreeRegressor
