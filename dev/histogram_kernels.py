"""Histogram kernels of boosting's trees, timed in one process (CPU time, interleaved).

Compares the generic four-statistic histogram build (weight, count, sum w·y, sum w·y²) with
the compact one boosting's squared-error trees use (weight and sum w·y; unit weights), over
rows in increasing order (as the stable partition keeps every node's rows) and in random
order, and times one whole 31-leaf tree kernel. CPU time per call, median over interleaved
repetitions, so other processes on the machine disturb it less than wall-clock time.

    python dev/histogram_kernels.py [--rows 100000] [--repeats 30] [--threads 2]
    python dev/histogram_kernels.py --profile synthetic_100k   # where a fit's time goes
    python dev/histogram_kernels.py --node-threads synthetic_100k --repeats 5
    python dev/histogram_kernels.py --node-handoff --repeats 20
    python dev/histogram_kernels.py --partition-layout synthetic_1m --repeats 5
    python dev/histogram_kernels.py --first-fit --before-src /tmp/before/src
    python dev/histogram_kernels.py --ab pendigits --before-src /tmp/before/src
    python dev/histogram_kernels.py --ab-kernels pendigits --before-src /tmp/before/src
    python dev/histogram_kernels.py --node-density synthetic_1m --before-src /tmp/b/src
    python dev/histogram_kernels.py --python-after-kernel pendigits --repeats 20

``--threads N`` also times the whole tree with its large nodes' histograms built on N numba
threads (``grow_tree_on(..., n_threads=N)``) against one thread, in wall-clock time (CPU time
would hide a stalled parallel region); set ``NUMBA_THREADING_LAYER`` to compare numba's
layers (``workqueue``, ``omp``, ``tbb``). The line printed before the table gives the layer
used and the load average.

It also runs against older sources (``PYTHONPATH=<old checkout>/src``), timing what exists
there, which is how the whole-tree kernel is compared across commits.

``--profile DATASET`` (a dataset of ``ensembles.py``) instead times one single-core fit by
parts — binning, the grower kernel, the per-tree Python around it (line search, raw update,
tree objects), the fused gradient-and-loss pass and the rest — then replays one tree's nodes
through the grower's kernels (histogram builds of the root and the smaller children,
partitions, split scans). ``--tree-worker DATASET`` times fits on one and two threads with
the grower kernel's share and counts what the worker thread ran. ``--node-threads DATASET``
compares two-thread fits whose large nodes' steps (sharded trees, below) go to a worker
thread from ``--min-rows`` rows on (0: not at all). ``--node-handoff`` times one node's
split work in a sharded tree (``tree._shards``: each row shard's partition and its part of
the smaller child's histogram, for a node of m rows, a sorted random subset as a node's
rows sit after the stable partitions) with both shards' steps on one thread against the
second shard's step handed from the kernel to a spinning worker thread
(``tree._node_threads``), in wall time, for m from 1k to 100k, and lists the sizes of the
histograms a 31-leaf tree at 100k rows builds (its root and smaller children).
``--partition-layout DATASET`` times the partition kernel on a node of a quarter, a
twentieth and a hundredth of DATASET's rows (a sorted random subset) reading the split
feature from the binned rows (row-major, what histogram builds read) and from their
column-major copy (``TreeData.X_columns``, what the grower partitions from), per row.
``--first-fit`` times the first histogram boosting fit in a fresh process with an empty
numba cache (the histogram grower's compile time), for this tree and ``--before-src``.

``--ab DATASET --before-src PATH`` compares this source tree's boosting fits with PATH's in
ONE process: PATH's package is copied (once per change of its sources) to a cache directory
as ``cipherforest_before`` and imported beside ``cipherforest``; fits of both at ``n_jobs``
1 and 2 then alternate in a new shuffled order each repetition. The run happens in a child
process with a new, temporary numba cache (both packages compile, ~1-2 min): compiled side
by side, the two copies left entries in the shared cache that crashed later fits. On a VM
whose speed drifts by 1.5× within minutes, separate runs cannot resolve a 5-10 % change;
here both variants see the same drift, and the table also gives the median of the
per-repetition ratios (this / before), which cancels drift slower than one repetition.
``--ab-kernels DATASET --before-src PATH`` does the same for single kernels on DATASET's
binned rows: the root's partition (squared error with unit and with random weights; Gini),
its compact histogram (unit and random weights), the forests' four-statistic histogram
(squared error; Gini), a child's compact histogram subtracted from the root's (unit and
random weights) and the split scan of every feature, where a change too small to
show in whole fits can still be seen. ``--node-density DATASET --before-src PATH`` times, the
same way, the compact histogram (unit weights) and the unit-weight partition on nodes holding
a fraction of DATASET's rows (a sorted random subset, as nodes below the root hold them), in
ns per row and feature (histogram) or per row (partition): where rows far apart in memory
make the kernels wait on cache misses (what ``tree._prefetch`` addresses).

``--python-after-kernel DATASET`` times the Python that finishes a tree (``TreeGrowth.finish``)
and a ``Tree`` alone, warm and right after a numba loop that wrote 1 MB or 8 MB: the cost of
running Python with caches a tree's kernel has emptied, which is why boosting finishes a
round's trees in one batch.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import make_classification

from cipherforest.tree._common import CRITERION_GINI, CRITERION_SQUARED_ERROR
from cipherforest.tree._fit import GrowthParams, grow_tree_on, prepare_tree_data
from cipherforest.tree._histogram import build_histogram

#: ``benchmarks/``, whose ``ensembles.py`` holds the datasets and models timed here.
BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"

try:  #: Row ids as the grower holds them (32-bit below 2^31 rows).
    from cipherforest.tree._fit import row_index_dtype
    ROW_IDS = row_index_dtype(1)
except ImportError:  # sources from before 32-bit row ids
    ROW_IDS = np.int64

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
    parser.add_argument("--profile", metavar="DATASET",
                        help="instead: where a one-core fit of benchmarks/ensembles.py's "
                             "DATASET spends its time, and one tree's kernel parts")
    parser.add_argument("--node-threads", metavar="DATASET",
                        help="instead: two-thread fits of DATASET with large nodes' steps "
                             "handed to the fit's threads from --min-rows rows on, and "
                             "one-thread fits, interleaved (--repeats rounds, wall time)")
    parser.add_argument("--min-rows", default="0,20000,10000,5000",
                        help="thresholds of --node-threads (comma-separated; 0: no hand-off)")
    parser.add_argument("--first-fit", action="store_true",
                        help="instead: CPU time of the first histogram boosting fit in a "
                             "fresh process with an empty numba cache (compile time), for "
                             "this source tree and --before-src")
    parser.add_argument("--before-src", type=Path, default=None,
                        help="with --first-fit or --ab: a second source tree to measure alike")
    parser.add_argument("--ab-kernels", metavar="DATASET",
                        help="instead: single kernels of this source tree and --before-src's "
                             "on DATASET's root node, alternated in one process")
    parser.add_argument("--node-density", metavar="DATASET",
                        help="instead: the compact histogram and the partition of this source "
                             "tree and --before-src's on nodes holding a fraction of "
                             "DATASET's rows, alternated in one process")
    parser.add_argument("--ab", metavar="DATASET",
                        help="instead: boosting fits of DATASET with this source tree and "
                             "--before-src's, alternated in one process (--repeats rounds)")
    parser.add_argument("--tree-worker", metavar="DATASET",
                        help="instead: boosting fits of DATASET on one and two threads, "
                             "with the grower kernel's share and what the worker thread ran "
                             "(--repeats rounds)")
    parser.add_argument("--partition-layout", metavar="DATASET",
                        help="instead: the partition kernel reading DATASET's binned rows "
                             "(row-major) against their column-major copy, by node size")
    parser.add_argument("--node-handoff", action="store_true",
                        help="instead: one sharded node's split work on one thread vs its "
                             "second half handed to a Python thread, by node size (wall time)")
    parser.add_argument("--python-after-kernel", metavar="DATASET",
                        help="instead: the Python that finishes one of DATASET's boosting "
                             "trees (TreeGrowth.finish) and a Tree alone, warm and right "
                             "after a kernel that wrote 1 MB or 8 MB (--repeats × 10 calls)")
    args = parser.parse_args(argv)
    if args.python_after_kernel:
        time_python_after_kernel(args.python_after_kernel, args.repeats)
        return 0
    if args.first_fit:
        time_first_fit(args.before_src)
        return 0
    if args.ab or args.ab_kernels or args.node_density:
        if args.before_src is None:
            parser.error("--ab, --ab-kernels and --node-density need --before-src")
        if not os.environ.get(_AB_CHILD):
            return _run_with_private_kernel_cache(argv)
        if args.ab:
            compare_sources(args.ab, args.before_src, args.repeats)
        elif args.node_density:
            compare_node_density(args.node_density, args.before_src, args.repeats)
        else:
            compare_kernels(args.ab_kernels, args.before_src, args.repeats)
        return 0
    if args.partition_layout:
        time_partition_layout(args.partition_layout, args.repeats)
        return 0
    if args.node_handoff:
        time_node_handoff(args.rows, args.repeats)
        return 0
    if args.tree_worker:
        time_tree_worker(args.tree_worker, args.repeats)
        return 0
    if args.profile:
        profile_fit(args.profile)
        return 0
    if args.node_threads:
        compare_node_threads(args.node_threads, args.repeats,
                             [int(value) for value in args.min_rows.split(",")])
        return 0
    n = args.rows
    X, y = make_classification(n, 20, n_informative=10, random_state=0)
    data = prepare_tree_data(X, 255, 0)
    gradient = (y - 0.5) + np.random.RandomState(0).normal(size=n) * 0.1
    w = np.ones(n)
    generic = np.zeros((20, data.n_hist_bins, 4))
    compact = np.zeros((20, data.n_hist_bins, 2))
    lo, hi = np.zeros(20, dtype=np.int64), np.zeros(20, dtype=np.int64)
    in_order = np.arange(n, dtype=ROW_IDS)  # the grower's row ids
    shuffled = np.random.RandomState(0).permutation(n).astype(ROW_IDS)
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


# ------------------------------------------------------------------------- fit profile
def partition_unit(kernel, feature, split_bin, samples, X_binned, missing_bin, buffer,
                   gradient, stats, smaller):
    """One unit-weight partition of all of ``samples`` by either signature of
    ``partition_unit_squared_error``: summing the ``smaller`` child only (from commit
    ``18cf124`` on) or both children (before)."""
    head = (feature, split_bin, False, samples, 0, len(samples), X_binned, missing_bin,
            buffer, gradient)
    if "summed" in kernel.py_func.__code__.co_varnames:
        stats[smaller] = 0.0
        kernel(*head, smaller, stats[smaller])
    else:
        kernel(*head, stats[0], stats[1])


def profile_fit(dataset: str) -> None:
    """Where one single-thread fit's time goes (``--profile DATASET``), then the tree kernel
    split into its parts by replaying one tree's nodes through the kernels it calls."""
    import sys

    sys.path.insert(0, str(BENCHMARKS_DIR))
    import cipherforest.ensemble._gb_losses as losses
    import cipherforest.ensemble._gradient_boosting as boosting
    import cipherforest.tree._fit as fit
    from ensembles import is_regression, load_dataset, make_model

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    X, _, y, _ = load_dataset(dataset)
    regression = is_regression(dataset)
    spent = dict.fromkeys(("binning", "grower kernel", "per tree in Python",
                           "gradient and loss"), 0.0)

    def timed(owner, name, key):
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - start
        static = isinstance(inspect.getattr_static(owner, name), staticmethod)
        setattr(owner, name, staticmethod(wrapper) if static else wrapper)
        return original

    timed(boosting, "prepare_tree_data", "binning")
    timed(fit, "grow_tree", "grower kernel")
    # A tree's Python: prepared (_start_tree), grown (TreeGrowth.run, less the kernel) and
    # finished (_finish_tree).
    timed(boosting.BaseGradientBoosting, "_start_tree", "per tree in Python")
    timed(fit.TreeGrowth, "run", "per tree in Python")
    timed(boosting.BaseGradientBoosting, "_finish_tree", "per tree in Python")
    for loss in (losses.BinomialLoss, losses.MultinomialLoss, losses.SquaredError):
        timed(loss, "gradient_and_loss", "gradient and loss")
    model = make_model("ours_gb_hist_1thread", regression)
    model.set_params(n_estimators=3).fit(X[:2000], y[:2000])  # compile / load kernels
    for key in spent:
        spent[key] = 0.0
    model = make_model("ours_gb_hist_1thread", regression)
    start = time.perf_counter()
    model.fit(X, y)
    total = time.perf_counter() - start
    spent["per tree in Python"] -= spent["grower kernel"]
    spent["rest (validation, init, packing)"] = total - sum(spent.values())
    n_trees = model.estimators_.size
    print(f"{dataset}: one fit on one core, {total:.3f} s, {n_trees} trees; 1-min load "
          f"average {os.getloadavg()[0]:.1f}")
    print("| part | s | share |")
    print("|---|---:|---:|")
    for key, value in spent.items():
        print(f"| {key} | {value:.3f} | {100 * value / total:.0f} % |")
    kernel_parts(X, y, model)


def time_python_after_kernel(dataset: str, repeats: int) -> None:
    """How much slower Python runs right after a kernel (``--python-after-kernel DATASET``).

    A tree's kernel leaves the caches full of its own data; the Python that follows (making
    the ``Tree``, the line search's calls) then misses where it hit when warm. Timed: the
    finishing step of a tree grown on DATASET (``TreeGrowth.finish``: one kernel call that
    makes the node arrays and leaves, and a ``Tree``) and the ``Tree`` alone, each with
    nothing before it and after a numba loop that wrote every cache line of 1 MB or 8 MB.
    """
    import sys

    from numba import njit

    from cipherforest.tree._fit import TREE_ARRAYS, prepare_growth
    from cipherforest.tree._tree import Tree

    sys.path.insert(0, str(BENCHMARKS_DIR))
    from ensembles import load_dataset

    @njit(cache=False)
    def touch(buffer):
        for i in range(0, buffer.shape[0], 64):
            buffer[i] += 1

    X, _, y, _ = load_dataset(dataset)
    data = prepare_tree_data(X, 255, 0)
    n = data.n_samples
    target = (y == y[0]).astype(np.float64) - 0.1  # a one-class-against-the-rest gradient
    params = GrowthParams(CRITERION_SQUARED_ERROR, False, 255, data.n_features, -1, 2, 20,
                          0.0, 0.0, 31)
    growth = prepare_growth(data, target, np.ones(n), 1, params, 0, return_leaves=True,
                            row_shards=True, rows=n, unit_weight=True).run()
    tree, _ = growth.finish()
    arrays = tree.arrays()
    assert tuple(arrays) == TREE_ARRAYS
    cases = {"TreeGrowth.finish (kernel + Tree)": growth.finish,
             "Tree alone": lambda: Tree(data.n_features, np.array([1]), arrays, check=False)}
    buffer = np.zeros(8 << 20, dtype=np.uint8)
    touch(buffer)
    print(f"{dataset}: one tree of {tree.node_count} nodes on {n:,} rows; wall us, median of "
          f"{repeats * 10} calls; 1-min load average {os.getloadavg()[0]:.1f}")
    print("| Python | warm | after writing 1 MB | after writing 8 MB | 8 MB / warm |")
    print("|---|---:|---:|---:|---:|")
    for name, case in cases.items():
        medians = []
        for size in (0, 1 << 20, 8 << 20):
            part = buffer[:size]
            times = []
            for _ in range(repeats * 10):
                touch(part)
                start = time.perf_counter()
                case()
                times.append(time.perf_counter() - start)
            medians.append(1e6 * float(np.median(times)))
        print(f"| {name} | {medians[0]:.1f} | {medians[1]:.1f} | {medians[2]:.1f} | "
              f"{medians[2] / medians[0]:.1f}× |")


def kernel_parts(X, y, model) -> None:
    """Replay one tree of ``model``'s first round (regrown on that round's gradient) node by
    node through the kernels the grower calls, timing each kind of work."""
    from numba import njit

    from cipherforest.tree._common import TREE_LEAF
    from cipherforest.tree._split_record import reset_split, split_record_size

    try:
        from cipherforest.tree._histogram import (
            best_split_compact_feature,
            partition_unit_squared_error,
        )
    except ImportError:  # older sources: the fit profile above is all they get
        print("\n(the kernel parts need the unit-weight partition of later sources)")
        return

    @njit(cache=False)
    def scan_node(hist, lo, hi, thresholds, node, min_samples_leaf, split, scratch):
        reset_split(split)
        for f in range(hist.shape[0]):
            best_split_compact_feature(f, hist, lo, hi, thresholds, node, min_samples_leaf,
                                       0.0, split, scratch[0], scratch[1], scratch[2])

    est = model.estimators_[0, 0]
    data = prepare_tree_data(X, model.max_bins, 0)
    loss = model._loss()
    raw = model._initial_raw(X)
    gradient = np.ascontiguousarray(loss.negative_gradient(model._encode_y(y, np.ones(len(y))),
                                                           raw)[:, 0])
    w = np.ones(X.shape[0])
    params = GrowthParams(CRITERION_SQUARED_ERROR, False, model.max_bins, X.shape[1], -1, 2,
                          est.min_samples_leaf, 0.0, 0.0, est.max_leaf_nodes)
    grow_tree_on(data, gradient, w, 1, params, 0, return_leaves=True)
    walls = []
    for _ in range(20):
        start = time.perf_counter()
        tree, leaves = grow_tree_on(data, gradient, w, 1, params, 0, return_leaves=True)
        walls.append(time.perf_counter() - start)
    # Rows of every node, in increasing order as the grower holds them.
    left, right = tree.children_left, tree.children_right
    rows = {0: np.arange(X.shape[0], dtype=ROW_IDS)}
    order = [0]
    for node in order:
        if left[node] != TREE_LEAF:
            going_left = np.isin(leaves[rows[node]], _subtree_leaves(left, right, left[node]))
            rows[left[node]] = rows[node][going_left]
            rows[right[node]] = rows[node][~going_left]
            order += [left[node], right[node]]
    internal = [node for node in order if left[node] != TREE_LEAF]
    built = {0} | {min(left[node], right[node], key=lambda c: len(rows[c]))
                   for node in internal}
    evaluated = [node for node in order if node < tree.node_count - 2]  # not the last children
    n_bins = data.n_hist_bins

    def replay():
        hists = {}
        parts = dict.fromkeys(("histograms (root + smaller children)", "partitions",
                               "split scans (every evaluated node)"), 0.0)
        for node in evaluated:  # every scanned node needs one; only the built ones are timed
            hist = np.zeros((X.shape[1], n_bins, 2))
            lo = np.zeros(X.shape[1], dtype=np.int64)
            hi = np.zeros(X.shape[1], dtype=np.int64)
            start = time.perf_counter()
            build_compact_histogram(hist, lo, hi, data.X_binned, rows[node], 0,
                                    len(rows[node]), gradient, w, 1)
            if node in built:
                parts["histograms (root + smaller children)"] += time.perf_counter() - start
            hists[node] = (hist, lo, hi)
        buffer = np.zeros(X.shape[0], dtype=ROW_IDS)
        stats = np.zeros((2, 4))
        # The layout the grower partitions from: the column-major copy where the sources
        # make one and this matrix is large enough to get it (else it is empty).
        columns = getattr(data, "X_columns", None)
        partition_layout = data.X_binned if columns is None or not columns.shape[0] else columns
        for node in internal:
            samples = rows[node].copy()
            feature = np.int64(tree.feature[node])
            split_bin = np.int64(np.searchsorted(data.bin_thresholds[feature],
                                                 tree.threshold[node]))
            start = time.perf_counter()
            smaller = int(tree.n_node_samples[tree.children_left[node]]
                          > tree.n_node_samples[tree.children_right[node]])
            partition_unit(partition_unit_squared_error, feature, split_bin, samples,
                           partition_layout, n_bins - 1, buffer, gradient, stats, smaller)
            parts["partitions"] += time.perf_counter() - start
        split = np.zeros(split_record_size(4))
        scratch = np.zeros((3, 4))
        node_stats = np.zeros(4)
        for node in evaluated:
            hist, lo, hi = hists[node]
            g = gradient[rows[node]]
            node_stats[:] = (len(g), len(g), g.sum(), (g * g).sum())
            start = time.perf_counter()
            scan_node(hist, lo, hi, data.bin_thresholds, node_stats, est.min_samples_leaf,
                      split, scratch)
            parts["split scans (every evaluated node)"] += time.perf_counter() - start
        return parts

    replay()  # compiles / loads the kernels' specialisations
    parts = replay()
    whole = float(np.median(walls))
    parts["rest (subtraction, clearing, allocation, bookkeeping)"] = whole - sum(parts.values())
    print(f"\none tree of the first round, {tree.node_count} nodes, wall ms (median of 20): "
          f"{1000 * whole:.2f}; its parts replayed node by node (the larger child's histogram "
          "is subtracted, not built)")
    print("| part | ms | share |")
    print("|---|---:|---:|")
    for key, value in parts.items():
        print(f"| {key} | {1000 * value:.2f} | {100 * value / whole:.0f} % |")


def compare_node_threads(dataset: str, repeats: int, thresholds: list[int]) -> None:
    """Wall and CPU time of ``n_jobs=2`` fits with large nodes' steps handed to the fit's
    threads from ``tree._fit.NODE_THREADS_MIN_ROWS`` rows on (each of ``thresholds``, 0: no
    hand-off); of an ``n_jobs=2`` fit without the hand-off whose gradient-and-loss pass also
    runs on one thread (then the pool does nothing: what remains is the cost of having one);
    and of ``n_jobs=1`` fits (same process, no pinning), in two row shards (as the fits
    above) and in one (what the shards cost a one-thread fit), interleaved in a shuffled
    order."""
    import sys

    sys.path.insert(0, str(BENCHMARKS_DIR))
    import cipherforest.ensemble._gb_losses as losses
    import cipherforest.tree._fit as fit
    from ensembles import is_regression, load_dataset, make_model

    try:
        import cipherforest.tree._shards as shards
    except ImportError:  # sources before the row shards
        shards = None
    X, _, y, _ = load_dataset(dataset)
    regression = is_regression(dataset)
    make_model("ours_gb_hist", regression).set_params(n_estimators=3).fit(X, y)  # compile
    default = fit.NODE_THREADS_MIN_ROWS
    default_shard_rows = shards.SHARD_MIN_ROWS if shards is not None else None
    threaded_pass = losses.chunked_gradient_and_loss

    def one_thread_pass(kernel, y, raw, w, neg_gradient, pool=None):
        return threaded_pass(kernel, y, raw, w, neg_gradient, None)

    # (label, n_jobs, threshold, gradient pass on the pool, sharded): n_jobs=1 never hands
    # off.
    variants = [(f">= {t:,} rows" if t > 0 else "none", 2, t, True, True) for t in thresholds]
    variants.append(("none, gradient pass on one thread", 2, 0, False, True))
    variants.append(("n_jobs=1 (no pool)", 1, default, False, True))
    if shards is not None:
        variants.append(("n_jobs=1, one row shard (no pool)", 1, default, False, False))
    walls: dict[str, list[float]] = {label: [] for label, *_ in variants}
    cpus: dict[str, list[float]] = {label: [] for label, *_ in variants}
    loads = []
    try:
        order = np.random.default_rng(0)
        for _ in range(repeats):
            # A new order each repetition: a variant's cost must not depend on the one before.
            for index in order.permutation(len(variants)):
                label, n_jobs, threshold, pool_pass, sharded = variants[index]
                fit.NODE_THREADS_MIN_ROWS = threshold if threshold > 0 else 1 << 62
                if shards is not None:
                    shards.SHARD_MIN_ROWS = default_shard_rows if sharded else 1 << 62
                losses.chunked_gradient_and_loss = (threaded_pass if pool_pass
                                                    else one_thread_pass)
                model = make_model("ours_gb_hist", regression).set_params(n_jobs=n_jobs)
                start, cpu = time.perf_counter(), time.process_time()
                model.fit(X, y)
                walls[label].append(time.perf_counter() - start)
                cpus[label].append(time.process_time() - cpu)
            loads.append(os.getloadavg()[0])
    finally:
        fit.NODE_THREADS_MIN_ROWS = default
        losses.chunked_gradient_and_loss = threaded_pass
        if shards is not None:
            shards.SHARD_MIN_ROWS = default_shard_rows
    print(f"{dataset}, fits, wall and CPU s (all threads) ({repeats} interleaved "
          f"repetitions); 1-min load average {min(loads):.1f}-{max(loads):.1f}")
    print("| n_jobs=2, nodes handed to the threads | wall median | min | max | CPU median | "
          "wall speed-up vs none (median) |")
    print("|---|---:|---:|---:|---:|---:|")
    base = np.median(walls["none"]) if "none" in walls else None
    for label, values in walls.items():
        ratio = f"{base / np.median(values):.2f}×" if base else "–"
        print(f"| {label} | {np.median(values):.3f} | {min(values):.3f} | {max(values):.3f} | "
              f"{np.median(cpus[label]):.3f} | {ratio} |")


def time_tree_worker(dataset: str, repeats: int) -> None:
    """Wall time of boosting fits of ``dataset`` (``ensembles.py``'s model) at ``n_jobs`` 1
    and 2, alternated in a shuffled order: the whole fit, the grower kernel's calls
    (``tree._fit.grow_tree``) and the rest; and, per two-thread tree, what was handed to
    the worker thread (``tree._node_threads``): shard steps and split scans posted, claimed
    by the worker or taken back by the grower; and over the trees with a worker, how much of
    their kernel time the worker spent working and the grower spent waiting for it."""
    import sys

    sys.path.insert(0, str(BENCHMARKS_DIR))
    import cipherforest.tree._fit as fit
    from cipherforest.tree._node_threads import CONTROL_TAKEN_BACK, NodeThreads
    from ensembles import is_regression, load_dataset, make_model

    X, _, y, _ = load_dataset(dataset)
    regression = is_regression(dataset)
    for n_jobs in (1, 2):  # compile, and start the worker's kernel once
        make_model("ours_gb_hist", regression).set_params(n_estimators=3, n_jobs=n_jobs).fit(X, y)
    kernel = fit.grow_tree
    enter, leave = NodeThreads.__enter__, NodeThreads.__exit__
    spent = [0.0]
    counts: list[tuple[int, ...]] = []
    # Per tree: (n_jobs, whether a worker served it, kernel wall s).
    worker_now = [False]
    tree_times: list[tuple[int, bool, float]] = []
    n_jobs_now = [1]

    def timed_kernel(*args):
        start = time.perf_counter()
        try:
            return kernel(*args)
        finally:
            took = time.perf_counter() - start
            spent[0] += took
            tree_times.append((n_jobs_now[0], worker_now[0], took))
            worker_now[0] = False

    def enter_and_mark(self):
        worker_now[0] = True
        return enter(self)

    # Cycle-counter ticks of the trees with a worker: (worker busy, grower waiting for
    # steps, scans, merges).
    worker_cycles: list[tuple[int, ...]] = []

    def leave_and_count(self, *exc_info):
        leave(self, *exc_info)
        counts.append((self.posted, self.served, int(self.control[CONTROL_TAKEN_BACK]),
                       self.scans_posted, self.scans_served))
        waited = getattr(self, "waited_cycles", None)
        if isinstance(waited, tuple):  # sources from 8746450 on
            worker_cycles.append((self.busy_cycles, *waited))

    walls: dict[int, list[float]] = {1: [], 2: []}
    kernels: dict[int, list[float]] = {1: [], 2: []}
    per_fit = []
    fit.grow_tree = timed_kernel
    NodeThreads.__enter__ = enter_and_mark
    NodeThreads.__exit__ = leave_and_count
    try:
        order = np.random.default_rng(0)
        for _ in range(repeats):
            for n_jobs in order.permutation([1, 2]):
                model = make_model("ours_gb_hist", regression).set_params(n_jobs=int(n_jobs))
                spent[0] = 0.0
                counts.clear()
                n_jobs_now[0] = int(n_jobs)
                start = time.perf_counter()
                model.fit(X, y)
                walls[n_jobs].append(time.perf_counter() - start)
                kernels[n_jobs].append(spent[0])
                if n_jobs == 2:
                    per_fit.append((len(counts), *np.sum(counts, axis=0)) if counts else
                                    (0, 0, 0, 0, 0, 0))
    finally:
        fit.grow_tree = kernel
        NodeThreads.__enter__ = enter
        NodeThreads.__exit__ = leave
    print(f"{dataset}: boosting fits, wall s, median of {repeats} (shuffled order); "
          f"1-min load average {os.getloadavg()[0]:.1f}")
    print("| n_jobs | fit | grower kernel | rest of the fit |")
    print("|---:|---:|---:|---:|")
    for n_jobs in (1, 2):
        fit_s, kernel_s = np.median(walls[n_jobs]), np.median(kernels[n_jobs])
        rest = np.median(np.subtract(walls[n_jobs], kernels[n_jobs]))
        print(f"| {n_jobs} | {fit_s:.3f} | {kernel_s:.3f} | {rest:.3f} |")
    print(f"two threads / one: fit {np.median(walls[2]) / np.median(walls[1]):.2f}×, grower "
          f"kernel {np.median(kernels[2]) / np.median(kernels[1]):.2f}×")
    trees, posted, served, taken_back, scans, scans_served = np.median(per_fit, axis=0)
    print(f"two-thread fits (medians): {trees:.0f} trees with a worker; per fit "
          f"{posted:.0f} hand-offs posted, {served:.0f} claimed by the worker, "
          f"{taken_back:.0f} taken back; of them {scans:.0f} split scans "
          f"({scans_served:.0f} claimed)")
    print("| trees | count | kernel ms per tree: median | p90 | max | total s |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, n_jobs, worker in (("n_jobs=1", 1, False), ("n_jobs=2, with a worker", 2, True),
                                  ("n_jobs=2, without", 2, False)):
        times = np.array([t for j, wk, t in tree_times if j == n_jobs and wk == worker]) * 1e3
        if times.size:
            print(f"| {label} | {times.size} | {np.median(times):.2f} | "
                  f"{np.percentile(times, 90):.2f} | {times.max():.1f} | "
                  f"{times.sum() / 1e3:.2f} |")
    with_worker = sum(t for j, wk, t in tree_times if j == 2 and wk)
    if worker_cycles and with_worker > 0:
        hz = cycle_counter_hz()
        busy, steps, scans, merges = (float(v) / hz for v in np.sum(worker_cycles, axis=0))
        waited = steps + scans + merges
        print(f"trees with a worker ({len(worker_cycles)}): grower kernel {with_worker:.2f} s; "
              f"the worker busy {busy:.2f} s ({100 * busy / with_worker:.0f} % of it), the "
              f"grower waiting for claimed work {waited:.2f} s "
              f"({100 * waited / with_worker:.0f} %: steps {100 * steps / with_worker:.0f} %, "
              f"scans {100 * scans / with_worker:.0f} %, merges "
              f"{100 * merges / with_worker:.0f} %)")


def cycle_counter_hz() -> float:
    """Ticks per second of the kernels' cycle counter (``_atomics.cycle_counter``), against
    ``time.perf_counter`` over 0.2 s."""
    from numba import njit

    from cipherforest.tree._atomics import cycle_counter

    @njit(cache=False)
    def ticks():
        return cycle_counter()

    ticks()
    start, began = time.perf_counter(), ticks()
    time.sleep(0.2)
    return (ticks() - began) / (time.perf_counter() - start)


def time_partition_layout(dataset: str, repeats: int) -> None:
    """CPU ns per row of ``_partition_rows`` over nodes of DATASET's rows, reading the split
    feature from the row-major binned rows and from their column-major copy, alternated."""
    import sys

    from cipherforest.tree._histogram import _partition_rows

    sys.path.insert(0, str(BENCHMARKS_DIR))
    from ensembles import load_dataset

    X, _, _, _ = load_dataset(dataset)
    data = prepare_tree_data(X, 255, 0)
    layouts = {"row-major": data.X_binned, "column-major": np.asfortranarray(data.X_binned)}
    n, n_features = data.X_binned.shape
    missing_bin = data.n_hist_bins - 1
    rng = np.random.RandomState(1)
    print(f"{dataset}: {n} rows x {n_features} features; {n_features} nodes of each size, "
          "each partitioned once by its own feature at that feature's median bin (a node's "
          "rows are a sorted random subset; no node's rows are in cache from another's), "
          f"CPU ns per row, median of {repeats} alternated repetitions; 1-min load average "
          f"{os.getloadavg()[0]:.1f}")
    print("| node rows | share of rows | row-major ns/row | column-major ns/row | ratio |")
    print("|---:|---:|---:|---:|---:|")
    for share in (0.25, 0.05, 0.01):
        m = int(n * share)
        nodes = [np.sort(rng.choice(n, m, replace=False)).astype(ROW_IDS)
                 for _ in range(n_features)]
        samples, buffer = np.empty(m, dtype=ROW_IDS), np.empty(m, dtype=ROW_IDS)
        split_bins = [np.int64(np.median(data.X_binned[nodes[f][:1000], f]))
                      for f in range(n_features)]
        times: dict[str, list[float]] = {name: [] for name in layouts}
        for repeat in range(repeats + 1):  # the first compiles / loads the kernels
            for name, X_layout in layouts.items():
                spent = 0.0
                for f in range(n_features):
                    samples[:] = nodes[f]
                    start = time.process_time()
                    _partition_rows(np.int64(f), split_bins[f], False, samples, 0, m,
                                    X_layout, missing_bin, buffer)
                    spent += time.process_time() - start
                if repeat:
                    times[name].append(1e9 * spent / (m * n_features))
        row_major, column_major = (float(np.median(times[name])) for name in layouts)
        print(f"| {m} | {share:g} | {row_major:.2f} | {column_major:.2f} | "
              f"{column_major / row_major:.2f} |")


def time_node_handoff(n: int, repeats: int) -> None:
    """Wall time of one node's split work in a sharded tree — each row shard's partition
    and its part of the smaller child's compact histogram, then the parts added — with both
    shards' steps on one thread and with the second shard's step handed from the kernel to a
    spinning worker on a pool thread (``tree._node_threads``), by node size; then the sizes of the
    histograms one 31-leaf tree builds."""
    from concurrent.futures import ThreadPoolExecutor

    from cipherforest.tree._histogram import clear_histogram
    from cipherforest.tree._node_threads import NodeThreads, run_shard_steps
    from cipherforest.tree._shards import TASK_SIZE, add_partial_histogram, set_task

    X, y = make_classification(n, 20, n_informative=10, random_state=0)
    data = prepare_tree_data(X, 255, 0)
    gradient = (y - 0.5) + np.random.RandomState(0).normal(size=n) * 0.1
    w = np.ones(n)
    rng = np.random.RandomState(1)
    sizes = [m for m in (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000) if m <= n]
    rows = {m: np.sort(rng.choice(n, m, replace=False)).astype(ROW_IDS) for m in sizes}
    buffers = {m: np.empty(m, dtype=ROW_IDS) for m in sizes}
    n_bins = data.n_hist_bins
    # The split: feature 0 at its median bin; the smaller side's histogram is built.
    split_bin = int(np.median(data.X_binned[:, 0]))
    build = 0 if np.mean(data.X_binned[:, 0] <= split_bin) <= 0.5 else 1

    def slot():
        return (np.zeros((20, n_bins, 2)), np.full(20, n_bins, dtype=np.int64),
                np.full(20, -1, dtype=np.int64))

    task0, stats0, (hist0, lo0, hi0) = np.zeros(TASK_SIZE, dtype=np.int64), np.zeros((2, 4)), slot()
    task1, stats1, (hist1, lo1, hi1) = np.zeros(TASK_SIZE, dtype=np.int64), np.zeros((2, 4)), slot()

    def node_step(m, hand_off, node_threads):
        # A partition of rows already partitioned by the same split leaves them as they are,
        # so every repetition does the same work.
        clear_histogram(hist0, lo0, hi0)
        half = m // 2
        set_task(task0, 0, split_bin, False, 0, half, build, 0)
        set_task(task1, 0, split_bin, False, half, m, build, 0)
        run_shard_steps(True, hand_off, node_threads, task0, stats0, hist0, lo0, hi0, task1,
                        stats1, hist1, lo1, hi1, data.X_binned, data.X_columns, rows[m],
                        buffers[m], gradient, w, 1)
        add_partial_histogram(hist0, lo0, hi0, hist1, lo1, hi1)

    walls: dict[tuple[int, int], list[float]] = {(m, t): [] for m in sizes for t in (1, 2)}
    with ThreadPoolExecutor(1) as pool:
        for m in sizes:  # one worker at a time: it spins on its node's arrays
            with NodeThreads(pool, 1, data.X_binned, data.X_columns, rows[m], buffers[m],
                             gradient, w, task1, stats1, hist1, lo1, hi1) as control:
                node_step(m, True, control)
                expected = hist0.copy()
                node_step(m, False, control)
                assert np.array_equal(hist0, expected)
                for _ in range(repeats):
                    for threads in (1, 2):
                        start = time.perf_counter()
                        node_step(m, threads == 2, control)
                        walls[m, threads].append(time.perf_counter() - start)
    print(f"one node's split work in a sharded tree (partition + smaller child's histogram "
          f"of each shard, parts added), {n:,} × 20 data, wall ms (median of {repeats}); "
          f"1-min load average {os.getloadavg()[0]:.1f}")
    print("| node rows | both shards on one thread | second shard handed to a thread | "
          "saved | speed-up |")
    print("|---:|---:|---:|---:|---:|")
    for m in sizes:
        one, two = (1000 * np.median(walls[m, t]) for t in (1, 2))
        print(f"| {m:,} | {one:.3f} | {two:.3f} | {one - two:+.3f} | {one / two:.2f}× |")

    params = GrowthParams(CRITERION_SQUARED_ERROR, False, 255, 20, -1, 2, 20, 0.0, 0.0, 31)
    tree = grow_tree_on(data, gradient, w, 1, params, 0)
    left, right, counts = tree.children_left, tree.children_right, tree.n_node_samples
    built = [int(counts[0])] + [int(min(counts[left[i]], counts[right[i]]))
                                for i in range(tree.node_count) if left[i] >= 0]
    built = np.array(built)
    print(f"\nhistograms one 31-leaf tree builds (root and smaller children; upper bound, "
          f"as children too small to split need none): {built.shape[0]}, "
          f"{built.sum():,} rows in all")
    for threshold in (5_000, 10_000, 20_000):
        big = built[built >= threshold]
        print(f"  >= {threshold:,} rows: {big.shape[0]} histograms, {big.sum():,} rows "
              f"({100 * big.sum() / built.sum():.0f} % of the rows)")


FIRST_FIT = r"""
import json, time
from sklearn.datasets import make_classification
from cipherforest.ensemble import GradientBoostingClassifier
X, y = make_classification(3000, 8, random_state=0)
times = {}
for name, n_jobs in (("first fit, 1 thread", 1), ("first fit, 2 threads", 2)):
    start = time.process_time()
    GradientBoostingClassifier(n_estimators=5, max_bins=64, max_leaf_nodes=15,
                               max_depth=None, n_jobs=n_jobs, random_state=0).fit(X, y)
    times[name] = time.process_time() - start
print(json.dumps(times))
"""


_AB_CHILD = "CIPHERFOREST_AB_CHILD"


def _run_with_private_kernel_cache(argv: list[str] | None) -> int:
    """Run this script again in a child process whose numba cache is a new temporary
    directory. Two copies of the package compiled in one process left cache entries behind
    that crashed later, ordinary fits (a segfault in the grower), so an A/B run never writes
    to the cache other processes use."""
    import subprocess
    import sys
    import tempfile

    arguments = sys.argv[1:] if argv is None else argv
    with tempfile.TemporaryDirectory(prefix="cipherforest-ab-numba-") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, _AB_CHILD: "1"}
        return subprocess.run([sys.executable, str(Path(__file__).resolve()), *arguments],
                              env=env, check=False).returncode


def _importable_copy(src: Path, name: str) -> Path:
    """Copy package ``src/cipherforest`` to a cache directory as package ``name`` (its
    imports are relative, so it runs there as it is) and return the directory to put on
    ``sys.path``. The copy is renewed only when the sources differ."""
    import shutil

    from cipherforest._kernel_cache import sources_fingerprint

    package = src / "cipherforest"
    if not (package / "__init__.py").is_file():
        raise SystemExit(f"--before-src {src}: no cipherforest package there")
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cipherforest-ab"
    parent = root / sources_fingerprint(package)[:16]
    if not (parent / name / "__init__.py").is_file():
        shutil.rmtree(parent, ignore_errors=True)
        shutil.copytree(package, parent / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    return parent


def compare_sources(dataset: str, before_src: Path, repeats: int) -> None:
    """Wall and CPU seconds of ``ensembles.py``'s ``ours_gb_hist`` fits on ``dataset`` with
    this source tree and with ``before_src``, at ``n_jobs`` 1 and 2, alternated in one
    process in a new shuffled order each repetition."""
    import importlib
    import sys

    sys.path.insert(0, str(BENCHMARKS_DIR))
    from ensembles import cpu_ticks, is_regression, load_dataset, make_model, steal_percent

    sys.path.insert(0, str(_importable_copy(before_src.resolve(), "cipherforest_before")))
    before = importlib.import_module("cipherforest_before.ensemble")
    X, _, y, _ = load_dataset(dataset)
    regression = is_regression(dataset)
    template = make_model("ours_gb_hist", regression)
    name = type(template).__name__

    def model(source: str, n_jobs: int):
        if source == "this":
            return make_model("ours_gb_hist", regression).set_params(n_jobs=n_jobs)
        return getattr(before, name)(**{**template.get_params(), "n_jobs": n_jobs})

    variants = [(source, n_jobs) for n_jobs in (1, 2) for source in ("before", "this")]
    for source, n_jobs in variants:
        model(source, n_jobs).set_params(n_estimators=3).fit(X, y)  # compile / load
    walls: dict[tuple, list[float]] = {v: [] for v in variants}
    cpus: dict[tuple, list[float]] = {v: [] for v in variants}
    loads = []
    order = np.random.default_rng(0)
    ticks = cpu_ticks()
    for _ in range(repeats):
        for index in order.permutation(len(variants)):
            source, n_jobs = variants[index]
            estimator = model(source, n_jobs)
            start, cpu = time.perf_counter(), time.process_time()
            estimator.fit(X, y)
            walls[variants[index]].append(time.perf_counter() - start)
            cpus[variants[index]].append(time.process_time() - cpu)
        loads.append(os.getloadavg()[0])
    steal = steal_percent(ticks, cpu_ticks())
    print(f"{dataset}: boosting fits of this tree and {before_src}, one process, {repeats} "
          f"shuffled repetitions; 1-min load average {min(loads):.1f}-{max(loads):.1f}; CPU "
          f"time taken by the hypervisor {'–' if steal is None else f'{steal:.1f} %'}")
    print("| n_jobs | before wall s (median) | this wall s (median) | this / before (medians) "
          "| this / before (median of paired ratios) | before CPU s | this CPU s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n_jobs in (1, 2):
        b, t = walls[("before", n_jobs)], walls[("this", n_jobs)]
        paired = np.median(np.asarray(t) / np.asarray(b))
        print(f"| {n_jobs} | {np.median(b):.3f} | {np.median(t):.3f} | "
              f"{np.median(t) / np.median(b):.3f} | {paired:.3f} | "
              f"{np.median(cpus[('before', n_jobs)]):.3f} | "
              f"{np.median(cpus[('this', n_jobs)]):.3f} |")


def compact_scan_loop(module):
    """A numba function running ``module.best_split_compact_feature`` over every feature of
    a node 20 times (min_samples_leaf 20)."""
    from numba import njit

    find = module.best_split_compact_feature

    @njit(cache=False)
    def loop(hist, lo, hi, thresholds, node, split, cum, left, right):
        for _ in range(20):
            split[:] = 0.0
            split[4] = np.inf
            for f in range(hist.shape[0]):
                find(f, hist, lo, hi, thresholds, node, 20.0, 0.0, split, cum, left, right)

    return loop


def _histogram_kernels_of_both(dataset: str, before_src: Path):
    """``tree._histogram`` of this source tree and of ``before_src`` (imported beside it as
    ``cipherforest_before``), and ``dataset``'s training rows binned (255 bins)."""
    import importlib
    import sys

    import cipherforest.tree._histogram as this

    sys.path.insert(0, str(BENCHMARKS_DIR))
    from ensembles import load_dataset

    sys.path.insert(0, str(_importable_copy(before_src.resolve(), "cipherforest_before")))
    before = importlib.import_module("cipherforest_before.tree._histogram")
    X, _, _, _ = load_dataset(dataset)
    return this, before, prepare_tree_data(X, 255, 0)


def shuffled_cpu_times(calls: dict, repeats: int) -> dict:
    """CPU seconds of each of ``calls`` (key: a function of no arguments), each called once
    first (compile / load) and then ``repeats`` times, all of them in a new shuffled order
    each repetition; the times by key."""
    for call in calls.values():
        call()
    keys = list(calls)
    times: dict = {key: [] for key in keys}
    order = np.random.default_rng(0)
    for _ in range(repeats):
        for index in order.permutation(len(keys)):
            start = time.process_time()
            calls[keys[index]]()
            times[keys[index]].append(time.process_time() - start)
    return times


def compare_kernels(dataset: str, before_src: Path, repeats: int) -> None:
    """CPU time of single kernels of this source tree and of ``before_src`` on the root node
    of ``dataset`` (its binned rows, a normal gradient, unit or random weights), alternated
    in one process in a new shuffled order each repetition."""
    this, before, data = _histogram_kernels_of_both(dataset, before_src)
    X_binned, n_bins = data.X_binned, data.n_hist_bins
    n, n_features = X_binned.shape
    rng = np.random.RandomState(0)
    gradient = rng.normal(size=n)
    unit, weights = np.ones(n), rng.rand(n) + 0.5
    classes = (gradient > 0).astype(np.float64)
    rows = np.arange(n, dtype=ROW_IDS)
    samples, buffer = rows.copy(), np.empty_like(rows)
    stats = np.zeros((2, 6))
    # The root split of each feature at its median bin; a call partitions by every feature.
    split_bins = [int(np.median(X_binned[:, f])) for f in range(n_features)]
    hist = np.zeros((n_features, n_bins, 2))
    lo, hi = np.zeros(n_features, dtype=np.int64), np.zeros(n_features, dtype=np.int64)
    this.build_compact_histogram(hist, lo, hi, X_binned, rows, 0, n, gradient, unit, 1)
    node = np.zeros(6)
    node[:4] = n, n, gradient.sum(), (gradient * gradient).sum()
    split, cum, left, right = np.zeros(17), np.zeros(6), np.zeros(6), np.zeros(6)

    def partition_unit_case(module):
        for f in range(n_features):
            samples[:] = rows
            partition_unit(module.partition_unit_squared_error, f, split_bins[f], samples,
                           X_binned, n_bins - 1, buffer, gradient, stats, 0)

    def partition_stats(module, target, criterion):
        for f in range(n_features):
            samples[:] = rows
            stats[:] = 0.0
            module.partition_histogram_stable(f, split_bins[f], False, samples, 0, n, X_binned,
                                              n_bins - 1, buffer, target, weights, criterion,
                                              stats[0], stats[1])

    weighted_hist = np.zeros((n_features, n_bins, 3))
    generic_hist = np.zeros((n_features, n_bins, 4))  # squared error, or Gini of 2 classes

    def histogram_compact(module, slot, w):
        slot[:] = 0.0
        module.build_compact_histogram(slot, lo, hi, X_binned, rows, 0, n, gradient, w, 1)

    def histogram_generic(module, criterion, target):
        generic_hist[:] = 0.0
        module.build_histogram(generic_hist, lo, hi, X_binned, rows, 0, n, target, weights,
                               criterion, 1)

    # The histogram of the root's left child by feature 0 (every row of some of feature 0's
    # bins gone from the right child, part of every other feature's), subtracted from the
    # root's as the grower derives a larger child; unit weights (two columns) and weights.
    child_rows = rows[X_binned[:, 0] <= split_bins[0]]
    weighted_root = np.zeros((n_features, n_bins, 3))
    this.build_compact_histogram(weighted_root, lo.copy(), hi.copy(), X_binned, rows, 0, n,
                                 gradient, weights, 1)
    child_hists = {}
    for width, w in ((2, unit), (3, weights)):
        child = np.zeros((n_features, n_bins, width))
        this.build_compact_histogram(child, np.zeros_like(lo), np.zeros_like(hi), X_binned,
                                     child_rows, 0, child_rows.shape[0], gradient, w, 1)
        child_hists[width] = child
    difference = {2: np.empty_like(hist), 3: np.empty_like(weighted_root)}
    out_lo, out_hi = np.empty_like(lo), np.empty_like(hi)

    def subtraction(module, width):
        parent = hist if width == 2 else weighted_root
        count_column = 0 if width == 2 else 2  # compact_count_column
        for _ in range(100):
            module.subtract_histogram(parent, lo, hi, child_hists[width], difference[width],
                                      out_lo, out_hi, count_column)

    scan_loops = {}

    # Each feature's first 4 occupied bins: the per-call cost of a scan (deep nodes).
    short_hi = np.minimum(hi, lo + 3)

    def scan(module, last=hi):
        # The features' loop runs inside numba: a Python call per feature would time the
        # dispatch (~3 us), not the scan.
        if module not in scan_loops:
            scan_loops[module] = compact_scan_loop(module)
        scan_loops[module](hist, lo, last, data.bin_thresholds, node, split, cum, left, right)

    cases = {f"partition, unit weights ({n_features} × {n:,} rows)": partition_unit_case,
             f"partition, weighted ({n_features} × {n:,} rows)":
                 lambda module: partition_stats(module, gradient, CRITERION_SQUARED_ERROR),
             f"partition, Gini, 2 classes ({n_features} × {n:,} rows)":
                 lambda module: partition_stats(module, classes, CRITERION_GINI),
             f"compact histogram, unit weights ({n:,} rows)":
                 lambda module: histogram_compact(module, hist, unit),
             f"compact histogram, weighted ({n:,} rows)":
                 lambda module: histogram_compact(module, weighted_hist, weights),
             f"histogram, squared error, 4 stats ({n:,} rows)":
                 lambda module: histogram_generic(module, CRITERION_SQUARED_ERROR, gradient),
             f"histogram, Gini, 2 classes ({n:,} rows)":
                 lambda module: histogram_generic(module, CRITERION_GINI, classes),
             f"histogram subtraction, unit weights (100 ×, {n_bins} bins)":
                 lambda module: subtraction(module, 2),
             f"histogram subtraction, weighted (100 ×, {n_bins} bins)":
                 lambda module: subtraction(module, 3),
             f"split scan, every feature (20 ×, {n_bins} bins)": scan,
             "split scan, every feature (20 ×, 4 bins)":
                 lambda module: scan(module, short_hi)}
    modules = {"before": before, "this": this}
    times = shuffled_cpu_times({(name, label): functools.partial(case, module)
                                for name, case in cases.items()
                                for label, module in modules.items()}, repeats)
    print(f"{dataset}: kernels of this tree and {before_src} on the root node, one process, "
          f"{repeats} shuffled repetitions, CPU ms; 1-min load average "
          f"{os.getloadavg()[0]:.1f}")
    print("| kernel | before (median) | this (median) | this / before (medians) | "
          "this / before (median of paired ratios) |")
    print("|---|---:|---:|---:|---:|")
    for name in cases:
        b, t = np.asarray(times[(name, "before")]), np.asarray(times[(name, "this")])
        print(f"| {name} | {1000 * np.median(b):.3f} | {1000 * np.median(t):.3f} | "
              f"{np.median(t) / np.median(b):.3f} | {np.median(t / b):.3f} |")


def compare_node_density(dataset: str, before_src: Path, repeats: int) -> None:
    """CPU time per row of the compact histogram (unit weights, every feature) and of the
    unit-weight partition (one feature) of this source tree and ``before_src`` on nodes
    holding a fraction of ``dataset``'s rows (a sorted random subset), alternated in one
    process in a new shuffled order each repetition."""
    this, before, data = _histogram_kernels_of_both(dataset, before_src)
    X_binned, n_bins = data.X_binned, data.n_hist_bins
    n, n_features = X_binned.shape
    # The grower partitions from the column-major copy when the data have one.
    X_split = data.X_columns if data.X_columns.shape[0] == n else X_binned
    rng = np.random.RandomState(0)
    gradient = rng.normal(size=n)
    unit = np.ones(n)
    feature = 0
    split_bin = int(np.median(X_binned[:, feature]))
    hist = np.zeros((n_features, n_bins, 2))
    lo, hi = np.zeros(n_features, dtype=np.int64), np.zeros(n_features, dtype=np.int64)
    stats = np.zeros((2, 4))
    fractions = (1.0, 0.5, 0.25, 0.1, 0.03, 0.01)
    nodes = {fraction: np.sort(rng.choice(n, max(1, int(fraction * n)),
                                          replace=False)).astype(ROW_IDS)
             for fraction in fractions}
    buffer = np.empty(n, dtype=ROW_IDS)

    def histogram(module, rows):
        hist[:] = 0.0
        module.build_compact_histogram(hist, lo, hi, X_binned, rows, 0, rows.shape[0],
                                       gradient, unit, 1)

    def partition(module, rows):
        samples = rows.copy()  # outside the timing would need a second list per node
        stats[:] = 0.0
        partition_unit(module.partition_unit_squared_error, feature, split_bin, samples,
                       X_split, n_bins - 1, buffer, gradient, stats, 0)

    modules = {"before": before, "this": this}
    cases = {"histogram": histogram, "partition": partition}
    times = shuffled_cpu_times({(case, fraction, label): functools.partial(run, module,
                                                                           nodes[fraction])
                                for case, run in cases.items() for fraction in fractions
                                for label, module in modules.items()}, repeats)
    print(f"{dataset}: kernels of this tree and {before_src} on nodes of a fraction of its "
          f"{n:,} rows (sorted random subsets), one process, {repeats} shuffled repetitions, "
          f"CPU ns per row and feature (histogram, {n_features} features) or per row "
          f"(partition, with the node's copy); 1-min load average {os.getloadavg()[0]:.1f}")
    print("| kernel | node rows | before (median) | this (median) | this / before (medians) | "
          "this / before (median of paired ratios) |")
    print("|---|---:|---:|---:|---:|---:|")
    for case in cases:
        for fraction in fractions:
            rows = nodes[fraction].shape[0]
            per = 1e9 / (rows * (n_features if case == "histogram" else 1))
            b = np.asarray(times[(case, fraction, "before")])
            t = np.asarray(times[(case, fraction, "this")])
            print(f"| {case} | {rows:,} ({fraction:g}) | {per * np.median(b):.2f} | "
                  f"{per * np.median(t):.2f} | {np.median(t) / np.median(b):.3f} | "
                  f"{np.median(t / b):.3f} |")


def time_first_fit(before_src: Path | None) -> None:
    """CPU seconds of the first histogram boosting fits (binary, 3,000 rows; one thread, then
    two with the node hand-off at its default threshold — 3,000 rows only reach it when the
    threshold is lowered, so the second fit mostly measures loading) in a fresh process whose
    ``NUMBA_CACHE_DIR`` is a new empty directory: what compiling the histogram grower costs a
    new user."""
    import json
    import subprocess
    import sys
    import tempfile

    sources = {"this tree": Path(__file__).resolve().parents[1] / "src"}
    if before_src is not None:
        sources["before"] = before_src
    rows = {}
    for label, src in sources.items():
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "PYTHONPATH": str(src), "NUMBA_CACHE_DIR": cache}
            out = subprocess.run([sys.executable, "-c", FIRST_FIT], env=env, check=True,
                                 capture_output=True, text=True).stdout
        rows[label] = json.loads(out.strip().splitlines()[-1])
    print(f"first histogram boosting fits, CPU s, empty numba cache; 1-min load average "
          f"{os.getloadavg()[0]:.1f}")
    print("| step | " + " | ".join(rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for step in next(iter(rows.values())):
        print(f"| {step} | " + " | ".join(f"{rows[label][step]:.2f}" for label in rows) + " |")


def _subtree_leaves(left, right, node) -> np.ndarray:
    """Leaf ids under ``node``."""
    from cipherforest.tree._common import TREE_LEAF

    stack, out = [node], []
    while stack:
        current = stack.pop()
        if left[current] == TREE_LEAF:
            out.append(current)
        else:
            stack += [left[current], right[current]]
    return np.array(out)


if __name__ == "__main__":
    raise SystemExit(main())
