"""Data-parallel gradient boosting and random forests on a Dask LocalCluster:
cipherforest.dask beside lightgbm.dask and xgboost.dask, side by side.

Each (library, worker count) runs on a fresh ``LocalCluster`` (worker processes, one thread
each, started and closed here) so that a worker's peak memory (its process's resident memory sampled
every 20 ms with ``psutil`` during the fit; "at start": with its partitions loaded, before
the fit) is the one fit's. The same data for all: ``--rows`` x
``--features`` generated per partition on the workers (``make_blocks``: standard normal
rows seeded by the partition, labels from one fixed nonlinear rule shared by all partitions,
as dask-ml's ``make_classification`` generates blocks with shared coefficients; scikit-learn's
``make_classification`` draws its cluster structure from the same stream as the rows, so it
cannot make partitions of one problem), accuracy on ``--test-rows`` further rows. The fit
is 100 rounds, 31 leaves (leaf-wise), 255 bins, learning rate 0.1 by default. Optionally
(``--single``) the single-process :class:`~cipherforest.ensemble.GradientBoostingClassifier`
on the same rows, in a subprocess, for its peak memory.

``--model forest`` fits random forests instead (``--trees`` trees of depth ``--depth``,
``max_features="sqrt"``, bootstrap, 255 bins): ours is ``DaskRandomForestClassifier``,
lightgbm.dask its ``boosting_type="rf"`` (bagging 0.632 of the rows per tree, the square
root of the features per node); ``--single`` adds our single-process histogram forest and
``--sklearn`` scikit-learn's ``RandomForestClassifier`` (exact splits), each in a
subprocess on the same rows.

    python benchmarks/dask_boosting.py                         # 2M x 20, 2 workers
    python benchmarks/dask_boosting.py --rows 200000 --rounds 10 --libs ours   # smoke
    python benchmarks/dask_boosting.py --workers 1 2           # scaling 1 -> 2 workers
    python benchmarks/dask_boosting.py --rows 10000000 --libs ours lightgbm --single
    python benchmarks/dask_boosting.py --model forest --rows 500000 --libs ours lightgbm \
        --single --sklearn

Prints one Markdown table row per run: fit seconds, CPU seconds of the busier worker
process during the fit, peak memory per worker (MB, the largest worker), accuracy, the
1-minute load average after the fit, and the ratios against lightgbm.dask when it ran.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

# This folder holds a sparse.py, which would shadow the "sparse" package dask.array imports.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

N_INFORMATIVE = 10


def make_blocks(block_id: int, n_rows: int, n_features: int, seed: int = 0):
    """Rows of one partition and their labels: ``X`` standard normal (seeded by the block),
    ``y = 1[x . beta + sin(x0 x1) + x2^2 - 1 + 0.5 noise > 0]`` with ``beta`` fixed for all
    blocks (its first ``N_INFORMATIVE`` entries non-zero)."""
    rng = np.random.default_rng([seed, block_id])
    X = rng.standard_normal((n_rows, n_features))
    beta = np.random.default_rng([seed, 1 << 30]).standard_normal(n_features)
    beta[N_INFORMATIVE:] = 0.0
    z = X @ beta + np.sin(X[:, 0] * X[:, 1]) + X[:, 2] ** 2 - 1.0
    z += 0.5 * rng.standard_normal(n_rows)
    return X, (z > 0).astype(np.int64)


def dask_data(n_rows: int, n_features: int, n_parts: int, first_block: int = 0):
    """``(X, y)`` Dask arrays of ``n_parts`` partitions made on the workers."""
    import dask
    import dask.array as da

    sizes = [n_rows // n_parts + (i < n_rows % n_parts) for i in range(n_parts)]
    blocks = [dask.delayed(make_blocks, nout=2)(first_block + i, n, n_features)
              for i, n in enumerate(sizes)]
    X = da.concatenate([da.from_delayed(b[0], (n, n_features), np.float64)
                        for b, n in zip(blocks, sizes, strict=True)])
    y = da.concatenate([da.from_delayed(b[1], (n,), np.int64)
                        for b, n in zip(blocks, sizes, strict=True)])
    return X, y


class _RssSampler:
    """The largest resident memory (MB) of each worker process while it runs, sampled
    every 20 ms (``psutil``): a worker's own peak, whatever its start-up or fork history."""

    def __init__(self, pids: list[int]):
        import psutil

        self.processes = [psutil.Process(pid) for pid in pids]
        self.start = [p.memory_info().rss / 2**20 for p in self.processes]
        self.cpu_start = [self._cpu(p) for p in self.processes]
        self.peak = list(self.start)
        self.running = True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self):
        while self.running:
            for i, process in enumerate(self.processes):
                try:
                    self.peak[i] = max(self.peak[i], process.memory_info().rss / 2**20)
                except Exception:  # a worker that left
                    pass
            time.sleep(0.02)

    @staticmethod
    def _cpu(process) -> float:
        times = process.cpu_times()
        return times.user + times.system

    def stop(self) -> list[float]:
        self.running = False
        self.thread.join()
        self.cpu = [self._cpu(p) - c for p, c in zip(self.processes, self.cpu_start,
                                                     strict=True)]
        return self.peak


#: The module each library's fit imports in the client.
_MODULES = {"ours": "cipherforest.dask", "lightgbm": "lightgbm.dask",
            "xgboost": "xgboost.dask"}


def run(lib: str, args, n_workers: int) -> dict:
    """One fit on a fresh cluster: fit seconds, each worker's peak MB, test accuracy."""
    import distributed

    cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1,
                                       processes=True, dashboard_address=None,
                                       memory_limit=args.memory_limit)
    client = distributed.Client(cluster)
    try:
        # The same partitions for every worker count (the same rows).
        X, y = dask_data(args.rows, args.features, args.partitions * max(args.workers))
        if not args.no_persist:
            X, y = client.persist([X, y])
            distributed.wait([X, y])
        X_test, y_test = make_blocks(10**6, args.test_rows, args.features)
        # The library's modules imported in this process before the clock starts: the
        # first library timed would otherwise pay the imports both share (scikit-learn,
        # pandas, dask.dataframe), an order effect of seconds. The workers import theirs
        # within the fit, as a first fit on a fresh cluster does.
        importlib.import_module(_MODULES[lib])
        sampler = _RssSampler(list(client.run(os.getpid).values()))
        begin = time.perf_counter()
        if lib == "ours" and args.model == "forest":
            from cipherforest.dask import DaskRandomForestClassifier

            model = DaskRandomForestClassifier(
                client=client, n_estimators=args.trees, max_depth=args.depth,
                max_bins=args.bins, random_state=0)
            model.fit(X, y)
            predict = model.to_local().predict
        elif lib == "lightgbm" and args.model == "forest":
            import lightgbm as lgb

            model = lgb.DaskLGBMClassifier(
                client=client, boosting_type="rf", n_estimators=args.trees,
                max_depth=args.depth, num_leaves=2 ** args.depth, bagging_freq=1,
                bagging_fraction=0.632, feature_fraction_bynode=np.sqrt(args.features)
                / args.features, max_bin=args.bins, n_jobs=1, verbose=-1, random_state=0)
            model.fit(X, y)
            predict = model.to_local().predict
        elif lib == "ours":
            from cipherforest.dask import DaskGradientBoostingClassifier

            model = DaskGradientBoostingClassifier(
                client=client, n_estimators=args.rounds, max_leaf_nodes=args.leaves,
                max_depth=None, max_bins=args.bins, learning_rate=0.1, random_state=0)
            model.fit(X, y)
            predict = model.to_local().predict
        elif lib == "lightgbm":
            import lightgbm as lgb

            model = lgb.DaskLGBMClassifier(
                client=client, n_estimators=args.rounds, num_leaves=args.leaves,
                max_bin=args.bins, learning_rate=0.1, n_jobs=1, verbose=-1, random_state=0)
            model.fit(X, y)
            predict = model.to_local().predict
        elif lib == "xgboost":
            import xgboost.dask as xgb_dask

            model = xgb_dask.DaskXGBClassifier(
                n_estimators=args.rounds, max_leaves=args.leaves, max_depth=0,
                grow_policy="lossguide", tree_method="hist", max_bin=args.bins,
                learning_rate=0.1, nthread=1, random_state=0)
            model.client = client
            model.fit(X, y)
            booster = model.get_booster()

            def predict(rows, booster=booster):
                return (booster.inplace_predict(rows) > 0.5).astype(np.int64)
        else:
            raise ValueError(lib)
        seconds = time.perf_counter() - begin
        peaks = sampler.stop()
        accuracy = float(np.mean(predict(X_test) == y_test))
        return {"lib": lib, "workers": n_workers, "rows": args.rows, "fit_s": seconds,
                "peak_mb": max(peaks), "start_mb": max(sampler.start), "accuracy": accuracy,
                "cpu_s": max(sampler.cpu), "load": os.getloadavg()[0]}
    finally:
        client.close()
        cluster.close()


def _single_model(args, lib: str) -> str:
    """The source of the single-process estimator ``lib`` runs."""
    if lib == "sklearn":
        return (f"__import__('sklearn.ensemble').ensemble.RandomForestClassifier("
                f"n_estimators={args.trees}, max_depth={args.depth}, random_state=0)")
    if args.model == "forest":
        return (f"__import__('cipherforest.ensemble').ensemble.RandomForestClassifier("
                f"n_estimators={args.trees}, max_depth={args.depth}, max_bins={args.bins}, "
                f"random_state=0)")
    return (f"__import__('cipherforest.ensemble').ensemble.GradientBoostingClassifier("
            f"n_estimators={args.single_rounds or args.rounds}, max_leaf_nodes={args.leaves}, "
            f"max_depth=None, max_bins={args.bins}, random_state=0)")


def single_process(args, lib: str = "single process") -> dict:
    """The single-process fit (``lib``: ours, or ``"sklearn"``) on the same rows, in a
    subprocess (its own peak memory)."""
    code = f"""
import json, resource, sys, time
import numpy as np
sys.path.append({str(_HERE)!r})
from dask_boosting import make_blocks
sizes = {_sizes(args)}
X = np.empty((sum(sizes), {args.features})); y = np.empty(sum(sizes), dtype=np.int64)
begin = 0
for i, n in enumerate(sizes):  # in place: the peak is X and one block, below the fit's
    X[begin:begin + n], y[begin:begin + n] = make_blocks(i, n, {args.features})
    begin += n
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.perf_counter()
model = {_single_model(args, lib)}.fit(X, y)
seconds = time.perf_counter() - t
X_test, y_test = make_blocks(10**6, {args.test_rows}, {args.features})
print(json.dumps({{"lib": {lib!r}, "workers": 1, "rows": {args.rows},
    "fit_s": seconds, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "start_mb": before, "accuracy": float(np.mean(model.predict(X_test) == y_test))}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _sizes(args) -> list:
    n_parts = args.partitions * max(args.workers)
    return [args.rows // n_parts + (i < args.rows % n_parts) for i in range(n_parts)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--test-rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--leaves", type=int, default=31)
    parser.add_argument("--bins", type=int, default=255)
    parser.add_argument("--workers", type=int, nargs="+", default=[2])
    parser.add_argument("--partitions", type=int, default=4,
                        help="partitions per worker of the largest worker count")
    parser.add_argument("--libs", nargs="+", default=["ours", "lightgbm", "xgboost"])
    parser.add_argument("--memory-limit", default="8GB", help="per worker")
    parser.add_argument("--single", action="store_true",
                        help="also the single-process fit (subprocess) for its peak memory")
    parser.add_argument("--no-persist", action="store_true",
                        help="leave the collection lazy: the fit computes the partitions "
                             "(their generation counts in its time) and no copy of the "
                             "float rows outlives it")
    parser.add_argument("--model", choices=["boosting", "forest"], default="boosting")
    parser.add_argument("--trees", type=int, default=20, help="forest: trees")
    parser.add_argument("--depth", type=int, default=10, help="forest: max_depth")
    parser.add_argument("--sklearn", action="store_true",
                        help="forest: also scikit-learn's forest (subprocess)")
    parser.add_argument("--single-rounds", type=int, default=None,
                        help="rounds of the single-process fit (default: --rounds); its "
                             "peak memory is reached in the first round")
    args = parser.parse_args()
    results = []
    print("| library | workers | rows | fit s | CPU s / worker | peak MB / worker | at start MB "
          "| accuracy | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n_workers in args.workers:
        for lib in args.libs:
            result = run(lib, args, n_workers)
            results.append(result)
            print(f"| {lib} | {n_workers} | {args.rows:,} | {result['fit_s']:.1f} | "
                  f"{result['cpu_s']:.1f} | {result['peak_mb']:.0f} | {result['start_mb']:.0f} | "
                  f"{100 * result['accuracy']:.2f} % | {result['load']:.1f} |", flush=True)
    for lib, wanted in (("single process", args.single), ("sklearn", args.sklearn)):
        if not wanted:
            continue
        result = single_process(args, lib)
        results.append(result)
        print(f"| {lib} | 1 | {args.rows:,} | {result['fit_s']:.1f} | | "
              f"{result['peak_mb']:.0f} | {result['start_mb']:.0f} | "
              f"{100 * result['accuracy']:.2f} % | |", flush=True)
    for n_workers in args.workers:
        ours = [r for r in results if r["lib"] == "ours" and r["workers"] == n_workers]
        lgbm = [r for r in results if r["lib"] == "lightgbm" and r["workers"] == n_workers]
        if ours and lgbm:
            o, g = ours[0], lgbm[0]
            print(f"\n{n_workers} workers, ours / lightgbm.dask: fit time "
                  f"{o['fit_s'] / g['fit_s']:.2f}x, CPU per worker "
                  f"{o['cpu_s'] / g['cpu_s']:.2f}x, peak memory per worker "
                  f"{o['peak_mb'] / g['peak_mb']:.2f}x, accuracy "
                  f"{100 * (o['accuracy'] - g['accuracy']):+.2f} points")
    print("\n" + json.dumps(results))


if __name__ == "__main__":
    main()
