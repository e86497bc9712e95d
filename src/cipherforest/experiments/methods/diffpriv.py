"""DiffPrivRFs: diffprivlib's differentially private random forest (IBM, the paper's [93]).

Compatibility shim: diffprivlib 0.6.6 imports ``DOUBLE`` and ``DTYPE`` from
``sklearn.tree._tree``, which scikit-learn 1.9 removed, so ``import diffprivlib`` fails.
:func:`import_diffprivlib` defines the two names (the dtypes they always were) before the
import, only when they are missing. ``tests/experiments/test_experiments_data_and_methods.py``
imports through it and trains a forest, so the day this stops working the test fails by name.

Parameters: ε (default 1.0) for the whole forest; ``bounds`` are taken from the training
fold (diffprivlib would otherwise spend budget or warn); diffprivlib's own defaults for the
rest (``max_depth=5``); 100 trees as every method.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..._sklearn_compat import restore_tree_dtype_names
from .base import ForestSetting, Method, fit_predict_timed

__all__ = ["import_diffprivlib", "method"]


def import_diffprivlib():
    """``diffprivlib.models``, after the scikit-learn >= 1.9 shim when it is needed."""
    restore_tree_dtype_names()
    try:
        import diffprivlib.models as models
    except ImportError as exc:
        raise ImportError(f"DiffPrivRFs needs diffprivlib (pip install diffprivlib): {exc}"
                          ) from exc
    return models


def method(epsilon: float = 1.0) -> Method:
    """diffprivlib's ``RandomForestClassifier`` at privacy budget ``epsilon``."""
    if not epsilon > 0:
        raise ValueError(f"epsilon must be positive, got {epsilon!r}")

    def run(X_train, y_train, X_test, setting: ForestSetting):
        models = import_diffprivlib()
        model = models.RandomForestClassifier(
            n_estimators=setting.n_estimators, epsilon=epsilon,
            bounds=(X_train.min(axis=0), X_train.max(axis=0)),
            classes=np.unique(y_train).tolist(), random_state=setting.random_state,
            n_jobs=setting.n_jobs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fit_predict_timed(model, X_train, y_train, X_test)

    return Method(f"diffpriv_rf_eps{epsilon:g}", f"DiffPrivRFs (library, ε = {epsilon:g})",
                  run,
                  {"epsilon": epsilon}, kind="library",
                  code=("experiments/methods/diffpriv.py",),
                  description=f"diffprivlib RandomForestClassifier, ε = {epsilon:g}, bounds "
                              "from the training fold, diffprivlib defaults otherwise.")
