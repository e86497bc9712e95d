"""Plaintext random forests: cipherforest's and scikit-learn's (the paper's "Original RFs")."""

from __future__ import annotations

from .base import ForestSetting, Method, fit_predict_timed


def _forest_kwargs(setting: ForestSetting) -> dict:
    return {"n_estimators": setting.n_estimators, "max_features": setting.max_features,
            "min_samples_split": setting.min_samples_split,
            "random_state": setting.random_state, "n_jobs": setting.n_jobs}


def ours() -> Method:
    """cipherforest's :class:`~cipherforest.ensemble.RandomForestClassifier` on plaintext."""
    def run(X_train, y_train, X_test, setting: ForestSetting):
        from ...ensemble import RandomForestClassifier

        return fit_predict_timed(RandomForestClassifier(**_forest_kwargs(setting)),
                                 X_train, y_train, X_test)

    return Method("rf_ours", "plaintext RF (cipherforest)", run,
                  description="Random forest on plaintext, cipherforest's implementation.")


def sklearn() -> Method:
    """scikit-learn's random forest on plaintext (the paper's Original RFs)."""
    def run(X_train, y_train, X_test, setting: ForestSetting):
        from sklearn.ensemble import RandomForestClassifier

        return fit_predict_timed(RandomForestClassifier(**_forest_kwargs(setting)),
                                 X_train, y_train, X_test)

    return Method("rf_sklearn", "plaintext RF (scikit-learn)", run,
                  description="scikit-learn's RandomForestClassifier, the paper's Original RFs.")
