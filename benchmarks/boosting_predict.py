"""Predict time of our gradient boosting beside XGBoost's (the fastest peer's) in one process.

Both models are fitted once on a shape of ``matrix.py`` (``ensembles.make_model``'s
settings: 100 rounds, 31 leaves, 255 bins), then each predicts the shape's test rows
``--repeats`` times, the two alternating (ours first on even repeats) so that load from
other processes falls on both alike. Prints the median wall and CPU seconds of each and
their ratios: on a shared machine the CPU seconds are the guide.

    PYTHONPATH=src .venv/bin/python benchmarks/boosting_predict.py narrow
    PYTHONPATH=src .venv/bin/python benchmarks/boosting_predict.py wide_784 --train-rows 5000
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from ensembles import make_model
from matrix import load_shape


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", help="a shape of matrix.py (not sparse_text)")
    parser.add_argument("--train-rows", type=int, default=None,
                        help="fit on the first N training rows (default: all)")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    X_train, X_test, y_train, _ = load_shape(args.shape)
    if args.train_rows is not None:
        X_train, y_train = X_train[:args.train_rows], y_train[:args.train_rows]
    regression = args.shape == "regression"
    models = {name: make_model(name, regression).fit(X_train, y_train)
              for name in ("ours_gb_hist", "xgboost")}
    for model in models.values():
        model.predict(X_test[:100])  # warm: our kernels loaded, XGBoost's predictor set up
    times: dict[str, list] = {name: [] for name in models}
    for repeat in range(args.repeats):
        for name in (list(models) if repeat % 2 == 0 else list(models)[::-1]):
            wall, cpu = time.perf_counter(), time.process_time()
            models[name].predict(X_test)
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    medians = {name: np.median(np.array(t), axis=0) for name, t in times.items()}
    ours, peer = medians["ours_gb_hist"], medians["xgboost"]
    print(f"{args.shape}: {X_train.shape[0]:,} x {X_train.shape[1]} train, "
          f"{X_test.shape[0]:,} test rows, {args.repeats} repeats, 1-minute load "
          f"{os.getloadavg()[0]:.1f}")
    for name, (wall, cpu) in medians.items():
        print(f"  {name:14s} wall {wall * 1e3:8.1f} ms  CPU {cpu * 1e3:8.1f} ms")
    print(f"  ours / XGBoost: wall {ours[0] / peer[0]:.2f}x, CPU {ours[1] / peer[1]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
