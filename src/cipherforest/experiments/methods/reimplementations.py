"""Accuracy-equivalent stand-ins for the MPC systems that cannot run here.

PPD-ERTs, PivotRFs and MulPRFs are protocols (secure multi-party computation, threshold
homomorphic encryption) whose models are standard tree ensembles. What they compute can be
reproduced in plaintext, which gives their *accuracy*; their running time is that of the
protocol, which we do not have, so the report marks it "not measured".

* PPD-ERTs: extremely randomized trees (completely random splits), 100 trees.
* PivotRFs: random forest with Pivot's depth limit (``max_depth``, default 4: our choice,
  stated in the report; the limit exists because each level costs protocol rounds).
* MulPRFs: plaintext random forest; one-vs-all for more than two classes, since MulPRFs is
  binary only (as the paper ran it).
"""

from __future__ import annotations

from ..common import forest_kwargs
from .base import ForestSetting, Method, fit_predict_timed
from .plaintext import FOREST_CODE

__all__ = ["mulprfs", "pivot_rfs", "ppd_erts"]

_CODE = (*FOREST_CODE, "experiments/methods/reimplementations.py")


def ppd_erts() -> Method:
    def run(X_train, y_train, X_test, setting: ForestSetting):
        from ...ensemble import ExtraTreesClassifier

        return fit_predict_timed(ExtraTreesClassifier(**forest_kwargs(setting)),
                                 X_train, y_train, X_test)

    return Method("ppd_erts", "PPD-ERTs (stand-in)", run, kind="stand-in",
                  time_measured=False, code=_CODE,
                  description="Extremely randomized trees in plaintext: PPD-ERTs' model, not "
                              "its protocol; time not measured.")


def pivot_rfs(max_depth: int = 4) -> Method:
    def run(X_train, y_train, X_test, setting: ForestSetting):
        from ...ensemble import RandomForestClassifier

        return fit_predict_timed(RandomForestClassifier(**forest_kwargs(setting),
                                                        max_depth=max_depth),
                                 X_train, y_train, X_test)

    return Method(f"pivot_rfs_d{max_depth}", f"PivotRFs (stand-in, depth {max_depth})",
                  run, {"max_depth": max_depth}, kind="stand-in", time_measured=False,
                  code=_CODE,
                  description=f"Random forest limited to depth {max_depth} in plaintext: "
                              "PivotRFs' model, not its protocol; time not measured.")


def mulprfs() -> Method:
    def run(X_train, y_train, X_test, setting: ForestSetting):
        import numpy as np
        from sklearn.multiclass import OneVsRestClassifier

        from ...ensemble import RandomForestClassifier

        forest = RandomForestClassifier(**forest_kwargs(setting))
        model = forest if np.unique(y_train).shape[0] <= 2 else OneVsRestClassifier(forest)
        return fit_predict_timed(model, X_train, y_train, X_test)

    return Method("mulprfs", "MulPRFs (stand-in)", run, kind="stand-in",
                  time_measured=False, code=_CODE,
                  description="Plaintext random forest, one-vs-all for multiclass: MulPRFs' "
                              "model, not its MPC protocol; time not measured.")
