"""AnonyRFs: a random forest trained on Mondrian k-anonymised features (the paper's [59]).

The anonymisation is :func:`~cipherforest.experiments.baselines.mondrian_partition` (own
implementation of strict Mondrian). The forest trains on the generalised training fold; test
rows are predicted as they are (the model, not the queries, is what k-anonymity protects).
"""

from __future__ import annotations

import time

from ..baselines import generalise, mondrian_partition
from ..common import forest_kwargs
from .base import ForestSetting, Method, MethodOutput
from .plaintext import FOREST_CODE

__all__ = ["method"]


def method(k: int = 10) -> Method:
    """Random forest on the Mondrian ``k``-anonymised training fold."""
    def run(X_train, y_train, X_test, setting: ForestSetting) -> MethodOutput:
        from ...ensemble import RandomForestClassifier

        start = time.perf_counter()
        X_anon = generalise(X_train, mondrian_partition(X_train, k))
        forest = RandomForestClassifier(**forest_kwargs(setting)).fit(X_anon, y_train)
        fitted = time.perf_counter()
        pred = forest.predict(X_test)
        return MethodOutput(pred, fitted - start, time.perf_counter() - fitted)

    return Method(f"anony_rf_k{k}", f"AnonyRFs (re-implementation, k = {k})", run,
                  {"k": k}, kind="re-implementation",
                  code=(*FOREST_CODE, "experiments/baselines.py",
                        "experiments/methods/anony_rf.py"),
                  description=f"Mondrian k-anonymity (own implementation of the paper's "
                              f"[59]), k = {k}; training time includes anonymisation.")
