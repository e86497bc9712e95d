"""Shared constants, dtypes and numba compilation flags of the tree core.

Every numba kernel of the package is compiled with the flags below, so that debugging
(bounds checks, no fast-math) is one switch.
"""

from __future__ import annotations

import numpy as np

from .. import _compile_notice  # noqa: F401  (one stderr line while kernels compile)
from .._kernel_cache import ensure_consistent_kernel_cache, launch_parallel_runtime

# Every kernel module imports this one first: drop cached kernels of changed sources before
# any is loaded (a partly recompiled cache crashes), and load numba's threading layer before
# cached parallel code is linked (see ``_kernel_cache``).
ensure_consistent_kernel_cache()
launch_parallel_runtime()

#: Compile kernels so that forests can run them in threads without holding the GIL.
NOGIL = True
#: Cache compiled kernels on disk; first-call compile time is what users feel.
CACHE = True
#: Bounds checking costs ~20 % in the hot loops; switch on when debugging.
BOUNDSCHECK = False
#: Fast-math would let LLVM reorder float sums and make splits non-reproducible.
FASTMATH = False

JIT_OPTIONS = {"nogil": NOGIL, "cache": CACHE, "boundscheck": BOUNDSCHECK, "fastmath": FASTMATH}
#: Kernels that neither allocate arrays nor return them are compiled without numba's
#: reference counting of arrays (its runtime, "NRT"): a call of such a kernel would
#: otherwise increment and decrement, atomically, a counter of every array it holds. A
#: split scan of one feature with 4 occupied bins took 144 ns a call with the counting and
#: 41 ns without (dev/histogram_kernels.py --ab-kernels pendigits; a 31-leaf tree
#: scans ~1,000 features). The arrays are the caller's, alive for the call. Nor may they
#: call a kernel that allocates: numba may compile that callee for them, without the
#: counting, and fail (tests/package/test_kernel_cache.py, the general grower's first fit).
LEAF_JIT_OPTIONS = {**JIT_OPTIONS, "_nrt": False}

#: Child index of a leaf, as in scikit-learn.
TREE_LEAF = -1
#: Feature and threshold of a leaf, as in scikit-learn.
TREE_UNDEFINED = -2

#: Feature values closer than this are ties (no threshold between them), and a feature whose
#: range in a node is within it is constant there: scikit-learn's ``FEATURE_THRESHOLD``.
FEATURE_THRESHOLD = 1e-7

#: Impurities at or below this are treated as zero (pure node).
EPSILON = np.finfo(np.float64).eps

# Criterion codes understood by the kernels.
CRITERION_GINI = 0
CRITERION_ENTROPY = 1
CRITERION_SQUARED_ERROR = 2
CRITERION_POISSON = 3
CRITERION_ABSOLUTE_ERROR = 4

CRITERIA_CLF = {"gini": CRITERION_GINI, "entropy": CRITERION_ENTROPY, "log_loss": CRITERION_ENTROPY}
CRITERIA_REG = {"squared_error": CRITERION_SQUARED_ERROR, "poisson": CRITERION_POISSON,
                "absolute_error": CRITERION_ABSOLUTE_ERROR}

# Splitter codes.
SPLITTER_BEST = 0
SPLITTER_RANDOM = 1
SPLITTERS = {"best": SPLITTER_BEST, "random": SPLITTER_RANDOM}

# Layout of a node's statistics vector ``stats`` (float64):
#   stats[STAT_WEIGHT]  weighted number of samples
#   stats[STAT_COUNT]   number of samples (unweighted)
#   stats[STAT_FIRST:]  criterion statistics: for classification the weighted count of each
#                       class; for regression sum(w*y), sum(w*y*y) and, for poisson,
#                       sum(w*y*log(y)) and the number of samples with y > 0.
STAT_WEIGHT = 0
STAT_COUNT = 1
STAT_FIRST = 2

#: Binned feature dtype of the histogram splitter; bin ``n_bins`` is reserved for NaN.
X_BINNED_DTYPE = np.uint8
MAX_BINS = 255


def n_criterion_stats(criterion: int, n_classes: int) -> int:
    """Number of criterion statistics a node keeps (length of ``stats[STAT_FIRST:]``)."""
    if criterion in (CRITERION_GINI, CRITERION_ENTROPY):
        return n_classes
    if criterion == CRITERION_POISSON:
        return 4
    if criterion == CRITERION_ABSOLUTE_ERROR:
        return 0  # not additive: see _absolute_error
    return 2
