"""Predict time of our extra trees (or random forest) beside scikit-learn's, in one process.

Both forests are fitted once on a shape of ``matrix.py`` (``matrix.make_model``'s settings,
``--trees`` trees), then each predicts the shape's test rows ``--repeats`` times on one
thread and on every core, the two libraries alternating (ours first on even repeats) so
that load from other processes falls on both alike. Prints the median wall and CPU seconds
of each and their ratios: on a shared machine the CPU seconds are the guide, the wall
seconds on every core show how the threads share the work.

    PYTHONPATH=src .venv/bin/python benchmarks/forest_predict.py narrow --trees 50
    PYTHONPATH=src .venv/bin/python benchmarks/forest_predict.py wide_2000 --kind rf
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from matrix import load_shape, make_model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", help="a shape of matrix.py")
    parser.add_argument("--kind", choices=("et", "rf"), default="et",
                        help="extra trees (default) or random forests")
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    X_train, X_test, y_train, _ = load_shape(args.shape)
    regression = args.shape == "regression"
    models = {}
    for name in (f"ours_{args.kind}", f"sklearn_{args.kind}"):
        model = make_model(name, regression, X_train.shape[1])
        models[name] = model.set_params(n_estimators=args.trees).fit(X_train, y_train)
        model.predict(X_test[:100])  # warm: our kernels loaded
    jobs = (1, -1)
    times: dict[tuple[str, int], list] = {(name, n): [] for name in models for n in jobs}
    for repeat in range(args.repeats):
        for name in (list(models) if repeat % 2 == 0 else list(models)[::-1]):
            for n_jobs in jobs:
                models[name].set_params(n_jobs=n_jobs)
                wall, cpu = time.perf_counter(), time.process_time()
                models[name].predict(X_test)
                times[name, n_jobs].append((time.perf_counter() - wall,
                                            time.process_time() - cpu))
    medians = {key: np.median(np.array(t), axis=0) for key, t in times.items()}
    print(f"{args.shape}: {X_train.shape[0]:,} x {X_train.shape[1]} train, "
          f"{X_test.shape[0]:,} test rows, {args.trees} trees, {args.repeats} repeats, "
          f"1-minute load {os.getloadavg()[0]:.1f}")
    ours, peer = models
    for n_jobs in jobs:
        for name in models:
            wall, cpu = medians[name, n_jobs]
            print(f"  {name:12s} n_jobs={n_jobs:2d}  wall {wall:7.3f} s  CPU {cpu:7.3f} s")
        (ours_wall, ours_cpu), (peer_wall, peer_cpu) = medians[ours, n_jobs], medians[peer, n_jobs]
        print(f"  ours / scikit-learn, n_jobs={n_jobs}: wall {ours_wall / peer_wall:.2f}x, "
              f"CPU {ours_cpu / peer_cpu:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
