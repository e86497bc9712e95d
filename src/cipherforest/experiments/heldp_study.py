"""HEldpRFs' encrypted training: the small CKKS run and the cost model's full-size predictions.

:func:`ckks_case` trains a few small trees through CKKS (:mod:`.heldp_ckks`) and in the clear
(:mod:`.heldp`) with the same draws, and reports the wall time, the cost model's prediction
of it, and how far the decrypted counts are from the clear ones. :func:`full_size_costs`
predicts, per dataset, the encrypted training time of the run's HEldpRFs setting (every
training row of a fold, the run's number of trees), and whether it ends within the paper's
cut-off of 10^6 s.
"""

from __future__ import annotations

import time

import numpy as np

from .common import stratified_subsample
from .datasets import Dataset
from .heldp import (
    SoftStep,
    SoftTree,
    plan_tree,
    scale_features,
    soft_predict,
    thresholds,
    train_tree,
)
from .heldp_ckks import (
    CkksEvaluator,
    CkksParameters,
    calibrate,
    count_training_ops,
    encrypt_data,
    predict_seconds,
    train_forest_encrypted,
)

__all__ = ["CUTOFF_SECONDS", "ckks_case", "full_size_costs"]

CUTOFF_SECONDS = 1e6  # the paper's: "no results after running out 10^6 seconds"


def ckks_case(datasets: list[Dataset], config) -> dict:
    """Run the small case of ``config.heldp_ckks`` both ways; the numbers of the report."""
    case, h = config.heldp_ckks, config.heldp
    data = next((d for d in datasets if d.name == case.dataset), datasets[0])
    rows = stratified_subsample(data.y, case.rows, config.seed)
    rest = np.setdiff1d(np.arange(data.y.shape[0]), rows)
    X = data.X[rows][:, : case.features]
    Y = np.eye(data.n_classes)[data.y[rows]]
    step = SoftStep.fit(h.degree, h.margin)
    grid = thresholds(case.thresholds)
    low, high = X.min(axis=0), X.max(axis=0)
    scaled = scale_features(X, low, high)
    right = step((scaled.T[:, None, :] - grid[None, :, None]) / 2.0)
    rng = np.random.default_rng(config.seed)
    k = max(1, int(np.sqrt(case.features)))
    plans = [plan_tree(rng, X.shape[0], case.features, k, case.depth) for _ in range(case.trees)]
    clear_trace: list = []
    clear = [train_tree(right, Y, plan, clear_trace) for plan in plans]
    params = CkksParameters.for_depth(case.depth, h.degree)
    start = time.perf_counter()
    ev = CkksEvaluator(params)
    keys = time.perf_counter() - start
    start = time.perf_counter()
    enc_trace: list = []
    encrypted = train_forest_encrypted(ev, encrypt_data(ev, scaled, Y), plans, step,
                                       case.thresholds, data.n_classes, enc_trace)
    seconds = time.perf_counter() - start
    op_seconds = calibrate(params)
    gap = max(max(np.abs(a[0] - b[0]).max(), np.abs(a[1] - b[1]).max())
              for a, b in zip(clear_trace, enc_trace, strict=True))
    same_splits = all(np.array_equal(c.feature, e["feature"])
                      and np.array_equal(c.threshold, e["threshold"])
                      for c, e in zip(clear, encrypted, strict=True))
    test = step((scale_features(data.X[rest][:, : case.features], low, high).T[:, None, :]
                 - grid[None, :, None]) / 2.0)
    votes = [sum(soft_predict(t, test) for t in trees) for trees in
             (clear, [SoftTree(e["feature"], e["threshold"], e["leaf_counts"])
                      for e in encrypted])]
    client_ops = {"encrypt", "decrypt"}
    return {
        "dataset": data.name, "rows": int(rows.shape[0]), "features": case.features,
        "classes": data.n_classes, "thresholds": case.thresholds, "depth": case.depth,
        "trees": case.trees, "poly_degree": params.poly_degree, "levels": params.levels,
        "key_seconds": keys, "seconds": seconds,
        "client_seconds": sum(v for (op, _), v in ev.seconds.items() if op in client_ops),
        "predicted_seconds": predict_seconds(ev.counts, op_seconds),
        "multiplications": sum(v for (op, _), v in ev.counts.items() if op == "mul"),
        "operations": sum(ev.counts.values()), "max_count_gap": float(gap),
        "same_splits": bool(same_splits),
        "prediction_agreement": float(np.mean(np.argmax(votes[0], axis=1)
                                              == np.argmax(votes[1], axis=1))),
        "test_rows": int(rest.shape[0]),
    }


def full_size_costs(datasets: list[Dataset], config) -> list[dict]:
    """Cost-model prediction of HEldpRFs' encrypted training per dataset (one fold)."""
    h = config.heldp
    step = SoftStep.fit(h.degree, h.margin)
    params = CkksParameters.for_depth(h.depth, h.degree)
    op_seconds = calibrate(params)
    out = []
    for data in datasets:
        n_train = data.y.shape[0] * (config.folds - 1) // config.folds
        d = data.X.shape[1]
        k = max(1, int(np.sqrt(d)))
        counts = count_training_ops(n_train, d, data.n_classes, config.n_estimators, h.depth,
                                    h.n_thresholds, k, step, params)
        seconds = predict_seconds(counts, op_seconds)
        client = sum(n * op_seconds[key] for key, n in counts.items()
                     if key[0] in ("encrypt", "decrypt"))
        out.append({"dataset": data.name, "train_rows": n_train, "features": d,
                    "classes": data.n_classes, "trees": config.n_estimators,
                    "depth": h.depth, "thresholds": h.n_thresholds,
                    "poly_degree": params.poly_degree, "levels": params.levels,
                    "chunks": -(-n_train // params.slots),
                    "multiplications": sum(n for (op, _), n in counts.items() if op == "mul"),
                    "operations": sum(counts.values()), "predicted_seconds": seconds,
                    "client_seconds": client,
                    "within_cutoff": bool(seconds <= CUTOFF_SECONDS)})
    return out
