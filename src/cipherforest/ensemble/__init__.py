"""Tree ensembles: bagging, random forests, extra trees, AdaBoost (more arrive as they land)."""

from ._bagging import BaggingClassifier, BaggingRegressor
from ._forest import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from ._weight_boosting import AdaBoostClassifier, AdaBoostRegressor

__all__ = [
    "BaggingClassifier",
    "BaggingRegressor",
    "AdaBoostClassifier",
    "AdaBoostRegressor",
    "ExtraTreesClassifier",
    "ExtraTreesRegressor",
    "RandomForestClassifier",
    "RandomForestRegressor",
]
