"""Where the data-parallel boosting fit's round trips go: counted in one process, and what
one costs between two Dask workers.

``--in-process``: ``fit_data_parallel`` on two in-process shards of
``benchmarks/dask_boosting.py``'s rows (31 leaves, 255 bins), counting per tree the
round trips of split batches, the nodes split (committed or speculative) and the rows the
shards partition and histogram (as multiples of the rows), with the fit's CPU seconds.

``--actors``: two Dask actors on a ``LocalCluster`` of two one-thread worker processes,
the first calling the second as the fit's driver does (one actor call, its answer an
array of the given sizes): wall milliseconds and CPU milliseconds of each worker process
per round trip, and each worker's CPU per second while the cluster idles::

    python dev/dask_round_trips.py --in-process --rows 500000 --rounds 30
    python dev/dask_round_trips.py --actors
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))


def in_process(n_rows: int, rounds: int) -> None:
    import cipherforest.ensemble._data_parallel as dp
    from cipherforest.core import (
        GradientBoostingClassifier,
        LocalShards,
        RowShard,
        fit_data_parallel,
    )
    from dask_boosting import make_blocks

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument("--actors", action="store_true")
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args()
    if args.in_process:
        in_process(args.rows, args.rounds)
    if args.actors:
        actors(args.repeats)


if __name__ == "__main__":
    main()
