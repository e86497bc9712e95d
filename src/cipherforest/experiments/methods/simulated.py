"""The encrypted forest's decisions computed on clear labels (``PrivateForestSimulator``).

The library's simulator runs the protocol's own planner and split decisions on the exact
class counts the client would decrypt, so its forests are distributed as the encrypted ones
(identical for deterministic choices) without the homomorphic layer. It gives the accuracy
of every privacy setting (GIPE mode, leaf rule, split selection, label ε) at a fraction of
the protocol's cost. Its running time is not the protocol's, so the report marks it "not
measured"; the real protocol's times are in the ``gipe_ckks_*`` rows.
"""

from __future__ import annotations

import time

from ..common import stratified_subsample
from .base import ForestSetting, Method, MethodOutput
from .plaintext import FOREST_CODE

__all__ = ["method"]


def method(split_selection: str = "gini", *, gipe_mode: str = "quantile",
           reveal_leaves: bool = False, label_epsilon: float | None = None,
           n_estimators: int | None = None, max_train_rows: int | None = None) -> Method:
    """The simulated encrypted forest in one privacy setting."""
    def run(X_train, y_train, X_test, setting: ForestSetting) -> MethodOutput:
        # Imported from its module until cipherforest.privacy re-exports it.
        from ...privacy.simulation import PrivateForestSimulator

        rows = stratified_subsample(y_train, max_train_rows, setting.random_state)
        model = PrivateForestSimulator(
            n_estimators or setting.n_estimators, max_features=setting.max_features,
            min_samples_split=setting.min_samples_split, random_state=setting.random_state,
            gipe_mode=gipe_mode, reveal_leaves=reveal_leaves,
            split_selection=split_selection, label_epsilon=label_epsilon)
        start = time.perf_counter()
        model.fit(X_train[rows], y_train[rows])
        fitted = time.perf_counter()
        pred = model.predict(X_test)
        extra = {"train_rows": int(rows.shape[0]),
                 "epsilon_spent": float(model.epsilon_spent_), "rounds": int(model.n_rounds_)}
        return MethodOutput(pred, fitted - start, time.perf_counter() - fitted, extra)

    name = split_selection + (f"_eps{label_epsilon:g}" if label_epsilon is not None else "")
    key = f"sim_{name}_{gipe_mode}" + ("_reveal" if reveal_leaves else "")
    what = [split_selection + (f" ε={label_epsilon:g}" if label_epsilon is not None else ""),
            f"GIPE {gipe_mode}"] + (["paper's leaf rule"] if reveal_leaves else [])
    reductions = []
    if n_estimators is not None:
        reductions.append(f"{n_estimators} trees")
    if max_train_rows is not None:
        reductions.append(f"at most {max_train_rows} training rows per fold")
    return Method(
        key, f"encrypted forest, simulated ({', '.join(what)})", run,
        {"split_selection": split_selection, "gipe_mode": gipe_mode,
         "reveal_leaves": reveal_leaves, "label_epsilon": label_epsilon,
         "n_estimators": n_estimators, "max_train_rows": max_train_rows},
        description="PrivateForestSimulator: the protocol's decisions on clear labels, "
                    f"{', '.join(what)}" + (f"; reduced: {', '.join(reductions)}"
                                            if reductions else "") + "; time not measured.",
        time_measured=False, protocol=True,
        code=(*FOREST_CODE, "privacy", "experiments/methods/simulated.py"))
