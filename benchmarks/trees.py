"""Benchmark cipherforest's decision trees against scikit-learn's.

For each training size (default 10k, 100k and 1M rows x 20 features, ``n_informative=10``)
and task (``make_classification`` / ``make_regression``, fixed seeds) this fits and predicts
with three estimators:

* scikit-learn ``DecisionTree{Classifier,Regressor}(random_state=0)``, default parameters;
* ours, exact split finder (``max_bins=None``, ``random_state=0``);
* ours, histogram split finder (``max_bins=255``, ``random_state=0``).

All three are scored on the same fixed 50k-row held-out test set (accuracy or R^2). The data
for a task is drawn once as one pool of ``50k + max(1M, largest size)`` rows: the test set is
its first 50k rows and a training set of ``n`` rows is the next ``n``, so the test set does
not depend on ``--sizes``. Every estimator gets the same float64 arrays (scikit-learn converts
them to float32 inside ``fit``/``predict``, and that conversion is part of its timings).

Timings are the best of ``--repeat`` runs with ``time.perf_counter`` (default: 1 run for
training sets of 1M rows or more, 3 for smaller ones). Our numba kernels are warmed up on a
tiny fit before anything is timed; the compile cost is measured separately, in a subprocess
with ``NUMBA_CACHE_DIR`` pointing at a fresh temporary directory (first fit in a fresh process
vs. second fit).

The result is a Markdown table on stdout (progress goes to stderr) followed by PASS/FAIL lines
for the targets: exact fit <= 1.0x scikit-learn's fit time; histogram fit <= 0.3x with a test
score at most 0.5 points below scikit-learn's (accuracy points; for R^2 a point is 0.01, so
0.005 of R^2). ``--markdown PATH`` writes the same report, with a line describing the machine,
to ``PATH``.

Targets are judged on wall-clock time. Every estimator here is single-threaded, so the report
also gives each fit's "core share" (process CPU time / wall time) and the CPU-time ratio: when
other processes compete for the cores the share drops below 1 and the wall-clock ratios get
noisy, while CPU-time ratios stay comparable between runs.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/trees.py --markdown /tmp/trees.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np
import psutil
import sklearn
from sklearn.datasets import make_classification, make_regression
from sklearn.metrics import accuracy_score, r2_score
from sklearn.tree import DecisionTreeClassifier as SkDecisionTreeClassifier
from sklearn.tree import DecisionTreeRegressor as SkDecisionTreeRegressor

import cipherforest
from cipherforest import DecisionTreeClassifier, DecisionTreeRegressor

N_FEATURES = 20
N_INFORMATIVE = 10
N_TEST = 50_000
#: Training rows always drawn into the pool, so that the test set is the same for any --sizes.
POOL_TRAIN_ROWS = 1_000_000
DATA_SEED = 0
MODEL_SEED = 0
MAX_BINS = 255
DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
TASKS = ("classification", "regression")
MODELS = ("sklearn", "exact", "hist")

# Targets (ratios are ours / scikit-learn; score deficit in points, 1 point = 0.01).
EXACT_FIT_RATIO_MAX = 1.0
HIST_FIT_RATIO_MAX = 0.3
HIST_SCORE_DEFICIT_MAX = 0.5

SRC_DIR = Path(cipherforest.__file__).resolve().parent.parent

# Run in a fresh interpreter with an empty NUMBA_CACHE_DIR: the first fit pays for compiling
# every kernel, the second one does not.
_COMPILE_PROBE = r"""
import json, time
t0 = time.perf_counter()
import numpy as np
from cipherforest import DecisionTreeClassifier, DecisionTreeRegressor
t_import = time.perf_counter() - t0
rng = np.random.default_rng(0)
X = rng.standard_normal((500, 5))
y_clf = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64)
y_reg = X[:, 0] - 2.0 * X[:, 2]


def clf():
    return DecisionTreeClassifier(random_state=0).fit(X, y_clf)


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def all_variants():
    for max_bins in (None, 255):
        DecisionTreeClassifier(max_bins=max_bins, random_state=0).fit(X, y_clf).predict(X)
        DecisionTreeRegressor(max_bins=max_bins, random_state=0).fit(X, y_reg).predict(X)


out = {"import": t_import, "first_fit": timed(clf), "second_fit": timed(clf)}
out["first_all"] = timed(all_variants)
out["second_all"] = timed(all_variants)
print(json.dumps(out))
"""


@dataclass
class Result:
    """Measurements of one estimator on one (task, size)."""

    score: float
    fit_s: float
    predict_s: float
    n_nodes: int
    bytes_per_node: int
    cpu_share: float  # process CPU time / wall time of the best fit (1.0: a core to itself)


# --------------------------------------------------------------------------- machine info
def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo (falls back to ``platform.processor()``)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown CPU"
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    name = fields.get("model name", platform.processor() or "unknown CPU")
    if not any(ch.isdigit() for ch in name) and "cpu family" in fields:
        # Virtual machines often expose a bare "AMD EPYC"; family/model identify the generation.
        name += f" (family {fields['cpu family']}, model {fields.get('model', '?')})"
    return name


def machine_line() -> str:
    """One line describing the machine, library versions and date."""
    logical = psutil.cpu_count(logical=True)
    physical = psutil.cpu_count(logical=False)
    cores = f"{logical} cores" if physical in (None, logical) else (
        f"{physical} cores / {logical} threads")
    ram_gb = psutil.virtual_memory().total / 2**30
    date = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return (f"Machine: {cpu_model()}, {cores}, {ram_gb:.1f} GiB RAM; "
            f"Python {platform.python_version()}, numpy {np.__version__}, "
            f"numba {numba.__version__}, scikit-learn {sklearn.__version__}, "
            f"cipherforest {cipherforest.__version__}; {date}")


def log(message: str) -> None:
    """Progress message on stderr (stdout carries only the report)."""
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- compile time
def measure_compile_time() -> str:
    """Report line on numba compile cost, measured in fresh subprocesses."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(SRC_DIR), env.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory(prefix="cipherforest-numba-cache-") as cache_dir:
        env["NUMBA_CACHE_DIR"] = cache_dir
        runs = []
        for _ in range(2):  # empty cache, then the cache the first run wrote
            proc = subprocess.run([sys.executable, "-c", _COMPILE_PROBE], env=env,
                                  capture_output=True, text=True, timeout=1800, check=False)
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                return f"Numba compile time: probe failed ({last})"
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    cold, cached = runs
    return (f"Numba compile time (tiny fit, fresh process, empty `NUMBA_CACHE_DIR`): first fit "
            f"{cold['first_fit']:.1f} s vs. second fit {cold['second_fit'] * 1e3:.1f} ms; "
            f"first use of the other variants (regressor, histogram, predict) "
            f"{cold['first_all']:.1f} s vs. {cold['second_all'] * 1e3:.1f} ms warm. "
            f"Next process, kernels loaded from the on-disk cache: first fit "
            f"{cached['first_fit']:.2f} s, other variants {cached['first_all']:.2f} s "
            f"(import {cached['import']:.2f} s).")


def warm_up() -> None:
    """Compile (or load from cache) every kernel the benchmark uses, outside the timings."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, N_FEATURES))
    y_clf = (X[:, 0] > 0).astype(np.int64)
    y_reg = X[:, 1] + X[:, 2]
    for max_bins in (None, MAX_BINS):
        DecisionTreeClassifier(max_bins=max_bins, random_state=0).fit(X, y_clf).predict(X)
        DecisionTreeRegressor(max_bins=max_bins, random_state=0).fit(X, y_reg).predict(X)
    SkDecisionTreeClassifier(random_state=0).fit(X, y_clf).predict(X)
    SkDecisionTreeRegressor(random_state=0).fit(X, y_reg).predict(X)


# --------------------------------------------------------------------------- benchmark
def make_pool(task: str, n_train_max: int) -> tuple[np.ndarray, np.ndarray]:
    """The task's data pool: ``N_TEST`` test rows followed by ``n_train_max`` training rows."""
    n = N_TEST + max(POOL_TRAIN_ROWS, n_train_max)
    if task == "classification":
        X, y = make_classification(n_samples=n, n_features=N_FEATURES,
                                   n_informative=N_INFORMATIVE, random_state=DATA_SEED)
    else:
        X, y = make_regression(n_samples=n, n_features=N_FEATURES,
                               n_informative=N_INFORMATIVE, random_state=DATA_SEED)
    return np.ascontiguousarray(X, dtype=np.float64), y


def make_estimator(task: str, model: str) -> Any:
    """A fresh estimator of ``model`` ("sklearn", "exact", "hist") for ``task``."""
    if model == "sklearn":
        cls = SkDecisionTreeClassifier if task == "classification" else SkDecisionTreeRegressor
        return cls(random_state=MODEL_SEED)
    cls = DecisionTreeClassifier if task == "classification" else DecisionTreeRegressor
    return cls(max_bins=None if model == "exact" else MAX_BINS, random_state=MODEL_SEED)


def best_time(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """Best wall time of ``repeat`` calls, its CPU share, and the last call's return value."""
    best, share, out = np.inf, 1.0, None
    for _ in range(repeat):
        out = None
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        if wall < best:
            best, share = wall, cpu / wall if wall > 0 else 1.0
    return best, share, out


def bytes_per_node(est: Any, model: str) -> int:
    """Memory of one tree node, node struct plus ``value`` entries."""
    tree = est.tree_
    if model != "sklearn":
        return int(tree.bytes_per_node)
    node_struct = tree.__getstate__()["nodes"].dtype.itemsize
    return int(node_struct + tree.value.itemsize * tree.n_outputs * tree.max_n_classes)


def run_one(task: str, model: str, X: np.ndarray, y: np.ndarray, X_test: np.ndarray,
            y_test: np.ndarray, repeat: int) -> Result:
    """Fit and predict ``model`` on one training set; return its measurements."""
    fit_s, share, est = best_time(lambda: make_estimator(task, model).fit(X, y), repeat)
    predict_s, _, y_pred = best_time(lambda: est.predict(X_test), repeat)
    if task == "classification":
        score = accuracy_score(y_test, y_pred)
    else:
        score = r2_score(y_test, y_pred)
    return Result(score=float(score), fit_s=fit_s, predict_s=predict_s,
                  n_nodes=int(est.tree_.node_count), bytes_per_node=bytes_per_node(est, model),
                  cpu_share=share)


def run_benchmark(sizes: list[int], tasks: list[str],
                  repeat: int | None) -> dict[tuple[str, int], dict[str, Result]]:
    """All measurements, keyed by (task, training rows) then model."""
    results: dict[tuple[str, int], dict[str, Result]] = {}
    for task in tasks:
        log(f"[{task}] generating data")
        X_pool, y_pool = make_pool(task, max(sizes))
        X_test, y_test = X_pool[:N_TEST], y_pool[:N_TEST]
        for n in sizes:
            X, y = X_pool[N_TEST:N_TEST + n], y_pool[N_TEST:N_TEST + n]
            n_repeat = repeat if repeat is not None else (1 if n >= 1_000_000 else 3)
            results[(task, n)] = {}
            for model in MODELS:
                res = run_one(task, model, X, y, X_test, y_test, n_repeat)
                results[(task, n)][model] = res
                log(f"[{task}] n={n:,} {model:7s} score={res.score:.4f} fit={res.fit_s:.3f}s "
                    f"predict={res.predict_s * 1e3:.1f}ms nodes={res.n_nodes:,} "
                    f"cpu_share={res.cpu_share:.2f}")
        del X_pool, y_pool, X_test, y_test
        gc.collect()
    return results


# --------------------------------------------------------------------------- report
def score_delta_points(ours: Result, ref: Result) -> float:
    """Score difference ours - scikit-learn in points (1 point = 0.01 accuracy or R^2)."""
    return 100.0 * (ours.score - ref.score)


def format_table(results: dict[tuple[str, int], dict[str, Result]]) -> str:
    """Markdown table, one row per (task, size), the three estimators side by side."""
    header = [
        "task (score)", "train rows",
        "score sklearn", "score exact (Δ pts)", "score hist (Δ pts)",
        "fit s sklearn", "fit s exact (×skl)", "fit s hist (×skl)",
        "predict ms sklearn", "predict ms exact (×skl)", "predict ms hist (×skl)",
        "nodes sklearn / exact / hist", "bytes/node sklearn / ours",
        "fit core share sklearn / exact / hist",
    ]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|"]
    for (task, n), r in results.items():
        skl, exact, hist = r["sklearn"], r["exact"], r["hist"]
        metric = "accuracy" if task == "classification" else "R²"
        cells = [
            f"{task} ({metric})", f"{n:,}",
            f"{skl.score:.4f}",
            f"{exact.score:.4f} ({score_delta_points(exact, skl):+.2f})",
            f"{hist.score:.4f} ({score_delta_points(hist, skl):+.2f})",
            f"{skl.fit_s:.3f}",
            f"{exact.fit_s:.3f} ({exact.fit_s / skl.fit_s:.2f}×)",
            f"{hist.fit_s:.3f} ({hist.fit_s / skl.fit_s:.2f}×)",
            f"{skl.predict_s * 1e3:.1f}",
            f"{exact.predict_s * 1e3:.1f} ({exact.predict_s / skl.predict_s:.2f}×)",
            f"{hist.predict_s * 1e3:.1f} ({hist.predict_s / skl.predict_s:.2f}×)",
            f"{skl.n_nodes:,} / {exact.n_nodes:,} / {hist.n_nodes:,}",
            f"{skl.bytes_per_node} / {exact.bytes_per_node}",
            f"{skl.cpu_share:.2f} / {exact.cpu_share:.2f} / {hist.cpu_share:.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cpu_ratio(ours: Result, ref: Result) -> float:
    """Fit CPU-time ratio ours / scikit-learn (less sensitive than wall time to contention)."""
    return (ours.fit_s * ours.cpu_share) / (ref.fit_s * ref.cpu_share)


def target_lines(results: dict[tuple[str, int], dict[str, Result]]) -> list[str]:
    """PASS/FAIL line for each target and (task, size); judged on wall time."""
    lines = []
    for (task, n), r in results.items():
        skl, exact, hist = r["sklearn"], r["exact"], r["hist"]
        where = f"{task}, {n:,} rows"
        ratio = exact.fit_s / skl.fit_s
        ok = ratio <= EXACT_FIT_RATIO_MAX
        lines.append(f"- {'PASS' if ok else 'FAIL'}: exact fit ≤ {EXACT_FIT_RATIO_MAX:.1f}× "
                     f"sklearn ({where}): {ratio:.2f}× (CPU time {cpu_ratio(exact, skl):.2f}×)")
        ratio = hist.fit_s / skl.fit_s
        delta = score_delta_points(hist, skl)
        ok = ratio <= HIST_FIT_RATIO_MAX and delta >= -HIST_SCORE_DEFICIT_MAX
        lines.append(f"- {'PASS' if ok else 'FAIL'}: hist fit ≤ {HIST_FIT_RATIO_MAX:.1f}× "
                     f"sklearn and score ≥ sklearn − {HIST_SCORE_DEFICIT_MAX} pts ({where}): "
                     f"{ratio:.2f}× (CPU time {cpu_ratio(hist, skl):.2f}×), {delta:+.2f} pts")
    n_pass = sum(line.startswith("- PASS") for line in lines)
    lines.append(f"- {n_pass}/{len(lines)} targets met (wall-clock fit time).")
    return lines


def noise_line(results: dict[tuple[str, int], dict[str, Result]], load_start: float,
               load_end: float) -> str:
    """How much of a core the timed fits got, and the system load around the run."""
    shares = [res.cpu_share for r in results.values() for res in r.values()]
    return (f"Noise check: the timed fits got {min(shares):.2f}–{max(shares):.2f} of a core "
            f"(\"fit core share\" = process CPU time / wall time of the best fit; all estimators "
            f"are single-threaded, so < ~0.95 means other processes competed for the CPU); "
            f"1-min load average {load_start:.2f} at the start, {load_end:.2f} at the end.")


def parse_sizes(text: str) -> list[int]:
    """Comma-separated positive integers."""
    sizes = [int(s.replace("_", "")) for s in text.split(",") if s.strip()]
    if not sizes or min(sizes) < 2:
        raise argparse.ArgumentTypeError("sizes must be integers ≥ 2")
    return sizes


def parse_tasks(text: str) -> list[str]:
    """Comma-separated subset of ``TASKS``."""
    tasks = [t.strip() for t in text.split(",") if t.strip()]
    unknown = set(tasks) - set(TASKS)
    if not tasks or unknown:
        raise argparse.ArgumentTypeError(f"tasks must be among {', '.join(TASKS)}")
    return tasks


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=parse_sizes, default=list(DEFAULT_SIZES),
                        help="training rows, comma-separated (default: 10000,100000,1000000)")
    parser.add_argument("--tasks", type=parse_tasks, default=list(TASKS),
                        help="comma-separated: classification,regression (default: both)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed runs per measurement, best kept (default: 1 for ≥1M "
                             "rows, 3 otherwise)")
    parser.add_argument("--markdown", type=Path, default=None, metavar="PATH",
                        help="also write the report, with a machine line, to PATH")
    parser.add_argument("--skip-compile-probe", action="store_true",
                        help="do not measure numba compile time in a subprocess")
    args = parser.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be ≥ 1")

    machine = machine_line()
    log(machine)
    load_start = os.getloadavg()[0]
    if args.skip_compile_probe:
        compile_line = "Numba compile time: not measured (--skip-compile-probe)."
    else:
        log("measuring numba compile time in a subprocess")
        compile_line = measure_compile_time()
    log(compile_line)
    warm_up()
    results = run_benchmark(args.sizes, args.tasks, args.repeat)
    load_end = os.getloadavg()[0]

    body = "\n\n".join([
        format_table(results),
        compile_line,
        noise_line(results, load_start, load_end),
        "Targets:\n\n" + "\n".join(target_lines(results)),
    ])
    print(body)
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(f"{machine}\n\n{body}\n", encoding="utf-8")
        log(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
