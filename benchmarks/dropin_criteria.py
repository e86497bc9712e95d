"""Fit time of the trees that grow on the general kernel (``tree/_grower_general.py``):
``criterion="absolute_error"``, multi-output y and ``monotonic_cst``, against scikit-learn's
trees on the same data, side by side with ratios.

    python benchmarks/dropin_criteria.py                 # 3 runs, sizes 5k, 20k, 80k
    python benchmarks/dropin_criteria.py --sizes 20000 --runs 5

Data: ``make_regression`` (10 features, 5 informative, noise 10), one target or three
(``multi-output``), or a binary label (``y > median``, ``monotonic`` classification). Each
row of the table is the median of ``--runs`` fits after one warm-up fit per model (numba
compiles on the first call; its cache then serves later processes). Also prints how far
both libraries' predictions on the training rows are apart (max absolute difference): the
absolute error has exact ties between split positions (its loss is piecewise linear, so
moving a sample that lies between the two children's medians can leave the sum unchanged),
which we break towards the lower threshold and scikit-learn by its float rounding, so
depth-limited trees can differ; fully grown trees predict the training rows alike.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def cases(n: int):
    """(name, our estimator, scikit-learn's estimator, X, y) of every benchmark row."""
    import sklearn.tree as sk
    from sklearn.datasets import make_regression

    import cipherforest as cf

    X, y = make_regression(n_samples=n, n_features=10, n_informative=5, noise=10.0,
                           random_state=0)
    _, Y = make_regression(n_samples=n, n_features=10, n_informative=5, noise=10.0,
                           n_targets=3, random_state=0)
    labels = (y > np.median(y)).astype(int)
    cst = [1, -1] + [0] * 8
    return [
        ("absolute_error, max_depth=8", cf.DecisionTreeRegressor(
            criterion="absolute_error", max_depth=8), sk.DecisionTreeRegressor(
            criterion="absolute_error", max_depth=8), X, y),
        ("absolute_error, full depth", cf.DecisionTreeRegressor(criterion="absolute_error"),
         sk.DecisionTreeRegressor(criterion="absolute_error"), X, y),
        ("multi-output (3) squared_error", cf.DecisionTreeRegressor(),
         sk.DecisionTreeRegressor(), X, Y),
        ("monotonic_cst regression", cf.DecisionTreeRegressor(monotonic_cst=cst),
         sk.DecisionTreeRegressor(monotonic_cst=cst), X, y),
        ("monotonic_cst classification", cf.DecisionTreeClassifier(monotonic_cst=cst),
         sk.DecisionTreeClassifier(monotonic_cst=cst), X, labels),
    ]


def fit_seconds(model, X, y, runs: int) -> float:
    model.fit(X, y)  # warm-up (compiles our kernels on the first call)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        model.fit(X, y)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000, 80000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"# dropin_criteria: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, median of {args.runs} fits (single thread, exact splits)")
    print()
    print("| case | n_samples | cipherforest s | scikit-learn s | ratio (ours / sklearn) "
          "| max abs prediction difference |")
    print("|---|---|---|---|---|---|")
    for n in args.sizes:
        for name, ours, ref, X, y in cases(n):
            t_ours = fit_seconds(ours, X, y, args.runs)
            t_ref = fit_seconds(ref, X, y, args.runs)
            diff = float(np.max(np.abs(np.asarray(ours.predict(X), dtype=float)
                                       - np.asarray(ref.predict(X), dtype=float))))
            print(f"| {name} | {n} | {t_ours:.3f} | {t_ref:.3f} | {t_ours / t_ref:.2f}x "
                  f"| {diff:.3g} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
