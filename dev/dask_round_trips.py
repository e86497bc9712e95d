"""Where the data-parallel boosting fit's round trips go: counted in one process, and what
one costs between two Dask workers.

``--in-process``: ``fit_data_parallel`` on two in-process shards of
``benchmarks/dask_boosting.py``'s rows (31 leaves, 255 bins), counting per tree the
round trips of split batches, the nodes split (committed or speculative) and the rows the
shards partition and histogram (as multiples of the rows), with the fit's CPU seconds.

``--actors``: two Dask actors on a ``LocalCluster`` of two one-thread worker processes,
the first calling the second as the fit's driver does (one actor call, its answer an
array of the given sizes): wall milliseconds and CPU milliseconds of each worker process
per round trip, and each worker's CPU per second while the cluster idles.

``--cluster``: ``DaskGradientBoostingClassifier`` and ``lightgbm.dask`` on the same
persisted rows of a ``LocalCluster`` (two one-thread worker processes, each library fitted
once beforehand so that the workers' imports are done): each worker process's CPU seconds
during the fit, and the functions taking the driver's thread CPU time (cProfile)::

    python dev/dask_round_trips.py --in-process --rows 500000 --rounds 30
    python dev/dask_round_trips.py --actors
    python dev/dask_round_trips.py --cluster --rows 1000000 --rounds 30
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np


def _benchmark():
    """``benchmarks/dask_boosting.py`` as a module (its folder not put on ``sys.path``: it
    holds a ``sparse.py`` that would shadow the package dask.array imports)."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "dask_boosting.py"
    spec = importlib.util.spec_from_file_location("dask_boosting", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["dask_boosting"] = module
    spec.loader.exec_module(module)
    return module


def _partition(index: int, n_rows: int):
    """Partition ``index`` of the benchmark's rows, made on a worker (this script's
    functions travel by value; the benchmark module is loaded there from its path)."""
    return _benchmark().make_blocks(index, n_rows, 20)


def in_process(n_rows: int, rounds: int) -> None:
    import cipherforest.ensemble._data_parallel as dp
    from cipherforest.core import (
        GradientBoostingClassifier,
        LocalShards,
        RowShard,
        fit_data_parallel,
    )
    make_blocks = _benchmark().make_blocks
    blocks = [make_blocks(i, n_rows // 8, 20) for i in range(8)]
    shards = [RowShard(np.concatenate([b[0] for b in half]), np.concatenate([b[1] for b in half]))
              for half in (blocks[:4], blocks[4:])]
    counts = {"split round trips": 0, "nodes split": 0, "rows partitioned": 0,
              "rows histogrammed": 0}
    partition, histogram = dp.partition_child_sums, dp.RowShard._histogram

    def counted_partition(feature, position, missing_left, samples, start, end, *args):
        counts["nodes split"] += 1
        counts["rows partitioned"] += int(end - start)
        return partition(feature, position, missing_left, samples, start, end, *args)

    def counted_histogram(shard, start, end, n_bins):
        counts["rows histogrammed"] += end - start
        return histogram(shard, start, end, n_bins)

    class Counting(LocalShards):
        def call(self, method, *args):
            counts["split round trips"] += method == "split"
            return super().call(method, *args)

    dp.partition_child_sums, dp.RowShard._histogram = counted_partition, counted_histogram
    model = GradientBoostingClassifier(n_estimators=rounds, max_leaf_nodes=31, max_depth=None,
                                       max_bins=255, random_state=0)
    begin = time.process_time()
    fit_data_parallel(model, Counting(shards))
    cpu = time.process_time() - begin
    print(f"{n_rows:,} rows, {rounds} trees of 31 leaves, two shards: {cpu:.1f} CPU s")
    print(f"  per tree: {counts['split round trips'] / rounds:.1f} split round trips, "
          f"{counts['nodes split'] / rounds / 2:.1f} nodes split, rows partitioned "
          f"{counts['rows partitioned'] / rounds / n_rows:.2f}x and histogrammed "
          f"{counts['rows histogrammed'] / rounds / n_rows:.2f}x the rows")


class _Peer:
    """A Dask actor answering with arrays, and calling another one as a driver does."""

    def answer(self, n: int) -> np.ndarray:
        return np.zeros(n)

    def drive(self, peer, n: int, repeats: int) -> float:
        begin = time.perf_counter()
        for _ in range(repeats):
            peer.answer(n).result()
        return (time.perf_counter() - begin) / repeats


def actors(repeats: int) -> None:
    import distributed
    import psutil

    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        processes = [psutil.Process(pid) for pid in client.run(os.getpid).values()]

        def cpu():
            return np.array([sum(p.cpu_times()[:2]) for p in processes])

        before = cpu()
        time.sleep(10)
        idle = (cpu() - before) / 10
        print(f"idle: {idle[0]:.3f} and {idle[1]:.3f} CPU s per s "
              f"(load average {os.getloadavg()[0]:.1f})")
        workers = sorted(client.scheduler_info()["workers"])
        driver, peer = (client.submit(_Peer, actor=True, workers=[w]).result() for w in workers)
        print("| answer kB | wall ms | driving worker CPU ms | other worker CPU ms |")
        print("|---|---|---|---|")
        for kb in (0, 82, 2460):  # nothing, one compact histogram, thirty
            n = kb * 1000 // 8
            driver.drive(peer, n, 10).result()
            before = cpu()
            wall = driver.drive(peer, n, repeats).result()
            used = (cpu() - before) / repeats
            print(f"| {kb} | {1e3 * wall:.1f} | {1e3 * used[0]:.2f} | {1e3 * used[1]:.2f} |")
        print(f"(load average {os.getloadavg()[0]:.1f})")
    finally:
        client.close()
        cluster.close()


def _profiled_fit(estimator, shards, **kwargs):
    """``fit_data_parallel`` under cProfile (thread CPU time); the report in ``_profile``."""
    import cProfile
    import io
    import pstats

    from cipherforest.core import fit_data_parallel

    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    fitted = fit_data_parallel(estimator, shards, **kwargs)
    profile.disable()
    report = io.StringIO()
    pstats.Stats(profile, stream=report).sort_stats("tottime").print_stats(12)
    fitted._profile = report.getvalue()
    return fitted


def cluster(n_rows: int, rounds: int) -> None:
    import dask
    import dask.array as da
    import distributed
    import lightgbm
    import psutil

    from cipherforest.dask import DaskGradientBoostingClassifier

    class Profiled(DaskGradientBoostingClassifier):
        _fitter = staticmethod(_profiled_fit)

    local = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=None)
    client = distributed.Client(local)
    try:
        parts = [dask.delayed(_partition, nout=2)(i, n_rows // 8) for i in range(8)]
        X = da.concatenate([da.from_delayed(p[0], (n_rows // 8, 20), float) for p in parts])
        y = da.concatenate([da.from_delayed(p[1], (n_rows // 8,), np.int64) for p in parts])
        X, y = client.persist([X, y])
        distributed.wait([X, y])
        processes = [psutil.Process(pid) for pid in client.run(os.getpid).values()]
        models = {
            "ours": lambda n: Profiled(client=client, n_estimators=n, max_leaf_nodes=31,
                                       max_depth=None, random_state=0),
            "lightgbm.dask": lambda n: lightgbm.DaskLGBMClassifier(
                client=client, n_estimators=n, num_leaves=31, max_bin=255, n_jobs=1,
                verbose=-1, random_state=0),
        }
        for name, make in models.items():
            make(1).fit(X, y)
            before = [sum(p.cpu_times()[:2]) for p in processes]
            begin = time.perf_counter()
            model = make(rounds).fit(X, y)
            cpu = [sum(p.cpu_times()[:2]) - b for p, b in zip(processes, before, strict=True)]
            print(f"{name}: {time.perf_counter() - begin:.1f} s, worker CPU s "
                  f"{', '.join(f'{c:.1f}' for c in cpu)} (load average "
                  f"{os.getloadavg()[0]:.1f})")
            if name == "ours":
                print(model.model_._profile)
    finally:
        client.close()
        local.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument("--actors", action="store_true")
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args()
    if args.in_process:
        in_process(args.rows, args.rounds)
    if args.actors:
        actors(args.repeats)
    if args.cluster:
        cluster(args.rows, args.rounds)


if __name__ == "__main__":
    main()
