"""Atomic int64 array words, a spin-wait hint and the cycle counter, for numba kernels.

Two nogil kernels running on different threads hand work to each other through one word of
a shared int64 array (``_node_threads``). Numba has no CPU atomics, so these intrinsics emit
LLVM's: an acquire load, a release store and a compare-and-exchange, which also keep the
compiler from moving the kernels' ordinary array reads and writes across them.

``spin_pause`` (x86's ``pause``), ``cycle_counter`` (``rdtsc``) and ``yield_processor``
(POSIX ``sched_yield``) are used on x86-64 POSIX systems only; elsewhere
``SPIN_WAIT_SUPPORTED`` is false, the three compile to nothing (LLVM's cycle counter traps in
user mode on some other CPUs), and the package does not spin.
"""

from __future__ import annotations

import os
import platform

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: Whether this machine has the pause hint, a user-mode cycle counter and ``sched_yield``.
SPIN_WAIT_SUPPORTED = os.name == "posix" and platform.machine().lower() in ("x86_64", "amd64")

_I64 = ir.IntType(64)


def _word_pointer(context, builder, array_type, array, index):
    array_struct = context.make_array(array_type)(context, builder, array)
    return cgutils.get_item_pointer(context, builder, array_type, array_struct, [index])


@intrinsic
def atomic_load(typingctx, array, index):
    """``array[index]`` read with acquire ordering (int64 array)."""
    if not (isinstance(array, types.Array) and array.dtype == types.int64):
        return None
    sig = types.int64(array, types.intp)

    def codegen(context, builder, signature, args):
        pointer = _word_pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.load_atomic(pointer, "acquire", 8)

    return sig, codegen


@intrinsic
def atomic_store(typingctx, array, index, value):
    """``array[index] = value`` with release ordering (int64 array)."""
    if not (isinstance(array, types.Array) and array.dtype == types.int64):
        return None
    sig = types.void(array, types.intp, types.int64)

    def codegen(context, builder, signature, args):
        pointer = _word_pointer(context, builder, signature.args[0], args[0], args[1])
        builder.store_atomic(args[2], pointer, "release", 8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def compare_exchange(typingctx, array, index, expected, new):
    """Set ``array[index]`` to ``new`` if it holds ``expected``, atomically; returns whether
    it did (acquire-release on success)."""
    if not (isinstance(array, types.Array) and array.dtype == types.int64):
        return None
    sig = types.boolean(array, types.intp, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        pointer = _word_pointer(context, builder, signature.args[0], args[0], args[1])
        result = builder.cmpxchg(pointer, args[2], args[3], "acq_rel", "acquire")
        return builder.extract_value(result, 1)

    return sig, codegen


@intrinsic
def spin_pause(typingctx):
    """Tell the CPU the thread is spin-waiting (x86 ``pause``; nothing elsewhere)."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        if SPIN_WAIT_SUPPORTED:
            pause = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause")
            builder.call(pause, [])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def cycle_counter(typingctx):
    """The CPU's time-stamp counter (x86 ``rdtsc``: constant rate, not core cycles); 0 where
    ``SPIN_WAIT_SUPPORTED`` is false."""
    sig = types.int64()

    def codegen(context, builder, signature, args):
        if not SPIN_WAIT_SUPPORTED:
            return ir.Constant(_I64, 0)
        counter = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_I64, []), "llvm.readcyclecounter")
        return builder.call(counter, [])

    return sig, codegen


@intrinsic
def yield_processor(typingctx):
    """Let the operating system run another thread on this core (``sched_yield``; nothing
    where ``SPIN_WAIT_SUPPORTED`` is false)."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        if not SPIN_WAIT_SUPPORTED:
            return context.get_dummy_value()
        sched_yield = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        builder.call(sched_yield, [])
        return context.get_dummy_value()

    return sig, codegen
