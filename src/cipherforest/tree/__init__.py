"""CART decision trees: flat tree arrays, criteria, exact and histogram split finders, growth,
pruning, and the scikit-learn style estimators.

The public names are imported on first use (see :mod:`cipherforest._lazy`).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "DecisionTreeClassifier": "._classes",
    "DecisionTreeRegressor": "._classes",
    "ExtraTreeClassifier": "._classes",
    "ExtraTreeRegressor": "._classes",
    "Tree": "._tree",
    "export_text": "._export",
    "plot_tree": "._export",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers see the names (X as X marks a re-export)
    from ._classes import DecisionTreeClassifier as DecisionTreeClassifier
    from ._classes import DecisionTreeRegressor as DecisionTreeRegressor
    from ._classes import ExtraTreeClassifier as ExtraTreeClassifier
    from ._classes import ExtraTreeRegressor as ExtraTreeRegressor
    from ._export import export_text as export_text
    from ._export import plot_tree as plot_tree
    from ._tree import Tree as Tree
