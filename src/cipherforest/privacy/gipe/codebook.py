"""Label-independent feature ciphers: the states of GIPE's ``"order"`` and ``"quantile"`` modes.

The paper's state (:mod:`.kernels`) merges runs of same-label neighbours into one cipher, so
which rows share a cipher, and where the cipher changes, depend on the labels
(docs/threat_model.md). The states built here are a function of the feature column alone:

* ``"order"``: every distinct training value is its own node;
* ``"quantile"``: the distinct values are cut into at most ``n_bins`` quantile bins, with
  edges at midpoints between distinct values (``cipherforest.core.bin_thresholds_for_column``, the
  binning ``max_bins`` uses), and every bin is one node holding its distinct values.

Node ciphers are an ideal random order-preserving map of the nodes: ``m`` distinct grid points
(multiples of GRID in ``(0, c_max)``) drawn uniformly without replacement and sorted, so the
``k``-th node gets the ``k``-th smallest. Nothing but ``m`` and c_max shapes their distribution.

The state is stored in the array contract of :mod:`.kernels` (a balanced search tree over the
nodes, each node labelled with its in-order rank, each distinct value stored once), so
decryption, the state file and the invariant checks are shared with the paper's mode.

Encryption of a value ``x`` (``encrypt_column``), with A < x < B the in-order nodes around a
gap and ``t = vmax_A/2 + vmin_B/2`` the plaintext splitter's midpoint:

* inside a node's value range: the node's cipher (training values, always);
* ``"quantile"`` (``snap=True``): the cipher of its bin, i.e. of A if ``x <= t`` else of B,
  and of the first / last bin below / above the training range;
* ``"order"`` (``snap=False``): a fresh odd cipher drawn uniformly from the OS among the odd
  integers of ``(c_A, (c_A + c_B)/2)`` if ``x <= t``, else of ``((c_A + c_B)/2, c_B)``;
  below / above the training range, among those of ``(0, c_first)`` / ``(c_last, c_max)``.
  The draw carries no information about ``x`` beyond its side of every adjacent midpoint.
"""

from __future__ import annotations

import os

import numpy as np
from numba import njit

from ...core import JIT_OPTIONS, bin_thresholds_for_column
from .column_state import ColumnState, WordSource
from .kernels import GRID, NO_NODE


# ------------------------------------------------------------------------------ randomness
def uniform_below(bound: np.ndarray, take) -> np.ndarray:
    """Uniform integers in ``[0, bound[i])`` for every ``i``, by rejection (no modulo bias).

    ``bound`` are int64 >= 1; ``take(n)`` returns ``n`` random uint64 words.
    """
    bound = np.asarray(bound, dtype=np.uint64)
    out = np.empty(bound.shape[0], dtype=np.uint64)
    # A word w is accepted when w < limit = 2**64 - (2**64 mod bound), the largest multiple
    # of bound that fits: then w mod bound is uniform. (2**64 mod b) == (2**64 - b) mod b.
    excess = (np.uint64(0) - bound) % bound
    todo = np.arange(bound.shape[0])
    while todo.shape[0]:
        words = take(todo.shape[0])
        b = bound[todo]
        ok = words <= np.uint64(2**64 - 1) - excess[todo]  # w < limit, limit possibly 2**64
        out[todo[ok]] = words[ok] % b[ok]
        todo = todo[~ok]
    return out.astype(np.int64)


def random_increasing_ciphers(m: int, c_max: int, source: WordSource) -> np.ndarray:
    """``m`` distinct multiples of GRID in ``(0, c_max)``, uniform without replacement, sorted."""
    n_points = c_max // GRID - 1  # grid points 1 .. c_max/GRID - 1
    if m > n_points:
        raise ValueError(f"the cipher space c_max={c_max} cannot hold {m} distinct ciphers")
    # Sampling without replacement: the first m distinct values of a uniform stream. Each
    # batch draws only the number still missing, so it never overshoots m.
    chosen = np.empty(0, dtype=np.int64)
    while chosen.shape[0] < m:
        more = uniform_below(np.full(m - chosen.shape[0], n_points), source.take) + 1
        chosen = sorted_distinct(np.concatenate([chosen, more]))
    return chosen * GRID


def sorted_distinct(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` by a sort (numpy's hash-based unique is several times slower here)."""
    a = np.sort(a)
    keep = np.empty(a.shape[0], dtype=bool)
    keep[:1] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def os_words(n: int) -> np.ndarray:
    """``n`` uint64 words from the operating system's CSPRNG."""
    return np.frombuffer(bytearray(os.urandom(8 * n)), dtype=np.uint64)


# ------------------------------------------------------------------------------ building
@njit(**JIT_OPTIONS)
def balanced_tree(m):
    """A balanced search tree over in-order ranks ``0..m-1``, nodes numbered in preorder.

    Returns ``(rank, left, right)`` by node id: node 0 is the root (the kernels' contract).
    """
    rank = np.empty(m, dtype=np.int64)
    left = np.full(m, NO_NODE, dtype=np.int64)
    right = np.full(m, NO_NODE, dtype=np.int64)
    # pending subtrees: rank range [lo, hi), parent id, side (0 left, 1 right)
    size = 2 * 64 + 4
    s_lo = np.empty(size, dtype=np.int64)
    s_hi = np.empty(size, dtype=np.int64)
    s_parent = np.empty(size, dtype=np.int64)
    s_side = np.empty(size, dtype=np.int64)
    top = 0
    if m > 0:
        s_lo[0], s_hi[0], s_parent[0], s_side[0] = 0, m, NO_NODE, 0
        top = 1
    next_id = 0
    while top > 0:
        top -= 1
        lo, hi, parent, side = s_lo[top], s_hi[top], s_parent[top], s_side[top]
        mid = (lo + hi) // 2
        t = next_id
        next_id += 1
        rank[t] = mid
        if parent != NO_NODE:
            if side == 0:
                left[parent] = t
            else:
                right[parent] = t
        if mid + 1 < hi:
            s_lo[top], s_hi[top], s_parent[top], s_side[top] = mid + 1, hi, t, 1
            top += 1
        if lo < mid:
            s_lo[top], s_hi[top], s_parent[top], s_side[top] = lo, mid, t, 0
            top += 1
    return rank, left, right


def build_state(column: np.ndarray, n_bins: int | None, c_max: int,
                source: WordSource) -> ColumnState:
    """The state of one feature from its training values alone.

    ``n_bins=None``: one node per distinct value (``"order"``); otherwise at most ``n_bins``
    quantile bins (``"quantile"``). ``column`` is finite float64.
    """
    distinct = sorted_distinct(column)
    if n_bins is None or distinct.shape[0] <= n_bins:
        bin_of = np.arange(distinct.shape[0])
    else:
        edges = bin_thresholds_for_column(column, n_bins)
        bin_of = np.searchsorted(edges, distinct, side="left")  # x in b iff e[b-1] < x <= e[b]
    counts = np.bincount(bin_of)
    m = counts.shape[0]
    starts = np.concatenate([[0], np.cumsum(counts)])
    ciphers = random_increasing_ciphers(m, c_max, source)
    rank, left, right = balanced_tree(m)
    # Samples grouped by node id: node t holds the distinct values of bin rank[t].
    sizes = counts[rank]
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    take = np.repeat(starts[rank] - ptr[:-1], sizes) + np.arange(ptr[-1])
    arrays = {
        "left": left, "right": right, "label": rank.copy(), "cipher": ciphers[rank],
        "vmin": distinct[starts[:-1][rank]], "vmax": distinct[starts[1:][rank] - 1],
        "node_ptr": ptr, "sample_value": distinct[take],
        "sample_label": bin_of[take].astype(np.int64),
    }
    return ColumnState.from_arrays(c_max, 0, arrays)


# ------------------------------------------------------------------------------ encryption
def encrypt_column(state: ColumnState, x: np.ndarray, snap: bool,
                   take=os_words) -> tuple[np.ndarray, np.ndarray]:
    """cipher1 of the finite float64 values ``x`` and their node ranks (-1: not in a node).

    See the module docstring; ``take(n)`` supplies the random words of ``"order"``'s draws.
    """
    if state.n_nodes == 0:
        raise ValueError("the state holds no samples")
    vmin, vmax, cipher = state.in_vmin, state.in_vmax, state.in_cipher
    m = cipher.shape[0]
    x = np.ascontiguousarray(x, dtype=np.float64)
    k = np.empty(x.shape[0], dtype=np.int64)
    by_value = np.argsort(x, kind="stable")  # sorted needles: cache-friendly searches
    k[by_value] = np.searchsorted(vmin, x[by_value], side="right") - 1  # last node <= x
    inside = (k >= 0) & (x <= vmax[np.maximum(k, 0)])
    rank = np.where(inside, k, -1)
    out = np.empty(x.shape[0], dtype=np.int64)
    out[inside] = cipher[k[inside]]
    below = k < 0
    above = ~inside & (k == m - 1)
    gap = ~inside & ~below & ~above
    g = k[gap]
    va, vb = vmax[g], vmin[np.minimum(g + 1, m - 1)]
    t = va / 2.0 + vb / 2.0  # exactly the plaintext splitter's midpoint
    t = np.where((t >= vb) | ~np.isfinite(t), va, t)
    low_side = x[gap] <= t
    if snap:
        out[below] = cipher[0]
        out[above] = cipher[-1]
        out[gap] = np.where(low_side, cipher[g], cipher[np.minimum(g + 1, m - 1)])
        return out, rank
    ca, cb = cipher[g], cipher[np.minimum(g + 1, m - 1)]
    half = (ca + cb) // 2  # even: both are multiples of GRID
    # first odd integer and number of odd integers in the open interval to draw from
    first = np.empty(x.shape[0], dtype=np.int64)
    count = np.empty(x.shape[0], dtype=np.int64)
    first[below], count[below] = 1, cipher[0] // 2
    first[above], count[above] = cipher[-1] + 1, (state.c_max - cipher[-1]) // 2
    first[gap] = np.where(low_side, ca + 1, half + 1)
    count[gap] = np.where(low_side, (half - ca) // 2, (cb - half) // 2)
    drawn = ~inside
    out[drawn] = first[drawn] + 2 * uniform_below(count[drawn], take)
    return out, rank
