"""A random forest on order-preserving ciphertexts (the paper's OPE comparison, [96]).

Not one of the paper's six baselines: the paper compares OPE's *leakage* with GIPE's
(Figure 3); this forest puts an accuracy and a time beside that leakage. The encryption is
:class:`~cipherforest.experiments.baselines.OrderPreservingEncryptor`.
"""

from __future__ import annotations

import time

from ..baselines import OrderPreservingEncryptor
from ..common import forest_kwargs
from .base import ForestSetting, Method, MethodOutput
from .plaintext import FOREST_CODE

__all__ = ["method"]


def method() -> Method:
    """RF on OPE ciphertexts; encryption time counts as training/prediction time."""
    def run(X_train, y_train, X_test, setting: ForestSetting) -> MethodOutput:
        from ...ensemble import RandomForestClassifier

        start = time.perf_counter()
        ope = OrderPreservingEncryptor(random_state=setting.random_state + 104729)
        forest = RandomForestClassifier(**forest_kwargs(setting)).fit(
            ope.fit_transform(X_train), y_train)
        fitted = time.perf_counter()
        pred = forest.predict(ope.transform(X_test))
        return MethodOutput(pred, fitted - start, time.perf_counter() - fitted)

    return Method("ope_rf", "RF on OPE ciphers (not a paper baseline)", run, kind="extra",
                  code=(*FOREST_CODE, "experiments/baselines.py", "experiments/methods/ope_rf.py"),
                  description="Keyed piecewise-linear order-preserving encryption per feature; "
                              "not one of the paper's six baselines (the paper compares OPE's "
                              "leakage only).")
