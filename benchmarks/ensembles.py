"""Ensemble benchmark: cipherforest forests and gradient boosting against scikit-learn,
LightGBM and XGBoost, side by side.

Every (model, dataset) pair runs in a fresh subprocess so that its peak memory (max RSS) is its
own; the parent prints one Markdown table with fit/predict seconds, accuracy, peak memory,
model size and the ratio of each of our models to each peer.

    python benchmarks/ensembles.py                       # 100k, 1M synthetic and pendigits
    python benchmarks/ensembles.py --datasets synthetic_100k,pendigits --markdown out.md

Datasets: ``synthetic_100k`` / ``synthetic_1m`` (make_classification, 20 features, 10
informative, 50k held-out rows) and ``pendigits`` (../shared/data/dataset_32_pendigits.csv,
10 992 × 16, 10 classes; 25 % held out).
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

REPO = Path(__file__).resolve().parents[1]
PENDIGITS = REPO.parent / "shared" / "data" / "dataset_32_pendigits.csv"
N_TREES = 100


def load_dataset(name: str):
    """Train/test split of a benchmark dataset."""
    from sklearn.datasets import make_classification
    from sklearn.model_selection import train_test_split

    if name.startswith("synthetic_"):
        n = {"synthetic_100k": 100_000, "synthetic_1m": 1_000_000}[name]
        X, y = make_classification(n + 50_000, 20, n_informative=10, random_state=0)
        return X[:n], X[n:], y[:n], y[n:]
    if name == "pendigits":
        if not PENDIGITS.exists():
            raise FileNotFoundError(f"{PENDIGITS} not found (shared data folder missing)")
        data = np.loadtxt(PENDIGITS, delimiter=",")
        X, y = data[:, :-1], data[:, -1].astype(int)
        return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    raise ValueError(f"unknown dataset {name!r}")


def make_model(name: str):
    """The benchmarked estimators, at matching hyper-parameters."""
    if name == "ours_rf_exact":
        from cipherforest.ensemble import RandomForestClassifier
        return RandomForestClassifier(N_TREES, n_jobs=-1, random_state=0)
    if name == "ours_rf_hist":
        from cipherforest.ensemble import RandomForestClassifier
        return RandomForestClassifier(N_TREES, n_jobs=-1, random_state=0, max_bins=255)
    if name == "sklearn_rf":
        from sklearn.ensemble import RandomForestClassifier
        return RandomForestClassifier(N_TREES, n_jobs=-1, random_state=0)
    if name == "ours_gb_hist":
        from cipherforest.ensemble import GradientBoostingClassifier
        return GradientBoostingClassifier(n_estimators=N_TREES, learning_rate=0.1,
                                          max_depth=None, max_leaf_nodes=31,
                                          min_samples_leaf=20, max_bins=255, n_jobs=-1,
                                          random_state=0)
    if name == "sklearn_hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier
        return HistGradientBoostingClassifier(max_iter=N_TREES, learning_rate=0.1,
                                              max_leaf_nodes=31, min_samples_leaf=20,
                                              early_stopping=False, random_state=0)
    if name == "lightgbm":
        import lightgbm
        return lightgbm.LGBMClassifier(n_estimators=N_TREES, num_leaves=31, learning_rate=0.1,
                                       min_child_samples=20, n_jobs=os.cpu_count(),
                                       verbose=-1, random_state=0)
    if name == "lightgbm_1thread":
        import lightgbm
        return lightgbm.LGBMClassifier(n_estimators=N_TREES, num_leaves=31, learning_rate=0.1,
                                       min_child_samples=20, n_jobs=1, verbose=-1,
                                       random_state=0)
    if name == "xgboost":
        import xgboost
        return xgboost.XGBClassifier(n_estimators=N_TREES, tree_method="hist", max_depth=0,
                                     max_leaves=31, grow_policy="lossguide",
                                     learning_rate=0.1, n_jobs=os.cpu_count(),
                                     random_state=0)
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


def run_worker(model_name: str, dataset: str) -> dict:
    """Fit and predict one model on one dataset in this process; return the measurements."""
    X_train, X_test, y_train, y_test = load_dataset(dataset)
    if model_name.startswith("ours_"):
        warm = make_model(model_name).set_params(n_estimators=2)
        warm.fit(X_train[:500], y_train[:500])  # numba compile / cache load, not timed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    model = make_model(model_name)
    start = time.perf_counter()
    model.fit(X_train, y_train)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    pred = model.predict(X_test)
    predict_s = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"model": model_name, "dataset": dataset, "fit_s": fit_s, "predict_s": predict_s,
            "accuracy": float(np.mean(pred == y_test)), "peak_mb": peak_kb / 1024,
            "peak_growth_mb": (peak_kb - before) / 1024,
            "model_bytes": model_size_bytes(model_name, model)}


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
         "ours_gb_hist": ["sklearn_hgb", "lightgbm", "lightgbm_1thread", "xgboost"]}


def render(results: list[dict]) -> str:
    """Markdown tables: measurements, then ratios of ours to each peer."""
    lines = ["| dataset | model | fit s | predict s | accuracy | peak RSS MB | model MB |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['dataset']} | {r['model']} | failed: {r['error']} | | | | |")
            continue
        lines.append(f"| {r['dataset']} | {r['model']} | {r['fit_s']:.2f} | "
                     f"{r['predict_s']:.3f} | {r['accuracy']:.4f} | {r['peak_mb']:.0f} | "
                     f"{r['model_bytes'] / 1e6:.2f} |")
    lines += ["", "| dataset | ours | peer | fit ratio | predict ratio | accuracy diff (points) "
              "| memory ratio | size ratio |", "|---|---|---|---:|---:|---:|---:|---:|"]
    by_key = {(r["dataset"], r["model"]): r for r in results if "error" not in r}
    for (dataset, model), ours in by_key.items():
        for peer in PEERS.get(model, []):
            other = by_key.get((dataset, peer))
            if other is None:
                continue
            lines.append(
                f"| {dataset} | {model} | {peer} | {ours['fit_s'] / other['fit_s']:.2f} | "
                f"{ours['predict_s'] / other['predict_s']:.2f} | "
                f"{100 * (ours['accuracy'] - other['accuracy']):+.2f} | "
                f"{ours['peak_mb'] / other['peak_mb']:.2f} | "
                f"{ours['model_bytes'] / other['model_bytes']:.2f} |")
    targets = []
    for dataset in sorted({r["dataset"] for r in results}):
        rf, skl = by_key.get((dataset, "ours_rf_hist")), by_key.get((dataset, "sklearn_rf"))
        if rf and skl:
            ok = (rf["fit_s"] <= 0.5 * skl["fit_s"]
                  and abs(rf["accuracy"] - skl["accuracy"]) <= 0.005)
            targets.append(f"- {dataset}: RF hist fit {rf['fit_s'] / skl['fit_s']:.2f}× sklearn, "
                           f"accuracy {100 * (rf['accuracy'] - skl['accuracy']):+.2f} points "
                           f"(target ≤ 0.5×, ±0.5): {'PASS' if ok else 'FAIL'}")
        gb, lgb = by_key.get((dataset, "ours_gb_hist")), by_key.get((dataset, "lightgbm"))
        if gb and lgb:
            ok = (gb["fit_s"] <= 1.5 * lgb["fit_s"]
                  and abs(gb["accuracy"] - lgb["accuracy"]) <= 0.005)
            targets.append(f"- {dataset}: GB hist fit {gb['fit_s'] / lgb['fit_s']:.2f}× LightGBM, "
                           f"accuracy {100 * (gb['accuracy'] - lgb['accuracy']):+.2f} points "
                           f"(target ≤ 1.5×, ±0.5): {'PASS' if ok else 'FAIL'}")
    return "\n".join(lines + ["", "Targets:"] + targets)


def main(argv: list[str] | None = None) -> int:
    """Run every model on every dataset in subprocesses and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="synthetic_100k,synthetic_1m,pendigits")
    parser.add_argument("--models", default=",".join(
        ["ours_rf_exact", "ours_rf_hist", "sklearn_rf", "ours_gb_hist", "sklearn_hgb",
         "lightgbm", "xgboost"]))
    parser.add_argument("--markdown", help="also write the tables to this file")
    parser.add_argument("--worker", nargs=2, metavar=("MODEL", "DATASET"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(run_worker(*args.worker)))
        return 0

    results = []
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    for dataset in args.datasets.split(","):
        for model in args.models.split(","):
            proc = subprocess.run([sys.executable, __file__, "--worker", model, dataset],
                                  capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                error = (proc.stderr.strip().splitlines() or ["no output"])[-1][:120]
                results.append({"model": model, "dataset": dataset, "error": error})
            else:
                results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    table = f"Machine: {machine_line()}\n\n{render(results)}\n"
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
