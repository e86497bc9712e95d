"""cipherforest: fast scikit-learn compatible tree ensembles, trainable on encrypted data."""

from importlib.metadata import PackageNotFoundError, version

from .tree import DecisionTreeClassifier, DecisionTreeRegressor

try:
    __version__ = version("cipherforest")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = ["DecisionTreeClassifier", "DecisionTreeRegressor", "__version__"]
