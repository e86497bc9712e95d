"""Tree ensembles: bagging, random forests, extra trees, gradient boosting and AdaBoost.

The public names are imported on first use (see :mod:`cipherforest._lazy`).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "AdaBoostClassifier": "._weight_boosting",
    "AdaBoostRegressor": "._weight_boosting",
    "BaggingClassifier": "._bagging",
    "BaggingRegressor": "._bagging",
    "ExtraTreesClassifier": "._forest",
    "ExtraTreesRegressor": "._forest",
    "GradientBoostingClassifier": "._gradient_boosting",
    "GradientBoostingRegressor": "._gradient_boosting",
    "RandomForestClassifier": "._forest",
    "RandomForestRegressor": "._forest",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers see the names (X as X marks a re-export)
    from ._bagging import BaggingClassifier as BaggingClassifier
    from ._bagging import BaggingRegressor as BaggingRegressor
    from ._forest import ExtraTreesClassifier as ExtraTreesClassifier
    from ._forest import ExtraTreesRegressor as ExtraTreesRegressor
    from ._forest import RandomForestClassifier as RandomForestClassifier
    from ._forest import RandomForestRegressor as RandomForestRegressor
    from ._gradient_boosting import GradientBoostingClassifier as GradientBoostingClassifier
    from ._gradient_boosting import GradientBoostingRegressor as GradientBoostingRegressor
    from ._weight_boosting import AdaBoostClassifier as AdaBoostClassifier
    from ._weight_boosting import AdaBoostRegressor as AdaBoostRegressor
