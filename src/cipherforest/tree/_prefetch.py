"""A memory prefetch hint for numba kernels.

A node's rows are a sorted subset of the training rows: below the root, consecutive rows of
a node lie far apart in the binned matrix and the gradients, and each row's reads miss the
caches once the data outgrow them (1M rows × 20 features: 20 MB of bins, 8 MB of
gradients). The hardware prefetcher cannot guess such addresses, and a histogram build
keeps too few of the misses in flight to hide them; asking for the rows some way ahead
does: a histogram of a tenth of 1M rows (a sorted random subset) took 3.1 ns per row and
feature without the hints and 0.8 with them, and a 1M-row fit 0.64-0.69x as long
(``dev/histogram_kernels.py --node-density`` and ``--ab``). Numba has no prefetch, so
``prefetch`` emits LLVM's (``prefetcht0`` on x86; whatever the target has, or nothing,
elsewhere). A prefetch never faults and changes no value: the kernels compute the same
sums bit for bit.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ._common import JIT_OPTIONS

#: Rows ahead of the one being added that the kernels prefetch: far enough for a miss to
#: arrive in time (24-48 measured alike on a 1M-row set), near enough to stay cached.
PREFETCH_ROWS = 32

#: Training sets smaller than this (binned rows plus float64 targets, in bytes) stay in the
#: caches: the kernels do not prefetch there (the hints cost a pendigits fit 4-8 %).
PREFETCH_MIN_BYTES = 4 << 20

#: Average distance in bytes between a node's consecutive rows, in what a kernel gathers,
#: from which the kernels prefetch: half a cache line. Nearer rows share lines the previous
#: rows brought in; there the hints cost more than they saved (a partition of a tenth of 1M
#: rows, reading the column-major copy's byte per row, took 1.14x as long with them; the
#: histogram of a root, 20 bytes of bins and 8 of target per row, 1.03x).
PREFETCH_MIN_GAP = 32

_I32 = ir.IntType(32)
_BYTE_POINTER = ir.IntType(8).as_pointer()


@intrinsic
def prefetch(typingctx, array, index):
    """Hint that ``array[index]`` will be read soon (an int for a 1-D array, a tuple of ints
    for an n-D one); no bounds check, no effect on values."""
    if not isinstance(array, types.Array):
        return None
    if isinstance(index, types.Integer):
        n_indices = 1
    elif (isinstance(index, types.BaseTuple)
          and all(isinstance(item, types.Integer) for item in index)):
        n_indices = len(index)
    else:
        return None
    if n_indices != array.ndim:
        return None
    sig = types.void(array, index)

    def codegen(context, builder, signature, args):
        array_type, index_type = signature.args
        array_struct = context.make_array(array_type)(context, builder, args[0])
        if n_indices == 1:
            indices = [context.cast(builder, args[1], index_type, types.intp)]
        else:
            indices = [context.cast(builder, builder.extract_value(args[1], k), index_type[k],
                                    types.intp) for k in range(n_indices)]
        pointer = cgutils.get_item_pointer2(
            context, builder, array_struct.data, cgutils.unpack_tuple(builder, array_struct.shape),
            cgutils.unpack_tuple(builder, array_struct.strides), array_type.layout, indices,
            wraparound=False, boundscheck=False)
        hint = builder.module.declare_intrinsic(
            "llvm.prefetch", [_BYTE_POINTER],
            ir.FunctionType(ir.VoidType(), [_BYTE_POINTER, _I32, _I32, _I32]))
        # Read access, high temporal locality (keep in every cache level), data cache.
        builder.call(hint, [builder.bitcast(pointer, _BYTE_POINTER), _I32(0), _I32(3), _I32(1)])
        return context.get_dummy_value()

    return sig, codegen


@njit(inline="always", **JIT_OPTIONS)
def worth_prefetching(X_binned, samples, start, end, row_bytes):
    """Whether a kernel reading the rows ``samples[start:end]`` (increasing, as a node holds
    them) of a training set whose binned rows are ``X_binned`` prefetches them, reading
    ``row_bytes`` per row of what it gathers (a binned row and a target; a column's byte; a
    target): not when the data fit in the caches, nor when the node's rows lie on average
    less than ``PREFETCH_MIN_GAP`` bytes apart there, which the hardware prefetcher
    streams unaided (``dev/histogram_kernels.py --node-density``)."""
    if end - start < 2 or X_binned.shape[0] * (X_binned.shape[1] + 8) < PREFETCH_MIN_BYTES:
        return False
    distance = np.int64(samples[end - 1]) - np.int64(samples[start])
    return distance * row_bytes >= PREFETCH_MIN_GAP * (end - start - 1)
