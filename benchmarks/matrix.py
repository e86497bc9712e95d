"""The benchmark matrix: every (shape x family) cell, ours beside every peer of the family.

Shapes (the last fifth of the rows held out, except where noted):

* ``narrow``: make_classification, 100,000 x 20 (10 informative, binary) + 25,000 test rows
* ``wide_784`` / ``wide_2000``: ``ensembles.py``'s (10,000 x 784 and 5,000 x 2,000, 10 classes)
* ``sparse_text``: ``sparse.py``'s ``text`` cell (20,000 x 50,000 TF-IDF-like CSR, binary)
* ``classes_50``: ``ensembles.py``'s (25,000 x 50, 50 classes)
* ``categorical``: 100,000 x 10 integer codes, column ``j`` with ``5 * 100 ** (j / 9)`` levels
  (5 to 500), the label a noisy sum of a random effect per level (binary). Boosting splits
  the columns natively where the library can: ours ``categorical_features`` on every column
  (the columns of more than 255 levels by category bins: the 254 most frequent levels a bin
  each, the rest one), LightGBM ``categorical_feature``, scikit-learn's
  HistGradientBoosting where a column has at most 255 levels (it refuses more; the rest as
  ordinal codes); XGBoost takes the codes as ordinal features. Forests and trees, ours and
  every peer's (LightGBM ``rf`` too), take the codes as ordinal features: fully grown trees
  overfit category sets (ours ``RandomForestClassifier(max_bins=255,
  categorical_features=...)`` scored 0.6549 here against 0.6819 ordinal), and ours exact has
  no category splits
* ``tall``: make_classification, 2,000,000 x 20 (binary) + 100,000 test rows
* ``regression``: make_regression, 200,000 x 20 (10 informative, noise 10) + 50,000 test
  rows; scored by R^2, every family as regressors

Families and models (all on every core, ``random_state=0``):

* ``forest`` (100 trees): ours ``RandomForest*`` exact and ``max_bins=255``, ours
  ``ExtraTrees*``; scikit-learn's random forest and extra trees, LightGBM ``rf``
  (0.632 of the rows drawn for every tree, scikit-learn's share of features a node —
  sqrt(p)/p to classify, all to regress —, trees as deep as the data allows:
  ``num_leaves=2**17``, ``min_child_samples=1``) and XGBoost ``XGBRF*`` (the same,
  ``max_leaves=2**17``). Our random forests are compared with the random forests, our
  extra trees with scikit-learn's.
* ``boosting`` (100 rounds, 31 leaves, 255 bins, 20 rows a leaf, learning rate 0.1;
  ``ensembles.make_model``): ours ``max_bins=255``, and ``ours_gb_newton`` the same with
  ``split_gain="second_order"`` (classifiers; the peers' split gain); LightGBM, XGBoost ``hist``,
  scikit-learn's HistGradientBoosting (not on sparse X, which it refuses).
* ``tree``: ours and scikit-learn's ``DecisionTree*`` (unlimited depth).

Every (cell, model, repeat) runs in a fresh process: the data is made, a small fit warms
the library (our kernels load from numba's cache), then one timed fit and one timed predict
of the test rows. Peak RSS is the process's ``ru_maxrss`` (data included; in brackets the
peak before the fit). Repeats are interleaved (repeat 1 of every model, then repeat 2) and
each figure is the median over them. Targets per cell (issue 48): fit and predict <= 1.0x
the fastest peer's, score within 0.5 points (R^2 within 0.005) of the best peer's, peak RSS
<= 1.5x the smallest peer's (``PEERS``); the table marks each miss.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/matrix.py [--repeats 3]
        [--cells narrow:forest classes_50 ...] [--models ours_rf,sklearn_rf]
        [--timeout 900] [--results runs.jsonl] [--markdown out.md]

``--cells`` takes shapes (every family) or ``shape:family``. ``--timeout`` stops a process
after that many seconds of its whole life (making the data, the warm-up, fit and predict,
not the fit alone); its row then says "did not finish in N s". ``--results`` appends every
run (and every timeout) to a JSON-lines file as it ends and renders the table from the
whole file, so invocations with different ``--repeats`` and ``--timeout`` per cell build
one table (``--repeats 0`` only renders it); each row gives its number of repeats and the
1-minute load average from the start of its first process to the end of its last.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

from ensembles import load_dataset, machine_line
from ensembles import make_model as ensembles_model

SHAPES = ("narrow", "wide_784", "wide_2000", "sparse_text", "classes_50", "categorical",
          "tall", "regression")
FAMILIES = {
    "forest": ("ours_rf", "ours_rf_hist", "ours_et", "sklearn_rf", "sklearn_et", "lightgbm_rf",
               "xgboost_rf"),
    "boosting": ("ours_gb_hist", "ours_gb_newton", "lightgbm", "xgboost", "sklearn_hgb"),
    "tree": ("ours_tree", "sklearn_tree"),
}
#: Forests are held to the peers of their kind (the other families: every peer).
PEERS = {"ours_rf": ("sklearn_rf", "lightgbm_rf", "xgboost_rf"),
         "ours_rf_hist": ("sklearn_rf", "lightgbm_rf", "xgboost_rf"),
         "ours_et": ("sklearn_et",)}
#: Models a cell leaves out: HistGradientBoosting refuses sparse X; LightGBM's and
#: XGBoost's forests grow one tree per class (5,000 trees of unbounded size on 50 classes);
#: on squared error the second-order gain is the first-order one (``ours_gb_hist``'s model).
LEFT_OUT = {("sparse_text", "sklearn_hgb"), ("classes_50", "lightgbm_rf"),
            ("classes_50", "xgboost_rf"), ("regression", "ours_gb_newton")}
N_TREES = 100
#: Categorical levels of each column: 5 to 500, geometrically.
CATEGORICAL_LEVELS = tuple(int(round(5 * 100 ** (j / 9))) for j in range(10))


def _categorical(n_train: int = 100_000, n_test: int = 25_000, seed: int = 0):
    rng = np.random.RandomState(seed)
    n = n_train + n_test
    X = np.empty((n, len(CATEGORICAL_LEVELS)))
    score = np.zeros(n)
    for j, levels in enumerate(CATEGORICAL_LEVELS):
        codes = rng.randint(0, levels, n)
        X[:, j] = codes
        score += rng.normal(size=levels)[codes] / np.sqrt(len(CATEGORICAL_LEVELS))
    y = (score + 0.5 * rng.normal(size=n) > 0).astype(np.int64)
    return X[:n_train], X[n_train:], y[:n_train], y[n_train:]


def load_shape(shape: str):
    """``(X_train, X_test, y_train, y_test)`` of a shape (module docstring)."""
    from sklearn.datasets import make_classification, make_regression

    if shape in ("wide_784", "wide_2000", "classes_50"):
        return load_dataset(shape)
    if shape in ("narrow", "tall"):
        n, n_test = (100_000, 25_000) if shape == "narrow" else (2_000_000, 100_000)
        X, y = make_classification(n + n_test, 20, n_informative=10, random_state=0)
        return X[:n], X[n:], y[:n], y[n:]
    if shape == "regression":
        n = 200_000
        X, y = make_regression(n + 50_000, 20, n_informative=10, noise=10.0, random_state=0)
        return X[:n], X[n:], y[:n], y[n:]
    if shape == "sparse_text":
        from sparse import make_cell
        X, y = make_cell("text")
        n = int(0.8 * X.shape[0])
        return X[:n], X[n:], y[:n], y[n:]
    if shape == "categorical":
        return _categorical()
    raise ValueError(f"unknown shape {shape!r}; choose from {SHAPES}")


def make_model(name: str, regression: bool, n_features: int):
    """The model ``name`` of the matrix (module docstring)."""
    regressor = "Regressor" if regression else "Classifier"
    # Each process imports only its model's library (the peers' peak RSS holds no numba).
    if name in ("ours_rf", "ours_rf_hist", "ours_et"):
        from cipherforest import ensemble
    elif name in ("sklearn_rf", "sklearn_et"):
        from sklearn import ensemble
    if name in ("ours_rf", "ours_rf_hist", "ours_et", "sklearn_rf", "sklearn_et"):
        kind = "RandomForest" if "_rf" in name else "ExtraTrees"
        extra = {"max_bins": 255} if name.endswith("_hist") else {}
        return getattr(ensemble, kind + regressor)(N_TREES, n_jobs=-1, random_state=0, **extra)
    if name == "ours_tree":
        from cipherforest import tree
    elif name == "sklearn_tree":
        from sklearn import tree
    if name in ("ours_tree", "sklearn_tree"):
        return getattr(tree, "DecisionTree" + regressor)(random_state=0)
    # Forests' feature share: scikit-learn's defaults (sqrt(p) to classify, all to regress).
    feature_share = 1.0 if regression else max(1.0, np.sqrt(n_features)) / n_features
    if name == "lightgbm_rf":
        import lightgbm
        cls = lightgbm.LGBMRegressor if regression else lightgbm.LGBMClassifier
        return cls(boosting_type="rf", n_estimators=N_TREES, num_leaves=2 ** 17,
                   min_child_samples=1, min_child_weight=0.0, subsample=0.632,
                   subsample_freq=1, feature_fraction_bynode=feature_share, max_bin=255,
                   n_jobs=os.cpu_count(), random_state=0, verbose=-1)
    if name == "xgboost_rf":
        import xgboost
        cls = xgboost.XGBRFRegressor if regression else xgboost.XGBRFClassifier
        return cls(n_estimators=N_TREES, max_depth=0, max_leaves=2 ** 17,
                   grow_policy="lossguide", subsample=0.632, colsample_bynode=feature_share,
                   tree_method="hist", n_jobs=os.cpu_count(), random_state=0)
    return ensembles_model(name, regression)  # boosting: ensembles.py's settings


def _fit_kwargs(name: str, shape: str, X) -> dict:
    if shape != "categorical":
        return {}
    if name == "lightgbm":
        return {"categorical_feature": list(range(X.shape[1]))}
    return {}


def _categorical_model(name: str, shape: str, model):
    """Native categories on the categorical shape: HistGradientBoosting's and our
    boosting's (module docstring)."""
    if shape == "categorical" and name == "sklearn_hgb":
        model.set_params(categorical_features=[levels <= 255 for levels in CATEGORICAL_LEVELS])
    if shape == "categorical" and name in ("ours_gb_hist", "ours_gb_newton"):
        model.set_params(categorical_features=list(range(len(CATEGORICAL_LEVELS))))
    return model


def run_one(shape: str, name: str) -> dict:
    """One timed fit and predict of ``name`` on ``shape`` (in this process)."""
    regression = shape == "regression"
    X_train, X_test, y_train, y_test = load_shape(shape)
    n_features = X_train.shape[1]
    warm = _categorical_model(name, shape, make_model(name, regression, n_features))
    if hasattr(warm, "n_estimators"):
        warm.set_params(n_estimators=2)
    elif hasattr(warm, "max_iter"):
        warm.set_params(max_iter=2)
    warm.fit(X_train[:500], y_train[:500], **_fit_kwargs(name, shape, X_train))
    warm.predict(X_test[:50])
    before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    model = _categorical_model(name, shape, make_model(name, regression, n_features))
    start, cpu = time.perf_counter(), time.process_time()
    model.fit(X_train, y_train, **_fit_kwargs(name, shape, X_train))
    fit_s, fit_cpu_s = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    predicted = model.predict(X_test)
    predict_s = time.perf_counter() - start
    if regression:
        from sklearn.metrics import r2_score
        score = float(r2_score(y_test, predicted))
    else:
        score = float(np.mean(predicted == y_test))
    return {"shape": shape, "model": name, "fit_s": fit_s, "fit_cpu_s": fit_cpu_s,
            "predict_s": predict_s, "score": score,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "before_mb": before_mb, "load_end": os.getloadavg()[0]}


def _available(name: str) -> bool:
    for lib in ("lightgbm", "xgboost"):
        if name.startswith(lib):
            try:
                __import__(lib)
            except ImportError:
                return False
    return True


def cells(selection: list[str] | None) -> list[tuple[str, str]]:
    """``(shape, family)`` pairs of ``--cells`` (shapes or ``shape:family``)."""
    if not selection:
        return [(shape, family) for shape in SHAPES for family in FAMILIES]
    out = []
    for item in selection:
        shape, _, family = item.partition(":")
        if shape not in SHAPES or (family and family not in FAMILIES):
            raise SystemExit(f"--cells: unknown cell {item!r}; shapes {SHAPES}, "
                             f"families {tuple(FAMILIES)}")
        out += [(shape, f) for f in ([family] if family else FAMILIES)]
    return out


def summarise(runs: list[dict]) -> dict:
    """Median of every measurement over a model's repeats (timed-out runs counted apart).

    ``runs`` are one (shape, family, model)'s records; a record with ``timeout_s`` is a
    process stopped after that many seconds. With no finished run the summary has
    ``timeout_s`` and no measurements.
    """
    done = [r for r in runs if "timeout_s" not in r]
    timed_out = [r for r in runs if "timeout_s" in r]
    out = {key: runs[0][key] for key in ("shape", "family", "model")}
    out["repeats"], out["timed_out"] = len(done), len(timed_out)
    out["load_min"] = min(r["load_start"] for r in runs)
    out["load_max"] = max(r.get("load_end", r["load_start"]) for r in runs)
    if timed_out:
        out["timeout_s"] = max(r["timeout_s"] for r in timed_out)
    for key in ("fit_s", "fit_cpu_s", "predict_s", "score", "peak_mb", "before_mb"):
        if done:
            out[key] = statistics.median(r[key] for r in done)
    return out


def _misses(row: dict, peers: list[dict], regression: bool) -> list[str]:
    if not peers:
        return []
    misses = []
    fit = row["fit_s"] / min(p["fit_s"] for p in peers)
    predict = row["predict_s"] / min(p["predict_s"] for p in peers)
    best = max(p["score"] for p in peers)
    lag = (best - row["score"]) * (1.0 if regression else 100.0)
    rss = row["peak_mb"] / min(p["peak_mb"] for p in peers)
    if fit > 1.0:
        misses.append(f"fit {fit:.2f}x")
    if predict > 1.0:
        misses.append(f"predict {predict:.2f}x")
    if lag > (0.005 if regression else 0.5):
        misses.append(f"score -{lag:.3f}" if regression else f"score -{lag:.2f} pt")
    if rss > 1.5:
        misses.append(f"RSS {rss:.2f}x")
    return misses


def _repeats_cell(r: dict) -> str:
    if not r["timed_out"]:
        return str(r["repeats"])
    if r["timed_out"] == 1:
        return f"{r['repeats']} (+1 over {r['timeout_s']:.0f} s)"
    return f"{r['repeats']} (+{r['timed_out']} stopped, the longest at {r['timeout_s']:.0f} s)"


def render(results: list[dict]) -> str:
    """Markdown table: every model of every cell, ours with ratios to the peers.

    A model with no finished run has a row saying so; a cell's ratios and targets use the
    peers that finished (a peer that did not finish is slower than any finished model).
    """
    lines = ["| shape | family | model | repeats | 1-min load | fit s | fit CPU s | predict s "
             "| score | peak RSS MB (before fit) | fit / fastest peer "
             "| predict / fastest peer | RSS / smallest peer | targets missed |",
             "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        head = (f"| {r['shape']} | {r['family']} | {r['model']} | {_repeats_cell(r)} | "
                f"{r['load_min']:.1f}–{r['load_max']:.1f} |")
        ours = r["model"].startswith("ours_")
        if not r["repeats"]:
            missed = f"fit over {r['timeout_s']:.0f} s" if ours else ""
            lines.append(head + f" did not finish in {r['timeout_s']:.0f} s" + " |" * 8
                         + f" {missed} |")
            continue
        peers = [p for p in results if p["shape"] == r["shape"] and p["family"] == r["family"]
                 and not p["model"].startswith("ours_") and p["repeats"]
                 and p["model"] in PEERS.get(r["model"], (p["model"],))]

        def ratio(key, best, r=r, peers=peers, ours=ours):
            return f"{r[key] / best(p[key] for p in peers):.2f}x" if ours and peers else ""

        misses = _misses(r, peers, r["shape"] == "regression") if ours else []
        lines.append(
            head + f" {r['fit_s']:.2f} | "
            f"{r['fit_cpu_s']:.2f} | {r['predict_s']:.3f} | {r['score']:.4f} | "
            f"{r['peak_mb']:.0f} ({r['before_mb']:.0f}) | {ratio('fit_s', min)} | "
            f"{ratio('predict_s', min)} | {ratio('peak_mb', min)} | "
            f"{', '.join(misses) if ours else ''} |")
    return "\n".join(lines)


def _order(records: list[dict]) -> list[list[dict]]:
    """Records grouped by (shape, family, model), in the matrix's order."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for record in records:
        groups.setdefault((record["shape"], record["family"], record["model"]), []).append(
            record)

    def rank(key):
        shape, family, model = key
        return (SHAPES.index(shape), list(FAMILIES).index(family),
                FAMILIES[family].index(model))

    return [groups[key] for key in sorted(groups, key=rank)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", nargs="+", help="shapes or shape:family (default: all)")
    parser.add_argument("--models", help="comma-separated models to run (default: all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=None,
                        help="stop a process (data, warm-up, fit, predict) after this many seconds")
    parser.add_argument("--results",
                        help="append every run to this JSON-lines file and render the table "
                             "from all the runs it holds")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--one", nargs=2, metavar=("SHAPE", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(*args.one)))
        return 0
    wanted = set(args.models.split(",")) if args.models else None
    jobs = [(shape, family, name) for shape, family in cells(args.cells)
            for name in FAMILIES[family]
            if (wanted is None or name in wanted) and (shape, name) not in LEFT_OUT
            and _available(name)]
    records: list[dict] = []
    if args.results and os.path.exists(args.results):
        with open(args.results) as in_file:
            records = [json.loads(line) for line in in_file if line.strip()]
    for repeat in range(args.repeats):
        for shape, family, name in jobs:
            record = {"shape": shape, "family": family, "model": name,
                      "load_start": os.getloadavg()[0]}
            try:
                out = subprocess.run([sys.executable, __file__, "--one", shape, name],
                                     capture_output=True, text=True, env=os.environ,
                                     timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(f"{shape} {name}: over {args.timeout:.0f} s, stopped", file=sys.stderr)
                record.update(timeout_s=args.timeout, load_end=os.getloadavg()[0])
            else:
                if out.returncode:
                    print(f"{shape} {name} failed:\n{out.stderr[-2000:]}", file=sys.stderr)
                    continue
                record.update(json.loads(out.stdout.strip().splitlines()[-1]))
                # cipherforest's first-use notice: this process compiled kernels.
                record["compiled"] = "compiling numba kernels" in out.stderr
            record["family"] = family
            print(f"repeat {repeat + 1}: {json.dumps(record)}", file=sys.stderr, flush=True)
            records.append(record)
            if args.results:
                with open(args.results, "a") as out_file:
                    out_file.write(json.dumps(record) + "\n")
    results = [summarise(group) for group in _order(records)]
    table = render(results)
    header = (f"Machine: {machine_line()}; 1-minute load average from the start of a "
              f"row's first process to the end of its last "
              f"{min((r['load_min'] for r in results), default=0):.1f}–"
              f"{max((r['load_max'] for r in results), default=0):.1f}; each row the median "
              f"of its repeats, every repeat a fresh process.\n\n")
    print(header + table)
    if args.markdown:
        with open(args.markdown, "w") as out_file:
            out_file.write(header + table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
