"""Histogram kernels of boosting's trees, timed in one process (CPU time, interleaved).

Compares the generic four-statistic histogram build (weight, count, sum w·y, sum w·y²) with
the compact one boosting's squared-error trees use (weight and sum w·y; unit weights), over
rows in increasing order (as the stable partition keeps every node's rows) and in random
order, and times one whole 31-leaf tree kernel. CPU time per call, median over interleaved
repetitions, so other processes on the machine disturb it less than wall-clock time.

    python benchmarks/histogram_kernels.py [--rows 100000] [--repeats 30] [--threads 2]

``--threads N`` also times the whole tree with its large nodes' histograms built on N numba
threads (``grow_tree_on(..., n_threads=N)``) against one thread, in wall-clock time (CPU time
would hide a stalled parallel region); set ``NUMBA_THREADING_LAYER`` to compare numba's
layers (``workqueue``, ``omp``, ``tbb``). The line printed before the table gives the layer
used and the load average.

It also runs against older sources (``PYTHONPATH=<old checkout>/src``), timing what exists
there, which is how the whole-tree kernel is compared across commits.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from sklearn.datasets import make_classification

from cipherforest.tree._common import CRITERION_SQUARED_ERROR
from cipherforest.tree._fit import GrowthParams, grow_tree_on, prepare_tree_data
from cipherforest.tree._histogram import build_histogram

try:
    from cipherforest.tree._histogram import build_compact_histogram
except ImportError:  # sources from before compact histograms: time the rest
    build_compact_histogram = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1,
                        help="also time the whole tree on this many numba threads (wall)")
    args = parser.parse_args(argv)
    n = args.rows
    X, y = make_classification(n, 20, n_informative=10, random_state=0)
    data = prepare_tree_data(X, 255, 0)
    gradient = (y - 0.5) + np.random.RandomState(0).normal(size=n) * 0.1
    w = np.ones(n)
    generic = np.zeros((20, data.n_hist_bins, 4))
    compact = np.zeros((20, data.n_hist_bins, 2))
    lo, hi = np.zeros(20, dtype=np.int64), np.zeros(20, dtype=np.int64)
    in_order = np.arange(n, dtype=np.int64)
    shuffled = np.random.RandomState(0).permutation(n).astype(np.int64)
    params = GrowthParams(CRITERION_SQUARED_ERROR, False, 255, 20, -1, 2, 20, 0.0, 0.0, 31)

    def build_generic(rows):
        generic[:] = 0.0
        build_histogram(generic, lo, hi, data.X_binned, rows, 0, n, gradient, w,
                        CRITERION_SQUARED_ERROR, 1)

    def build_compact(rows):
        compact[:] = 0.0
        build_compact_histogram(compact, lo, hi, data.X_binned, rows, 0, n, gradient, w, 1)

    cases = {
        "generic histogram (4 stats), rows in order": lambda: build_generic(in_order),
        "compact histogram (2 stats), rows in order": lambda: build_compact(in_order),
        "generic histogram (4 stats), rows shuffled": lambda: build_generic(shuffled),
        "compact histogram (2 stats), rows shuffled": lambda: build_compact(shuffled),
        "whole tree (31 leaves, 255 bins)": lambda: grow_tree_on(data, gradient, w, 1, params, 0,
                                                                 return_leaves=True),
    }
    if build_compact_histogram is None:
        cases = {name: case for name, case in cases.items() if "compact" not in name}
    for case in cases.values():
        case()  # compile / load kernels
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, case in cases.items():
            start = time.process_time()
            case()
            times[name].append(time.process_time() - start)
    print(f"{n:,} rows × 20 features, 1-min load average {os.getloadavg()[0]:.1f}")
    print("| kernel | CPU ms (median) | min |")
    print("|---|---:|---:|")
    for name, values in times.items():
        print(f"| {name} | {1000 * np.median(values):.2f} | {1000 * min(values):.2f} |")
    if args.threads > 1:
        time_threads(data, gradient, w, params, args.threads, args.repeats)
    return 0


def time_threads(data, gradient, w, params, n_threads: int, repeats: int) -> None:
    """Wall-clock time of the whole tree on 1 and ``n_threads`` numba threads, interleaved."""
    import numba

    def tree(threads):
        return grow_tree_on(data, gradient, w, 1, params, 0, n_threads=threads)

    serial = tree(1)
    parallel = tree(n_threads)  # compiles the parallel specialisation
    assert np.array_equal(serial.threshold, parallel.threshold)
    walls: dict[int, list[float]] = {1: [], n_threads: []}
    for _ in range(repeats):
        for threads in walls:
            start = time.perf_counter()
            tree(threads)
            walls[threads].append(time.perf_counter() - start)
    print(f"\nwhole tree, wall ms; numba threading layer {numba.threading_layer()}, "
          f"1-min load average {os.getloadavg()[0]:.1f}")
    print("| threads | wall ms (median) | min | speed-up (median) |")
    print("|---:|---:|---:|---:|")
    base = np.median(walls[1])
    for threads, values in walls.items():
        print(f"| {threads} | {1000 * np.median(values):.2f} | {1000 * min(values):.2f} | "
              f"{base / np.median(values):.2f}× |")


if __name__ == "__main__":
    raise SystemExit(main())
