"""Tree ensembles: bagging, random forests, extra trees, gradient boosting and AdaBoost."""

from ._bagging import BaggingClassifier, BaggingRegressor
from ._forest import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from ._gradient_boosting import GradientBoostingClassifier, GradientBoostingRegressor
from ._weight_boosting import AdaBoostClassifier, AdaBoostRegressor

__all__ = [
    "BaggingClassifier",
    "BaggingRegressor",
    "AdaBoostClassifier",
    "AdaBoostRegressor",
    "ExtraTreesClassifier",
    "ExtraTreesRegressor",
    "GradientBoostingClassifier",
    "GradientBoostingRegressor",
    "RandomForestClassifier",
    "RandomForestRegressor",
]
