"""Unit sample weights without an array of ones.

A fit without ``sample_weight`` weighs every row 1. Holding those weights as an array of
ones costs 8 bytes a row for the whole fit (8 MB of a 1M-row boosting fit's peak memory),
so boosting holds them as ``unit_weight_view(n)``: a read-only zero-stride view of one 1.0,
on which NumPy's arithmetic, comparisons, sums and indexing work unchanged. Compiled kernels
take ``kernel_weights(w)`` instead: the weights as a contiguous float64 array, or an empty
array standing for unit weights, which the kernels read through ``weight_at``. Multiplying
by 1.0 is exact, so every sum is the same bit for bit as with an array of ones.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._common import JIT_OPTIONS

#: What kernels receive for unit weights (``weight_at`` reads it as 1 for every row).
UNIT_KERNEL_WEIGHTS = np.zeros(0)


def unit_weight_view(n_samples: int) -> np.ndarray:
    """``n_samples`` weights of 1 held in 8 bytes: a read-only view with stride 0."""
    return np.broadcast_to(np.float64(1.0), (n_samples,))


def is_unit_weight_view(w: np.ndarray) -> bool:
    """Whether ``w`` is a non-empty zero-stride view of 1.0 (as ``unit_weight_view`` makes)."""
    return (isinstance(w, np.ndarray) and w.ndim == 1 and w.shape[0] > 0
            and w.strides[0] == 0 and w.dtype == np.float64 and w[0] == 1.0)


def kernel_weights(w: np.ndarray) -> np.ndarray:
    """``w`` as kernels take it: ``UNIT_KERNEL_WEIGHTS`` for a unit-weight view, else a
    contiguous float64 array (``w`` itself when it is one)."""
    if is_unit_weight_view(w):
        return UNIT_KERNEL_WEIGHTS
    return np.ascontiguousarray(w, dtype=np.float64)


@njit(inline="always", **JIT_OPTIONS)
def weight_at(w, i):
    """Row ``i``'s weight: ``w[i]``, or 1 when ``w`` is empty (``UNIT_KERNEL_WEIGHTS``)."""
    return w[i] if w.shape[0] > 0 else 1.0
