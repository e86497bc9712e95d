"""A small counter-free random generator usable inside numba kernels.

``np.random`` inside numba keeps one hidden state per thread, which makes results depend on
the thread that runs a kernel. Kernels here instead take an explicit ``state`` array of one
``uint64`` (splitmix64), so the same seed gives the same tree on any thread.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._common import JIT_OPTIONS, LEAF_JIT_OPTIONS


def make_state(seed: int) -> np.ndarray:
    """Return a generator state seeded from a non-negative integer."""
    return np.array([np.uint64(seed & 0xFFFFFFFFFFFFFFFF)], dtype=np.uint64)


@njit(**LEAF_JIT_OPTIONS)
def next_uint64(state):
    """Advance the splitmix64 state and return the next 64-bit output."""
    state[0] += np.uint64(0x9E3779B97F4A7C15)
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(**LEAF_JIT_OPTIONS)
def rand_int(state, low, high):
    """Uniform integer in ``[low, high)``; ``high > low``."""
    span = np.uint64(high - low)
    return low + np.int64(next_uint64(state) % span)


@njit(**LEAF_JIT_OPTIONS)
def rand_uniform(state, low, high):
    """Uniform float in ``[low, high)``."""
    u = np.float64(next_uint64(state) >> np.uint64(11)) * (1.0 / 9007199254740992.0)
    return low + (high - low) * u


@njit(**JIT_OPTIONS)
def child_seed(seed, side):
    """Seed of a node's child (``side`` 0 left, 1 right) from the node's own seed.

    Every node draws its features (and random thresholds) from a generator seeded by its
    position in the tree, not by the order nodes are visited in, so depth-first,
    best-first and level-by-level growth (the encrypted protocol's) build the same tree.
    """
    state = np.empty(1, dtype=np.uint64)
    state[0] = np.uint64(seed) ^ (np.uint64(side + 1) * np.uint64(0xD1B54A32D192ED03))
    return next_uint64(state)
