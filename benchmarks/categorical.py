"""Categorical columns: our gradient boosting with native categorical splits beside LightGBM,
XGBoost and scikit-learn's HistGradientBoosting (each with its own categorical support).

The cell (``make_categorical``, importable for ``benchmarks/matrix.py``): 100,000 rows
(the first 80 % train, the rest score), 10 categorical columns of 5 to 250 levels (levels
drawn with Zipf-like popularity) and 5 numeric columns; the binary label is a logistic draw
of the sum of a random effect per level of every categorical column and a linear term of
the numeric ones. ``--max-levels N`` spaces the 10 columns' levels geometrically from 5 to
``N`` instead (``--max-levels 500``: the issue's 5-500). Ours gives a column of more than
``max_bins`` (255) levels category bins (its 254 most frequent levels a bin each, the rest
one); HistGradientBoosting refuses such columns, so it reads them as ordinal codes.

Estimators, 100 rounds, learning rate 0.1, 31 leaves, all cores (``--threads N``: N threads
each — ``n_jobs`` / ``nthread`` and ``OMP_NUM_THREADS`` — which on a machine shared with other
jobs keeps the OpenMP libraries from spinning on descheduled threads):

* ``ours``: ``GradientBoostingClassifier(max_depth=None, max_leaf_nodes=31,
  min_samples_leaf=20, max_bins=255, categorical_features=<the 10 columns>, n_jobs=-1)``;
* ``ours-numeric``: the same without ``categorical_features`` (levels read as numbers);
* ``lightgbm``: ``LGBMClassifier(num_leaves=31)`` with ``categorical_feature=<columns>``;
* ``xgboost``: ``XGBClassifier(tree_method="hist", max_leaves=31, grow_policy="lossguide",
  enable_categorical=True)`` on a DataFrame with ``category`` columns;
* ``sklearn``: ``HistGradientBoostingClassifier(categorical_features=<columns>,
  early_stopping=False)``.

Every estimator runs in a fresh process: the data is made, a tiny fit and predict warm the
library up (our kernels load from numba's cache), then one timed fit and one timed predict of
the test rows. Peak RSS is the process's peak (``ru_maxrss``), data included; "data" is the
peak before the fit. Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/categorical.py [--rows 100000]
        [--threads 1] [--libs ours lightgbm ...] [--max-levels 500]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

import numpy as np

LIBS = ("ours", "ours-numeric", "lightgbm", "xgboost", "sklearn")
#: Levels of the categorical columns.
LEVELS = (5, 10, 20, 40, 60, 90, 120, 160, 200, 250)
N_NUMERIC = 5


def levels_up_to(max_levels: int | None) -> tuple[int, ...]:
    """The categorical columns' levels: ``LEVELS``, or 5 to ``max_levels`` geometrically."""
    if max_levels is None:
        return LEVELS
    return tuple(int(round(5 * (max_levels / 5) ** (j / 9))) for j in range(10))


def make_categorical(n_rows: int = 100_000, seed: int = 0, levels=LEVELS):
    """``(X, y, categorical)`` of the categorical cell (module docstring): float64 ``X``
    whose categorical columns hold level codes ``0..k-1`` (``k`` from ``levels``), binary
    ``y``, and the indices of the categorical columns."""
    rng = np.random.RandomState(seed)
    columns, logit = [], np.zeros(n_rows)
    for k in levels:
        popularity = 1.0 / (np.arange(k) + 2.0)
        popularity /= popularity.sum()
        codes = rng.choice(k, n_rows, p=popularity)
        effect = rng.normal(scale=1.0, size=k)
        logit += effect[codes]
        columns.append(codes)
    numeric = rng.normal(size=(n_rows, N_NUMERIC))
    logit += numeric @ rng.normal(scale=0.5, size=N_NUMERIC)
    logit = (logit - logit.mean()) / logit.std() * 2.0
    y = (rng.uniform(size=n_rows) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    X = np.column_stack(columns + [numeric]).astype(np.float64)
    return X, y, np.arange(len(levels))


def make_estimator(lib: str, categorical: np.ndarray, threads: int = -1, levels=LEVELS):
    if lib in ("ours", "ours-numeric"):
        from cipherforest.ensemble import GradientBoostingClassifier

        return GradientBoostingClassifier(
            n_estimators=100, max_depth=None, max_leaf_nodes=31, min_samples_leaf=20,
            max_bins=255, random_state=0, n_jobs=threads,
            categorical_features=categorical if lib == "ours" else None)
    if lib == "lightgbm":
        import lightgbm

        return lightgbm.LGBMClassifier(n_estimators=100, num_leaves=31, random_state=0,
                                       verbose=-1, n_jobs=threads)
    if lib == "xgboost":
        import xgboost

        return xgboost.XGBClassifier(n_estimators=100, tree_method="hist", max_leaves=31,
                                     max_depth=0, grow_policy="lossguide",
                                     enable_categorical=True, random_state=0,
                                     n_jobs=None if threads < 0 else threads)
    from sklearn.ensemble import HistGradientBoostingClassifier

    native = [int(j) for j in categorical if levels[j] <= 255]  # it refuses more levels
    return HistGradientBoostingClassifier(max_iter=100, categorical_features=native or None,
                                          early_stopping=False, random_state=0)


def _library_input(lib: str, X: np.ndarray, categorical: np.ndarray, levels=LEVELS):
    """XGBoost reads categories from pandas ``category`` columns; the others take X."""
    if lib != "xgboost":
        return X
    import pandas as pd

    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    for j in categorical:
        frame[f"f{j}"] = pd.Categorical(X[:, j].astype(np.int64),
                                        categories=np.arange(levels[j]))
    return frame


def _fit(model, lib: str, X, y, categorical):
    if lib == "lightgbm":
        return model.fit(X, y, categorical_feature=[int(j) for j in categorical])
    return model.fit(X, y)


def run_one(lib: str, n_rows: int, threads: int = -1, levels=LEVELS) -> dict:
    """One timed fit and predict (in this process)."""
    X, y, categorical = make_categorical(n_rows, levels=levels)
    n_train = int(0.8 * n_rows)
    X_in = _library_input(lib, X, categorical, levels)
    X_train, X_test = X_in[:n_train], X_in[n_train:]
    y_train, y_test = y[:n_train], y[n_train:]
    _fit(make_estimator(lib, categorical, threads, levels), lib, X_train[:2000],
         y_train[:2000], categorical).predict(X_test[:50])
    data_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    model = make_estimator(lib, categorical, threads, levels)
    start, cpu = time.perf_counter(), time.process_time()
    _fit(model, lib, X_train, y_train, categorical)
    fit_s, fit_cpu_s = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    predicted = model.predict(X_test)
    predict_s = time.perf_counter() - start
    return {"lib": lib, "fit_s": fit_s, "fit_cpu_s": fit_cpu_s, "predict_s": predict_s,
            "score": float(np.mean(np.asarray(predicted) == y_test)),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "data_mb": data_mb}


def _available(lib: str) -> bool:
    if lib not in ("lightgbm", "xgboost"):
        return True
    try:
        __import__(lib)
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--libs", nargs="+", default=list(LIBS), choices=LIBS)
    parser.add_argument("--threads", type=int, default=-1,
                        help="threads per library (default -1: all cores)")
    parser.add_argument("--max-levels", type=int, default=None,
                        help="levels of the 10 columns from 5 to this, geometrically "
                             f"(default: {', '.join(map(str, LEVELS))})")
    parser.add_argument("--one", metavar="LIB", help=argparse.SUPPRESS)
    args = parser.parse_args()
    levels = levels_up_to(args.max_levels)
    if args.one:
        print(json.dumps(run_one(args.one, args.rows, args.threads, levels)))
        return
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
          f"(shared with other jobs when run beside them)", file=sys.stderr)
    env = dict(os.environ)
    if args.threads > 0:
        env["OMP_NUM_THREADS"] = str(args.threads)
    results = []
    for lib in args.libs:
        if not _available(lib):
            continue
        extra = [] if args.max_levels is None else ["--max-levels", str(args.max_levels)]
        out = subprocess.run([sys.executable, __file__, "--one", lib, "--rows",
                              str(args.rows), "--threads", str(args.threads)] + extra,
                             capture_output=True, text=True, env=env)
        if out.returncode:
            print(f"{lib} failed:\n{out.stderr[-2000:]}", file=sys.stderr)
            continue
        result = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps(result), file=sys.stderr)
        results.append(result)
    peers = [r for r in results if not r["lib"].startswith("ours")]
    fastest = min(peers, key=lambda p: p["fit_s"], default=None)
    fastest_predict = min(peers, key=lambda p: p["predict_s"], default=None)
    smallest = min(peers, key=lambda p: p["peak_mb"], default=None)
    print("| library | fit s | fit CPU s | predict s | peak RSS MB (data) | accuracy | "
          "fit / fastest peer | predict / fastest peer | RSS / smallest peer |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        fit_ratio = r["fit_s"] / fastest["fit_s"] if fastest else np.nan
        predict_ratio = (r["predict_s"] / fastest_predict["predict_s"] if fastest_predict
                         else np.nan)
        rss_ratio = r["peak_mb"] / smallest["peak_mb"] if smallest else np.nan
        print(f"| {r['lib']} | {r['fit_s']:.2f} | {r['fit_cpu_s']:.2f} | "
              f"{r['predict_s']:.3f} | {r['peak_mb']:.0f} ({r['data_mb']:.0f}) | "
              f"{r['score']:.4f} | {fit_ratio:.2f} | {predict_ratio:.2f} | {rss_ratio:.2f} |")


if __name__ == "__main__":
    main()
