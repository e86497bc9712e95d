"""Plaintext random forests: cipherforest's and scikit-learn's (the paper's "Original RFs")."""

from __future__ import annotations

from ..common import forest_kwargs
from .base import ForestSetting, Method, fit_predict_timed

__all__ = ["FOREST_CODE", "ours", "sklearn"]

# Source folders (relative to the package) of cipherforest's forests: every method that trains
# one lists them, so that the result cache is invalidated when the forest code changes.
FOREST_CODE = ("tree", "ensemble")


def ours() -> Method:
    """cipherforest's :class:`~cipherforest.ensemble.RandomForestClassifier` on plaintext."""
    def run(X_train, y_train, X_test, setting: ForestSetting):
        from ...ensemble import RandomForestClassifier

        return fit_predict_timed(RandomForestClassifier(**forest_kwargs(setting)),
                                 X_train, y_train, X_test)

    return Method("rf_ours", "plaintext RF (cipherforest)", run, kind="plaintext",
                  code=(*FOREST_CODE, "experiments/methods/plaintext.py"),
                  description="Random forest on plaintext, cipherforest's implementation.")


def sklearn() -> Method:
    """scikit-learn's random forest on plaintext (the paper's Original RFs)."""
    def run(X_train, y_train, X_test, setting: ForestSetting):
        from sklearn.ensemble import RandomForestClassifier

        return fit_predict_timed(RandomForestClassifier(**forest_kwargs(setting)),
                                 X_train, y_train, X_test)

    return Method("rf_sklearn", "Original RFs (scikit-learn)", run, kind="plaintext",
                  code=("experiments/methods/plaintext.py",),
                  description="scikit-learn's RandomForestClassifier on plaintext: the "
                              "paper's Original RFs.")
