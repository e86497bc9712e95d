"""CART decision trees: flat tree arrays, criteria, exact and histogram split finders, growth,
pruning, and the scikit-learn style estimators."""

from ._classes import (
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    ExtraTreeClassifier,
    ExtraTreeRegressor,
)
from ._export import export_text, plot_tree
from ._tree import Tree

__all__ = [
    "DecisionTreeClassifier",
    "DecisionTreeRegressor",
    "ExtraTreeClassifier",
    "ExtraTreeRegressor",
    "Tree",
    "export_text",
    "plot_tree",
]
