"""Ensemble benchmark: cipherforest's forests and gradient boosting against scikit-learn,
LightGBM and XGBoost, side by side.

Every (model, dataset, run) triple runs in a fresh subprocess so that its peak memory (max RSS)
is its own; on Linux the peak is also reset once the data are made, so "fit + predict peak"
is the fit and prediction's own peak with the data resident (the process's peak is often the
data generation's). Runs are interleaved (run 1 of every model, then run 2, ...) so that load
from other processes spreads over all models alike, and each measurement is the median over
the runs. The parent prints Markdown tables: fit/predict seconds, score, peak memory,
model size and the CPU time the hypervisor took from this virtual machine during the fit
and prediction ("CPU steal %", Linux ``/proc/stat``: with the cores starved the times
measure the host, not the code) of every model, our gradient boosting against each peer
with ratios, and the targets of issue 15.

    python benchmarks/ensembles.py                     # the four boosting datasets, 5 runs
    python benchmarks/ensembles.py --quick             # 1 run, no 1M-row dataset
    python benchmarks/ensembles.py --datasets synthetic_100k --runs 3 --markdown out.md
    python benchmarks/ensembles.py --models ours_rf_hist,sklearn_rf   # forests
    python benchmarks/ensembles.py --timeout 120        # give up on runs longer than 2 min
    python benchmarks/ensembles.py --models ours_gb_hist,lightgbm --src main=/tmp/main/src
                                                        # also ours on another source tree
    python benchmarks/ensembles.py --paired --runs 9    # ours and LightGBM alternated in
                                                        # one process: per-run ratios

Datasets: ``synthetic_100k`` / ``synthetic_1m`` (make_classification, 20 features, 10
informative, 50k held-out rows), ``pendigits`` (../shared/data/dataset_32_pendigits.csv,
10 992 × 16, 10 classes, 25 % held out; scikit-learn's 8×8 digits when the file is absent)
and ``regression_100k`` (make_regression, 20 features, 10 informative, noise 10, 50k held-out
rows; score R²); ``synthetic_10m``, by name only, the same at 10M rows (peak memory of
boosting: ``--models ours_gb_hist,lightgbm --datasets synthetic_10m --rounds 10 --runs 1``;
``--rounds`` sets every model's trees or rounds). Wide data, by name only: ``digits``
(scikit-learn's 8×8 digits, 1,797 × 64, 25 % held out) and ``wide_784``
(make_classification, 10,000 rows × 784 features, 40 informative, 10 classes, 2,500
held-out rows: MNIST's width), ``wide_2000`` (the same at
5,000 rows × 2,000 features, 1,250 held out) and ``classes_50`` (make_classification,
25,000 rows × 50 features, 30 informative, 50 classes, 6,250 held out). Forests:
``ours_rf_exact``, ``ours_rf_hist`` (``max_bins=255``), ``ours_et_exact``, ``ours_et_hist``
beside ``sklearn_rf`` and ``sklearn_et`` (100 trees, all cores). ``ours_gb_newton`` is
``ours_gb_hist`` with ``split_gain="second_order"`` (by name only). Models whose name ends in
``_1thread`` run with one thread, pinned to one core (``sched_setaffinity``), so binning and
every other step use a single core too.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pickle
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from cpu_steal import cpu_times  # this folder: the script's own, or put on sys.path by importers

REPO = Path(__file__).resolve().parents[1]
#: ../shared/data next to the checkout (or next to the folder holding a git worktree of it).
PENDIGITS = next((parent / "shared" / "data" / "dataset_32_pendigits.csv"
                  for parent in REPO.parents[:2]
                  if (parent / "shared" / "data" / "dataset_32_pendigits.csv").exists()),
                 REPO.parent / "shared" / "data" / "dataset_32_pendigits.csv")
N_TREES = 100
BOOSTING_MODELS = ["ours_gb_hist", "ours_gb_hist_1thread", "lightgbm", "lightgbm_1thread",
                   "xgboost", "sklearn_hgb"]
DATASETS = ["synthetic_100k", "synthetic_1m", "pendigits", "regression_100k"]


def is_regression(dataset: str) -> bool:
    return dataset.startswith("regression_")


def load_dataset(name: str):
    """Train/test split of a benchmark dataset."""
    from sklearn.datasets import load_digits, make_classification, make_regression
    from sklearn.model_selection import train_test_split

    if name.startswith("synthetic_"):
        n = {"synthetic_100k": 100_000, "synthetic_1m": 1_000_000,
             "synthetic_10m": 10_000_000}[name]
        X, y = make_classification(n + 50_000, 20, n_informative=10, random_state=0)
        return X[:n], X[n:], y[:n], y[n:]
    if name == "regression_100k":
        n = 100_000
        X, y = make_regression(n + 50_000, 20, n_informative=10, noise=10.0, random_state=0)
        return X[:n], X[n:], y[:n], y[n:]
    if name == "digits":
        X, y = load_digits(return_X_y=True)
        return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    if name in ("wide_784", "wide_2000"):
        n, n_features = (10_000, 784) if name == "wide_784" else (5_000, 2_000)
        X, y = make_classification(n + n // 4, n_features, n_informative=40, n_redundant=0,
                                   n_classes=10, random_state=0)
        return X[:n], X[n:], y[:n], y[n:]
    if name == "classes_50":
        n = 25_000
        X, y = make_classification(n + n // 4, 50, n_informative=30, n_redundant=0,
                                   n_classes=50, random_state=0)
        return X[:n], X[n:], y[:n], y[n:]
    if name == "pendigits":
        if PENDIGITS.exists():
            data = np.loadtxt(PENDIGITS, delimiter=",")
            X, y = data[:, :-1], data[:, -1].astype(int)
        else:
            X, y = load_digits(return_X_y=True)
        return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    raise ValueError(f"unknown dataset {name!r}")


def make_model(name: str, regression: bool = False):
    """The benchmarked estimators, at matching hyper-parameters (100 trees / rounds; boosting:
    31 leaves, 255 bins, at least 20 rows per leaf, learning rate 0.1)."""
    threads = 1 if name.endswith("_1thread") else os.cpu_count()
    if name == "ours_rf_exact":
        from cipherforest.ensemble import RandomForestClassifier
        return RandomForestClassifier(N_TREES, n_jobs=-1, random_state=0)
    if name == "ours_rf_hist":
        from cipherforest.ensemble import RandomForestClassifier
        return RandomForestClassifier(N_TREES, n_jobs=-1, random_state=0, max_bins=255)
    if name == "sklearn_rf":
        from sklearn.ensemble import RandomForestClassifier
        return RandomForestClassifier(N_TREES, n_jobs=-1, random_state=0)
    if name in ("ours_et_exact", "ours_et_hist"):
        from cipherforest.ensemble import ExtraTreesClassifier
        return ExtraTreesClassifier(N_TREES, n_jobs=-1, random_state=0,
                                    max_bins=255 if name == "ours_et_hist" else None)
    if name == "sklearn_et":
        from sklearn.ensemble import ExtraTreesClassifier
        return ExtraTreesClassifier(N_TREES, n_jobs=-1, random_state=0)
    common = dict(learning_rate=0.1)
    if name.startswith(("ours_gb_hist", "ours_gb_newton")):
        from cipherforest.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
        params = dict(n_estimators=N_TREES, max_depth=None, max_leaf_nodes=31,
                      min_samples_leaf=20, max_bins=255, random_state=0, **common)
        if regression:  # squared error: the second-order gain is the first-order one
            return GradientBoostingRegressor(**params, n_jobs=threads)
        if name.startswith("ours_gb_newton"):
            params["split_gain"] = "second_order"
        return GradientBoostingClassifier(**params, n_jobs=threads)
    if name == "sklearn_hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
        cls = HistGradientBoostingRegressor if regression else HistGradientBoostingClassifier
        return cls(max_iter=N_TREES, max_leaf_nodes=31, min_samples_leaf=20,
                   early_stopping=False, random_state=0, **common)
    if name.startswith("lightgbm"):
        import lightgbm
        cls = lightgbm.LGBMRegressor if regression else lightgbm.LGBMClassifier
        return cls(n_estimators=N_TREES, num_leaves=31, min_child_samples=20, n_jobs=threads,
                   verbose=-1, random_state=0, **common)
    if name == "xgboost":
        import xgboost
        cls = xgboost.XGBRegressor if regression else xgboost.XGBClassifier
        return cls(n_estimators=N_TREES, tree_method="hist", max_depth=0, max_leaves=31,
                   grow_policy="lossguide", n_jobs=threads, random_state=0, **common)
    raise ValueError(f"unknown model {name!r}")


def model_size_bytes(name: str, model) -> int:
    """Serialised size in each library's own format."""
    if name.startswith("ours_"):
        from cipherforest.io import save_model
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "model.cfm"
            save_model(model, path)
            return path.stat().st_size
    if name.startswith("lightgbm"):
        return len(model.booster_.model_to_string().encode())
    if name == "xgboost":
        return len(model.get_booster().save_raw())
    buffer = io.BytesIO()
    pickle.dump(model, buffer)  # our own freshly fitted sklearn model, never untrusted bytes
    return buffer.tell()


def cpu_ticks() -> tuple[int, int] | None:
    """``(steal, total)`` time of all CPUs since boot in clock ticks (``cpu_steal.cpu_times``,
    Linux), or None where it cannot be read."""
    return cpu_times().get("cpu")


def steal_percent(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Share of the CPUs' time between two ``cpu_ticks`` readings that the hypervisor gave to
    other machines (%): a virtual core ready to run but not running. Fit times measured
    while it is high say more about the host than about the code. None without readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return 100.0 * (after[0] - before[0]) / (after[1] - before[1])


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set size (Linux: ``/proc/self/clear_refs``);
    False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def peak_rss_since_reset_mb() -> float | None:
    """Peak resident set size since ``reset_peak_rss`` (``VmHWM``), or None."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def prepare_worker(model_name: str, dataset: str):
    """A worker process's setup before the measured fit: one core for ``_1thread`` models,
    the data, and for our models a 500-row fit that compiles or loads the numba kernels.
    Returns ``(regression, X_train, X_test, y_train, y_test)``."""
    if model_name.endswith("_1thread") and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    regression = is_regression(dataset)
    X_train, X_test, y_train, y_test = load_dataset(dataset)
    if model_name.startswith("ours_"):
        warm = make_model(model_name, regression).set_params(n_estimators=2)
        warm.fit(X_train[:500], y_train[:500])  # numba compile / cache load, not timed
    return regression, X_train, X_test, y_train, y_test


def run_worker(model_name: str, dataset: str) -> dict:
    """Fit and predict one model on one dataset in this process; return the measurements."""
    regression, X_train, X_test, y_train, y_test = prepare_worker(model_name, dataset)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # The process's peak so far is often the data generation's (1M rows); measure the fit and
    # prediction's own peak, with the data resident, from here.
    reset = reset_peak_rss()
    model = make_model(model_name, regression)
    ticks = cpu_ticks()
    start, cpu = time.perf_counter(), time.process_time()
    model.fit(X_train, y_train)
    fit_s, fit_cpu_s = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    pred = model.predict(X_test)
    predict_s = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fit_peak_mb = peak_rss_since_reset_mb() if reset else None
    if regression:
        from sklearn.metrics import r2_score
        score = float(r2_score(y_test, pred))
    else:
        score = float(np.mean(pred == y_test))
    # Our threaded boosting's choice of rounds on one thread under steal (sources that have
    # ``RoundThreads``; None for the others): probes, switches, rounds on one thread.
    chooser = getattr(model, "_round_threads", None)
    round_threads = (None if chooser is None else
                     [chooser.probes, chooser.switches, chooser.single_thread_rounds])
    return {"model": model_name, "dataset": dataset, "fit_s": fit_s, "fit_cpu_s": fit_cpu_s,
            "predict_s": predict_s, "accuracy": score, "peak_mb": peak_kb / 1024,
            "peak_growth_mb": (peak_kb - before) / 1024, "fit_peak_mb": fit_peak_mb,
            "model_bytes": model_size_bytes(model_name, model),
            "load_1min": os.getloadavg()[0], "steal_pct": steal_percent(ticks, cpu_ticks()),
            "round_threads": round_threads}


PAIRED_MODELS = ("ours_gb_hist", "lightgbm")


def run_paired(dataset: str, runs: int) -> dict:
    """Fit times of our gradient boosting and LightGBM on ``dataset`` in this one process,
    alternated: each run fits both (in a new random order) on all cores, then both on one
    core (the process pinned to it). On a machine whose speed drifts within minutes, the
    ratio of two fits made seconds apart is steadier than the ratio of two medians."""
    regression = is_regression(dataset)
    X_train, _, y_train, _ = load_dataset(dataset)
    all_cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    for name in PAIRED_MODELS:  # numba kernels compile / load; LightGBM starts OpenMP
        make_model(name, regression).set_params(n_estimators=2).fit(X_train[:500],
                                                                     y_train[:500])
    rng = np.random.default_rng(0)
    times: dict[str, list[float]] = {}
    ticks = cpu_ticks()
    try:
        for _ in range(runs):
            for one_thread in (False, True):
                if all_cores is not None:
                    os.sched_setaffinity(0, {min(all_cores)} if one_thread else all_cores)
                for name in rng.permutation(PAIRED_MODELS):
                    label = f"{name}_1thread" if one_thread else str(name)
                    model = make_model(label, regression)
                    start = time.perf_counter()
                    model.fit(X_train, y_train)
                    times.setdefault(label, []).append(time.perf_counter() - start)
    finally:
        if all_cores is not None:
            os.sched_setaffinity(0, all_cores)
    return {"dataset": dataset, "times": times, "load_1min": os.getloadavg()[0],
            "steal_pct": steal_percent(ticks, cpu_ticks())}


def render_paired(results: list[dict]) -> str:
    """Markdown table of ``run_paired`` results: medians and the median per-run ratio."""
    lines = ["Gradient boosting against LightGBM, fits alternated in one process per dataset "
             "(wall s):", "",
             "| dataset | threads | runs | ours (median) | LightGBM (median) | ratio of medians "
             "| median of per-run ratios | per-run ratios (min-max) | CPU steal % (whole run) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for result in results:
        for suffix, threads in (("", "all cores"), ("_1thread", "1")):
            ours = np.asarray(result["times"][f"ours_gb_hist{suffix}"])
            peer = np.asarray(result["times"][f"lightgbm{suffix}"])
            ratios = ours / peer
            lines.append(f"| {result['dataset']} | {threads} | {len(ours)} | "
                         f"{np.median(ours):.2f} | {np.median(peer):.2f} | "
                         f"{np.median(ours) / np.median(peer):.2f}× | "
                         f"{np.median(ratios):.2f}× | {ratios.min():.2f}-{ratios.max():.2f} | "
                         f"{_percent(result.get('steal_pct'))} |")
    return "\n".join(lines)


def machine_line() -> str:
    """CPU, cores, memory and library versions of this machine."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    versions = []
    for module in ("numpy", "numba", "sklearn", "lightgbm", "xgboost"):
        try:
            versions.append(f"{module} {__import__(module).__version__}")
        except ImportError:
            versions.append(f"{module} missing")
    return (f"{cpu}, {os.cpu_count()} cores, {mem_gb:.0f} GB RAM; Python "
            f"{platform.python_version()}; " + ", ".join(versions)
            + f"; {time.strftime('%Y-%m-%d')}")


PEERS = {"ours_rf_exact": ["sklearn_rf"], "ours_rf_hist": ["sklearn_rf"],
         "ours_et_exact": ["sklearn_et"], "ours_et_hist": ["sklearn_et"]}
#: Issue 48's target for forests on wide data: fit ≤ this times scikit-learn's.
WIDE_FOREST_TARGET = 0.5


def aggregate(runs: list[dict]) -> list[dict]:
    """Median of every measurement over the runs of each (dataset, model), in first-seen
    order; ``fit_min_s`` / ``fit_max_s`` keep the spread of the fit times."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["dataset"], r["model"]), []).append(r)
    out = []
    for (dataset, model), group in groups.items():
        ok = [r for r in group if "error" not in r]
        if not ok:
            out.append(group[0])
            continue
        row = {"dataset": dataset, "model": model, "runs": len(ok)}
        for key in ("fit_s", "fit_cpu_s", "predict_s", "accuracy", "peak_mb", "model_bytes",
                    "load_1min"):
            row[key] = float(np.median([r[key] for r in ok]))
        for key in ("fit_peak_mb", "steal_pct"):  # None where not measured
            values = [r[key] for r in ok if r.get(key) is not None]
            row[key] = float(np.median(values)) if values else None
        row["fit_min_s"] = min(r["fit_s"] for r in ok)
        row["fit_max_s"] = max(r["fit_s"] for r in ok)
        # Runs whose fit probed rounds on one thread: (fit s, steal %, probes, switches,
        # rounds on one thread).
        row["probed_runs"] = [(r["fit_s"], r.get("steal_pct"), *r["round_threads"])
                              for r in ok if r.get("round_threads") and r["round_threads"][0]]
        out.append(row)
    return out


def _mb(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _memory(row: dict) -> float:
    """The fit and prediction's own peak RSS when measured, else the process's peak."""
    return row["fit_peak_mb"] if row.get("fit_peak_mb") is not None else row["peak_mb"]


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a is not None and b else "–"


def render(results: list[dict]) -> str:
    """Markdown tables: measurements, boosting side by side with ratios, targets."""
    lines = ["| dataset | model | runs | fit s (median) | fit s range | fit CPU s | predict s "
             "| score | peak RSS MB | fit + predict peak RSS MB | model MB | load (1 min) "
             "| CPU steal % |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['dataset']} | {r['model']} | failed: {r['error']} "
                         "| | | | | | | | | | |")
            continue
        lines.append(f"| {r['dataset']} | {r['model']} | {r['runs']} | {r['fit_s']:.2f} | "
                     f"{r['fit_min_s']:.2f}–{r['fit_max_s']:.2f} | {r['fit_cpu_s']:.2f} | "
                     f"{r['predict_s']:.3f} | {r['accuracy']:.4f} | {r['peak_mb']:.0f} | "
                     f"{_mb(r.get('fit_peak_mb'))} | {r['model_bytes'] / 1e6:.2f} | "
                     f"{r['load_1min']:.1f} | {_percent(r.get('steal_pct'))} |")
    by_key = {(r["dataset"], r["model"]): r for r in results if "error" not in r}
    datasets = list(dict.fromkeys(r["dataset"] for r in results))

    def get(dataset, model, key):
        row = by_key.get((dataset, model))
        return None if row is None else row[key]

    lines += ["", "Gradient boosting, fit seconds (median) and ratio ours / peer:", "",
              "| dataset | ours | LightGBM | ours / LightGBM | ours 1 thread | LightGBM 1 thread "
              "| ours / LightGBM (1 thread) | XGBoost | ours / XGBoost | sklearn HGB "
              "| ours / HGB | predict ours / LightGBM | score ours − LightGBM (points) "
              "| peak RSS ours / LightGBM (fit + predict) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    targets = []
    for dataset in datasets:
        ours, lgb = by_key.get((dataset, "ours_gb_hist")), by_key.get((dataset, "lightgbm"))
        ours1 = get(dataset, "ours_gb_hist_1thread", "fit_s")
        lgb1 = get(dataset, "lightgbm_1thread", "fit_s")
        if ours is None:
            if ours1 is not None and lgb1 is not None:  # a single-thread-only run
                targets.append(f"- {dataset}: single-thread fit {ours1 / lgb1:.2f}× LightGBM on "
                               f"one thread (target ≤ 1.0×): "
                               f"{'MET' if ours1 <= lgb1 else 'MISSED'}")
            continue

        def fmt(model, dataset=dataset):
            value = get(dataset, model, "fit_s")
            return "–" if value is None else f"{value:.2f}"

        diff = "–" if lgb is None else f"{100 * (ours['accuracy'] - lgb['accuracy']):+.2f}"
        lines.append(
            f"| {dataset} | {ours['fit_s']:.2f} | {fmt('lightgbm')} | "
            f"{_ratio(ours['fit_s'], get(dataset, 'lightgbm', 'fit_s'))} | "
            f"{fmt('ours_gb_hist_1thread')} | {fmt('lightgbm_1thread')} | "
            f"{_ratio(ours1, lgb1)} | {fmt('xgboost')} | "
            f"{_ratio(ours['fit_s'], get(dataset, 'xgboost', 'fit_s'))} | "
            f"{fmt('sklearn_hgb')} | {_ratio(ours['fit_s'], get(dataset, 'sklearn_hgb', 'fit_s'))} "
            f"| {_ratio(ours['predict_s'], get(dataset, 'lightgbm', 'predict_s'))} | {diff} | "
            f"{_ratio(_memory(ours), None if lgb is None else _memory(lgb))} |")
        if lgb is None:
            continue
        points = 100 * (ours["accuracy"] - lgb["accuracy"])
        close = abs(points) <= 0.3
        ratio = ours["fit_s"] / lgb["fit_s"]
        targets.append(f"- {dataset}: fit {ratio:.2f}× LightGBM (same threads), score "
                       f"{points:+.2f} points (target ≤ 1.0×, within 0.3 points): "
                       f"{'MET' if ratio <= 1.0 and close else 'MISSED'}")
        if ours1 is not None and lgb1 is not None:
            targets.append(f"- {dataset}: single-thread fit {ours1 / lgb1:.2f}× LightGBM on one "
                           f"thread (target ≤ 1.0×): {'MET' if ours1 <= lgb1 else 'MISSED'}")
        p_ratio = ours["predict_s"] / lgb["predict_s"]
        targets.append(f"- {dataset}: predict {p_ratio:.2f}× LightGBM (target ≤ 1.0×): "
                       f"{'MET' if p_ratio <= 1.0 else 'MISSED'}")
        if dataset == "synthetic_1m":
            m_ratio = _memory(ours) / _memory(lgb)
            targets.append(f"- {dataset}: peak RSS {m_ratio:.2f}× LightGBM's (target ≤ 1.2×): "
                           f"{'MET' if m_ratio <= 1.2 else 'MISSED'}")

    forest_rows = []
    for (dataset, model), ours in by_key.items():
        for peer in PEERS.get(model, []):
            other = by_key.get((dataset, peer))
            if other is not None:
                if dataset.startswith("wide_"):
                    ratio = ours["fit_s"] / other["fit_s"]
                    targets.append(f"- {dataset}: {model} fit {ratio:.2f}× {peer}'s (issue 48 "
                                   f"target ≤ {WIDE_FOREST_TARGET}×): "
                                   f"{'MET' if ratio <= WIDE_FOREST_TARGET else 'MISSED'}")
                forest_rows.append(
                    f"| {dataset} | {model} | {peer} | {_ratio(ours['fit_s'], other['fit_s'])} "
                    f"| {_ratio(ours['predict_s'], other['predict_s'])} | "
                    f"{100 * (ours['accuracy'] - other['accuracy']):+.2f} | "
                    f"{_ratio(ours['peak_mb'], other['peak_mb'])} |")
    if forest_rows:
        lines += ["", "| dataset | ours | peer | fit ratio | predict ratio | accuracy diff "
                  "(points) | memory ratio |", "|---|---|---|---:|---:|---:|---:|"] + forest_rows
    probed = [f"- {row['dataset']} {row['model']}: fit {fit_s:.2f} s, steal "
              f"{_percent(steal)} %, {probes} probe(s), {switches} switch(es), {rounds} rounds "
              "on one thread"
              for row in results if "error" not in row
              for fit_s, steal, probes, switches, rounds in row.get("probed_runs", [])]
    threads = ["", "Fits that timed rounds on one thread under steal (RoundThreads):"]
    threads += probed or ["- none"]
    return "\n".join(lines + ["", "Targets (issues 15 and 48):"] + targets + threads)


def main(argv: list[str] | None = None) -> int:
    """Run every model on every dataset in subprocesses and print the tables."""
    global N_TREES
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--models", default=",".join(BOOSTING_MODELS))
    parser.add_argument("--runs", type=int, default=5,
                        help="runs of every (model, dataset), interleaved; medians reported")
    parser.add_argument("--quick", action="store_true",
                        help="one run and no 1M-row dataset unless --datasets names it")
    parser.add_argument("--markdown", help="also write the tables to this file")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds after which a run is stopped and reported as failed "
                             "(OpenMP peers can spin for minutes on a loaded machine)")
    parser.add_argument("--src", action="append", metavar="NAME=PATH", default=None,
                        help="run our models on this cipherforest source tree too, labelled "
                             "MODEL@NAME (repeatable; runs interleaved with the others; "
                             "peers run once, on this checkout)")
    parser.add_argument("--paired", action="store_true",
                        help="instead: our boosting and LightGBM alternated in one process "
                             "per dataset, with the median of the per-run time ratios")
    parser.add_argument("--rounds", type=int, default=N_TREES,
                        help="trees of the forests / rounds of boosting (default 100)")
    parser.add_argument("--worker", nargs=2, metavar=("MODEL", "DATASET"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--paired-worker", nargs=2, metavar=("DATASET", "RUNS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    N_TREES = args.rounds
    if args.worker:
        print(json.dumps(run_worker(*args.worker)))
        return 0
    if args.paired_worker:
        print(json.dumps(run_paired(args.paired_worker[0], int(args.paired_worker[1]))))
        return 0
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    datasets = args.datasets.split(",")
    runs = args.runs
    if args.quick:
        runs = 1
        if args.datasets == parser.get_default("datasets"):
            datasets = [d for d in datasets if d != "synthetic_1m"]
    if args.paired:
        results = []
        for dataset in datasets:
            proc = subprocess.run([sys.executable, __file__, "--paired-worker", dataset,
                                   str(runs)], capture_output=True, text=True,
                                  timeout=args.timeout)
            if proc.returncode != 0:
                raise SystemExit(f"{dataset}: {proc.stderr.strip()[-500:]}")
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
        table = f"Machine: {machine_line()}\n\n{render_paired(results)}\n"
        print(table)
        if args.markdown:
            Path(args.markdown).write_text(table)
        return 0

    sources = [("", REPO / "src")]
    for item in args.src or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not (Path(path) / "cipherforest").is_dir():
            parser.error(f"--src {item}: expected NAME=PATH with a cipherforest package in "
                         "PATH")
        sources.append((name, Path(path).resolve()))
    measurements = []
    for dataset in datasets:
        for run in range(runs):
            for model, (name, src) in [(model, source) for model in args.models.split(",")
                                       for source in sources
                                       if not source[0] or model.startswith("ours_")]:
                env = {**os.environ, "PYTHONPATH": str(src)}
                label = f"{model}@{name}" if name else model
                try:
                    proc = subprocess.run([sys.executable, __file__, "--worker", model, dataset,
                                           "--rounds", str(args.rounds)],
                                          capture_output=True, text=True, env=env,
                                          timeout=args.timeout)
                except subprocess.TimeoutExpired:
                    measurements.append({"model": label, "dataset": dataset,
                                         "error": f"stopped after {args.timeout:.0f} s"})
                    print(json.dumps({"run": run, **measurements[-1]}), file=sys.stderr,
                          flush=True)
                    continue
                if proc.returncode != 0:
                    error = (proc.stderr.strip().splitlines() or ["no output"])[-1][:120]
                    measurements.append({"model": label, "dataset": dataset, "error": error})
                else:
                    measurements.append({**json.loads(proc.stdout.strip().splitlines()[-1]),
                                         "model": label})
                print(json.dumps({"run": run, **measurements[-1]}), file=sys.stderr,
                      flush=True)
    table = f"Machine: {machine_line()}\n\n{render(aggregate(measurements))}\n"
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
