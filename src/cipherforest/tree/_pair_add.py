"""Adding to two neighbouring float64 items of an array in one vector instruction, for numba
kernels.

A histogram bin keeps its statistics side by side (weight, then sum of w y; count and sums
in the generic layout). Adding a row to a bin loaded, added and stored them one at a time:
LLVM does not pair the two scalar updates by itself (the x86 code had only ``vaddsd``), and
the histogram builds are the hottest loop of a tree. ``add_pair`` does the two additions in
one 2-lane add (one load and one store of 16 bytes instead of two each). Each lane is the
same IEEE addition as the scalar one, so every sum is the same bit for bit. The pendigits
root's compact histogram (unit weights) took 0.79x as long, its four-statistic one 0.69x,
boosting fits 0.90-0.95x (``dev/histogram_kernels.py --ab-kernels`` and ``--ab``). Where
a bin's row takes a third addition (a weight column, a class count), a pair and a single
add were no faster than three single ones, and those builds keep the latter.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

_TWO_DOUBLES = ir.VectorType(ir.DoubleType(), 2)
_I32 = ir.IntType(32)


def add_pair(array, i, j, k, first, second):
    """``array[i, j, k] += first`` and ``array[i, j, k + 1] += second`` (3-D float64 array;
    in numba kernels one vector add when the array is C-contiguous). No bounds check."""
    array[i, j, k] += first
    array[i, j, k + 1] += second


def _has_adjacent_pairs(array) -> bool:
    """Whether numba type ``array`` is a C-contiguous 3-D float64 array, whose items ``k``
    and ``k + 1`` of the last axis are adjacent in memory."""
    return (isinstance(array, types.Array) and array.ndim == 3
            and array.dtype == types.float64 and array.layout == "C")


@intrinsic
def _add_two_lanes(typingctx, array, i, j, k, first, second):
    """``add_pair`` on an array with adjacent pairs (``_has_adjacent_pairs``): items ``k``
    and ``k + 1`` loaded, added to and stored as one 2-lane vector."""
    if not _has_adjacent_pairs(array):
        return None
    sig = types.void(array, types.intp, types.intp, types.intp, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        array_struct = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, array_type, array_struct,
                                           list(args[1:4]))
        lanes = builder.bitcast(pointer, _TWO_DOUBLES.as_pointer())
        addend = builder.insert_element(ir.Constant(_TWO_DOUBLES, ir.Undefined), args[4],
                                        _I32(0))
        addend = builder.insert_element(addend, args[5], _I32(1))
        total = builder.fadd(builder.load(lanes, align=8), addend)
        builder.store(total, lanes, align=8)
        return context.get_dummy_value()

    return sig, codegen


@overload(add_pair, inline="always")
def _add_pair_kernel(array, i, j, k, first, second):
    if _has_adjacent_pairs(array):
        def vector_add(array, i, j, k, first, second):
            _add_two_lanes(array, i, j, k, first, second)
        return vector_add

    def scalar_add(array, i, j, k, first, second):
        array[i, j, k] += first
        array[i, j, k + 1] += second
    return scalar_add
