"""HEldpRFs: random forests of soft trees trained as over FHE (the paper's [51]), in the clear.

The model is :class:`~cipherforest.experiments.heldp.HEldpForest`: the same polynomials, soft
counts, rounding and complete trees as the encrypted protocol, computed in float64. Its
accuracy is the protocol's (up to CKKS noise, see :mod:`..heldp_ckks`); its running time here
is not, so the report writes "not measured" and gives the cost model's prediction for the
encrypted training instead.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ..heldp import DEFAULT_DEGREE, DEFAULT_MARGIN, HEldpForest
from .base import ForestSetting, Method, MethodOutput

__all__ = ["HEldpSetting", "method"]


@dataclass(frozen=True)
class HEldpSetting:
    """HEldpRFs' own parameters (the forest's size and features per node are the shared
    setting's). ``depth``: complete trees of this depth; ``n_thresholds``: the public grid."""

    depth: int = 4
    n_thresholds: int = 7
    degree: int = DEFAULT_DEGREE
    margin: float = DEFAULT_MARGIN

    def __post_init__(self):
        for name in ("depth", "n_thresholds", "degree"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"HEldpRFs {name} must be at least 1, got "
                                 f"{getattr(self, name)!r}")


def method(setting: HEldpSetting | None = None) -> Method:
    """HEldpRFs computed in the clear with ``setting``."""
    h = HEldpSetting() if setting is None else setting

    def run(X_train, y_train, X_test, forest: ForestSetting) -> MethodOutput:
        model = HEldpForest(forest.n_estimators, max_depth=h.depth,
                            n_thresholds=h.n_thresholds, max_features=forest.max_features,
                            degree=h.degree, margin=h.margin,
                            random_state=forest.random_state)
        start = time.perf_counter()
        model.fit(X_train, y_train)
        fitted = time.perf_counter()
        pred = model.predict(X_test)
        return MethodOutput(pred, fitted - start, time.perf_counter() - fitted)

    return Method(
        "heldp_rf", "HEldpRFs (re-implementation)", run, asdict(h),
        kind="re-implementation", time_measured=False,
        code=("experiments/heldp.py", "experiments/methods/heldp_rf.py"),
        description=f"Soft trees of depth {h.depth} on a grid of {h.n_thresholds} thresholds "
                    f"per feature, degree-{h.degree} polynomial step, rounded client-side "
                    "Gini (Akavia et al., the paper's [51]), computed in the clear; its "
                    "encrypted training time is the cost model's prediction.")
