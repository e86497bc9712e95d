"""Sparse X: our tree models beside scikit-learn's (and LightGBM / XGBoost for boosting).

Cells (binary classification, CSR float64, the first 80 % of rows to train, the rest to
score):

* ``uniform``: 10,000 x 30,000, 0.2 % non-zero, values uniform in (0, 1), columns and
  rows drawn uniformly; the label is the sign of a sparse linear score (300 columns)
  against its median.
* ``text``: 20,000 x 50,000, text-like: each row ~60 distinct "terms" drawn with Zipf
  popularity, TF-IDF values (log counts times idf, rows scaled to unit norm); the label as
  above on 500 of the 5,000 most frequent terms.

Estimators: ``RandomForestClassifier(100, n_jobs=-1)``, ``ExtraTreesClassifier(100,
n_jobs=-1)``, ``DecisionTreeClassifier()``, ``GradientBoostingClassifier(100)`` (depth 3;
ours also with ``max_bins=255``), all ``random_state=0``; LightGBM ``LGBMClassifier(100,
num_leaves=8, max_depth=3)`` and XGBoost ``XGBClassifier(100, max_depth=3,
tree_method="hist")`` when installed. Every (cell, estimator) runs in a fresh process: the
data is made, a tiny fit and predict warm the library up (our kernels load from numba's
cache), then
one timed fit and one timed ``predict`` of the test rows. Peak RSS is the process's peak
(``ru_maxrss``), data included; "data" is the peak before the fit. The ratios are to the
fastest peer by wall-clock fit time (its fit CPU time for the CPU ratio): on a machine
shared with other jobs the CPU times compare better than the wall-clock ones.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/sparse.py [--cells uniform text]
        [--estimators rf et tree gb]
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
import scipy.sparse as sp

CELLS = ("uniform", "text")
FAMILIES = {
    "rf": ("ours", "sklearn"),
    "et": ("ours", "sklearn"),
    "tree": ("ours", "sklearn"),
    "gb": ("ours", "ours-hist", "sklearn", "lightgbm", "xgboost"),
}


def make_cell(name: str):
    """``(X, y)`` of a cell (module docstring), CSR float64, made without dense arrays."""
    rng = np.random.RandomState(0)
    if name == "uniform":
        n, f, density, n_signal = 10_000, 30_000, 0.002, 300
        nnz = int(n * f * density)
        X = sp.csr_matrix((rng.uniform(size=nnz), (rng.randint(0, n, nnz),
                                                   rng.randint(0, f, nnz))), shape=(n, f))
        signal_columns = rng.choice(f, n_signal, replace=False)
    elif name == "text":
        n, f, per_row, n_signal = 20_000, 50_000, 60, 500
        popularity = 1.0 / (np.arange(f) + 10.0) ** 1.1
        popularity /= popularity.sum()
        lengths = rng.poisson(per_row, n)
        rows = np.repeat(np.arange(n), lengths)
        cols = rng.choice(f, rows.shape[0], p=popularity)
        counts = sp.csr_matrix((np.ones(rows.shape[0]), (rows, cols)), shape=(n, f))
        counts.sum_duplicates()
        df = np.bincount(counts.indices, minlength=f)
        idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
        counts.data = np.log1p(counts.data) * idf[counts.indices]
        norms = np.sqrt(np.asarray(counts.multiply(counts).sum(axis=1)).ravel())
        X = sp.csr_matrix(sp.diags(1.0 / np.maximum(norms, 1e-12)) @ counts)
        signal_columns = rng.choice(5_000, n_signal, replace=False)
    else:
        raise ValueError(f"unknown cell {name!r}; choose from {CELLS}")
    X.sum_duplicates()
    coef = np.zeros(X.shape[1])
    coef[signal_columns] = rng.normal(size=n_signal)
    score = X @ coef
    y = (score > np.median(score)).astype(np.int64)
    return X, y


def make_estimator(family: str, lib: str):
    if lib in ("ours", "ours-hist"):
        from cipherforest import ensemble, tree
    elif lib == "sklearn":
        from sklearn import ensemble, tree
    if family == "rf":
        return ensemble.RandomForestClassifier(100, n_jobs=-1, random_state=0)
    if family == "et":
        return ensemble.ExtraTreesClassifier(100, n_jobs=-1, random_state=0)
    if family == "tree":
        return tree.DecisionTreeClassifier(random_state=0)
    if lib == "ours-hist":
        return ensemble.GradientBoostingClassifier(n_estimators=100, max_bins=255,
                                                   random_state=0)
    if lib in ("ours", "sklearn"):
        return ensemble.GradientBoostingClassifier(n_estimators=100, random_state=0)
    if lib == "lightgbm":
        import lightgbm

        return lightgbm.LGBMClassifier(n_estimators=100, num_leaves=8, max_depth=3,
                                       random_state=0, verbose=-1)
    import xgboost

    return xgboost.XGBClassifier(n_estimators=100, max_depth=3, tree_method="hist",
                                 random_state=0)


def run_one(cell: str, family: str, lib: str) -> dict:
    """One timed fit and predict (in this process)."""
    X, y = make_cell(cell)
    n_train = int(0.8 * X.shape[0])
    X_train, y_train, X_test, y_test = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    make_estimator(family, lib).fit(X_train[:200], y_train[:200]).predict(X_test[:50])
    data_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    model = make_estimator(family, lib)
    start, cpu = time.perf_counter(), time.process_time()
    model.fit(X_train, y_train)
    fit_s, fit_cpu_s = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    predicted = model.predict(X_test)
    predict_s = time.perf_counter() - start
    return {"cell": cell, "family": family, "lib": lib, "fit_s": fit_s, "fit_cpu_s": fit_cpu_s,
            "predict_s": predict_s, "score": float(np.mean(predicted == y_test)),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "data_mb": data_mb, "input_mb": (X.data.nbytes + X.indices.nbytes
                                             + X.indptr.nbytes) / 2**20}


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
    parser.add_argument("--cells", nargs="+", default=list(CELLS), choices=CELLS)
    parser.add_argument("--estimators", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--libs", nargs="+", default=None,
                        help="only these libraries (default: every one installed)")
    parser.add_argument("--one", nargs=3, metavar=("CELL", "FAMILY", "LIB"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(*args.one)))
        return
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
          f"(shared with other jobs when run beside them)", file=sys.stderr)
    results = []
    for cell in args.cells:
        for family in args.estimators:
            for lib in FAMILIES[family]:
                if (args.libs and lib not in args.libs) or not _available(lib):
                    continue
                out = subprocess.run([sys.executable, __file__, "--one", cell, family, lib],
                                     capture_output=True, text=True, env=os.environ)
                if out.returncode:
                    print(f"{cell} {family} {lib} failed:\n{out.stderr[-2000:]}",
                          file=sys.stderr)
                    continue
                result = json.loads(out.stdout.strip().splitlines()[-1])
                print(json.dumps(result), file=sys.stderr)
                results.append(result)
    print("| cell | estimator | library | fit s | fit CPU s | predict s | peak RSS MB (data) "
          "| accuracy | fit / fastest peer | fit CPU / peer's | RSS / scikit-learn |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        peers = [p for p in results if p["cell"] == r["cell"] and p["family"] == r["family"]
                 and not p["lib"].startswith("ours")]
        fastest = min(peers, key=lambda p: p["fit_s"], default=None)
        sk = [p["peak_mb"] for p in peers if p["lib"] == "sklearn"]
        ratio = r["fit_s"] / fastest["fit_s"] if fastest else np.nan
        cpu_ratio = r["fit_cpu_s"] / fastest["fit_cpu_s"] if fastest else np.nan
        print(f"| {r['cell']} | {r['family']} | {r['lib']} | {r['fit_s']:.2f} | "
              f"{r['fit_cpu_s']:.2f} | {r['predict_s']:.3f} | {r['peak_mb']:.0f} "
              f"({r['data_mb']:.0f}) | {r['score']:.4f} | {ratio:.2f} | {cpu_ratio:.2f} | "
              f"{r['peak_mb'] / sk[0] if sk else np.nan:.2f} |")


if __name__ == "__main__":
    main()
