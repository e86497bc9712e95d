"""The secret state of one feature under GIPE: a multi-sample binary search tree (numba kernels).

The kernels are pure functions over arrays (no Python objects, compiled with ``cache=True``);
:class:`~cipherforest.privacy.gipe.column_state.ColumnState` owns the arrays, grows them and
calls the kernels. This docstring is the contract of those arrays, the way ``_criterion.pxd``
is scikit-learn's. Every kernel below works on these flat arrays (``t`` is a node id, ``s`` a
sample id)::

    node[t]            the four fields a search reads, one int64 row of 32 bytes (two rows a
                       cache line); ``nodef = node.view(float64)`` reads the float fields
    nodef[t, VMIN]     smallest value the node holds
    nodef[t, VMAX]     largest value the node holds
    node[t, LEFT]      left child, NO_NODE (-1) when empty; node 0 is the root
    node[t, RIGHT]     right child
    info[t]            the other fields, read once per insertion (int64 rows of 32 bytes)
    info[t, LABEL]     label code shared by all samples of a *label node*, or MIXED (-1) for a
                       *value node* (one value, several labels)
    info[t, CIPHER]    the node's cipher1: a multiple of GRID in (0, c_max)
    info[t, HEAD]      first sample of the node's list (insertion order)
    info[t, TAIL]      last sample of the node's list
    s_value[s]         a sample's value; samples are numbered in insertion order
    s_label[s]         its label code (>= 0)
    s_next[s]          next sample of the same node's list, NO_NODE at the end
    s_node[s]          the node holding the sample
    meta[N_NODES]      nodes in use
    meta[WORD_POS]     next unused word of ``words`` (random 64-bit words, the only randomness)
    meta[GRID_MAX]     K = c_max // GRID: node ciphers are GRID * k with 0 < k < K

Invariants (``validate_state`` checks them; the tests check them after every insertion):

* in-order, value ranges ``[VMIN, VMAX]`` are increasing and disjoint, and attained;
* in-order, ciphers are strictly increasing (the tree is also a search tree on cipher1);
* each node is a label node (one label), a value node (``VMIN == VMAX``), or both.

Why GRID = 4: every threshold a forest can put between two node ciphers, ``(c_a + c_b) / 2``,
is then an even integer <= 2**53, exact in float64, and unseen values get odd ciphers, so a
test value never lands exactly on a threshold (see ``encrypt_values``).

Insertion (``insert_samples``) follows the paper's Algorithms 1-2 as restated in docs/gipe.md,
with one change of tree *shape* explained in ``_split``. A kernel never leaves the tree half
updated: when a new cipher has no free grid point it returns STATUS_EXHAUSTED before touching
anything, the caller re-keys the column (``ColumnState.rekey``) and resumes; when ``words``
runs low it returns STATUS_NEED_WORDS.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ...core import JIT_OPTIONS

NO_NODE = -1
MIXED = -1

# node columns
VMIN = 0
VMAX = 1
LEFT = 2
RIGHT = 3
# info columns
LABEL = 0
CIPHER = 1
HEAD = 2
TAIL = 3
NODE_FIELDS = 4
# meta entries
N_NODES = 0
WORD_POS = 1
GRID_MAX = 2
META_SIZE = 3

#: Node ciphers are multiples of GRID; unseen values get odd ciphers.
GRID = 4
#: Standard deviation of a new cipher's Gaussian jitter, as a fraction of its free interval.
JITTER_SCALE = 0.125
#: Jitter draws tried before falling back to the interval's midpoint (never needed in practice).
MAX_DRAWS = 32
#: Words an insertion may consume (two new nodes, MAX_DRAWS normals each, two words a normal).
WORDS_PER_INSERT = 4 * MAX_DRAWS + 8

STATUS_DONE = 0
STATUS_EXHAUSTED = 1
STATUS_NEED_WORDS = 2

#: ``validate_state`` error codes and their messages (0: valid).
VALID = 0
VALIDATION_ERRORS = {
    1: "a child index is out of range",
    2: "the node links do not form a tree over all nodes",
    3: "a node's value range is empty or not finite",
    4: "in-order value ranges are not increasing and disjoint",
    5: "a cipher is not a positive multiple of GRID below c_max",
    6: "in-order ciphers are not strictly increasing",
    7: "a sample list is inconsistent (links, owner, or samples in no list)",
    8: "a sample's value lies outside its node's range",
    9: "a label node holds a sample of another label",
    10: "a value node holds samples of different values",
    11: "a node's range is not attained by its samples",
    12: "a label code is negative",
}


# ------------------------------------------------------------------------------ randomness
@njit(inline="always", **JIT_OPTIONS)
def _unit(word):
    """Uniform float in [0, 1) from the top 53 bits of a word."""
    return np.float64(word >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(**JIT_OPTIONS)
def _normal(words, meta):
    """A standard normal draw (Box-Muller) from the next two words."""
    pos = meta[WORD_POS]
    u1 = 1.0 - _unit(words[pos])  # in (0, 1]: the log is finite
    u2 = _unit(words[pos + 1])
    meta[WORD_POS] = pos + 2
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


@njit(**JIT_OPTIONS)
def _draw_cipher(lo, hi, words, meta):
    """A random cipher strictly inside ``(lo, hi)`` on the grid, or -1 if none is free.

    ``lo`` and ``hi`` are ciphers (multiples of GRID; 0 and c_max for the open ends). The draw
    is the interval's midpoint plus N(0, (JITTER_SCALE * width)^2), redrawn until inside.
    """
    glo = lo // GRID
    ghi = hi // GRID
    width = ghi - glo
    if width < 2:
        return -1
    mid = glo + 0.5 * width
    sigma = JITTER_SCALE * width
    for _ in range(MAX_DRAWS):
        g = np.int64(np.floor(mid + sigma * _normal(words, meta) + 0.5))
        if glo < g < ghi:
            return g * GRID
    return (glo + width // 2) * GRID


@njit(**JIT_OPTIONS)
def permutation(n, words):
    """Fisher-Yates permutation of ``range(n)`` from ``n`` words (modulo bias < 2**-40)."""
    order = np.arange(n)
    for i in range(n - 1, 0, -1):
        j = np.int64(words[i] % np.uint64(i + 1))
        order[i], order[j] = order[j], order[i]
    return order


# ------------------------------------------------------------------------------ insertion
@njit(inline="always", **JIT_OPTIONS)
def _append(t, s, info, s_next, s_node):
    s_next[s] = NO_NODE
    if info[t, HEAD] == NO_NODE:
        info[t, HEAD] = s
    else:
        s_next[info[t, TAIL]] = s
    info[t, TAIL] = s
    s_node[s] = t


@njit(inline="always", **JIT_OPTIONS)
def _new_node(node, nodef, info, meta, vmin, vmax, label, cipher):
    t = meta[N_NODES]
    meta[N_NODES] = t + 1
    nodef[t, VMIN] = vmin
    nodef[t, VMAX] = vmax
    node[t, LEFT] = NO_NODE
    node[t, RIGHT] = NO_NODE
    info[t, LABEL] = label
    info[t, CIPHER] = cipher
    info[t, HEAD] = NO_NODE
    info[t, TAIL] = NO_NODE
    return t


@njit(**JIT_OPTIONS)
def _split(t, s, lo, hi, node, nodef, info, s_value, s_next, s_node, meta, words):
    """Split label node ``t`` at the value of sample ``s`` (of another label).

    Samples below the value go to a new node ``l``, those above to ``r``; ``t`` keeps the
    equal values (the caller then adds ``s``). ``l`` is hung where a search for a value just
    below ``t``'s range ends: as ``t.left`` if that is empty, else as the right child of the
    rightmost node of ``t.left`` (``r`` symmetrically)::

        before:   t = [1 2 3 5 6]          after:   t = [4]
                 /               \\                /       \\
               L                   R              L         R
                                                   \\       /
                                              l = [1 2 3]  r = [5 6]

    The paper (Algorithm 2, docs/gipe.md) instead hangs ``l`` as ``t.left`` with the old left
    subtree under ``l.left``. Both give the same in-order sequence and the same cipher
    intervals, but pushing whole subtrees down at every split made the trees deep (mean
    sample depth 880 for 10**6 random-label samples, 25 s per column); hung at the bottom,
    new nodes keep the depth logarithmic (21 for the same data).

    ``lo`` / ``hi`` are the ciphers bounding ``t``'s subtree (from the search). Returns the
    number of samples equal to the value, or -1 (nothing changed) if a cipher has no room.
    """
    a = s_value[s]
    n_lo = 0
    n_hi = 0
    lo_max = -np.inf
    hi_min = np.inf
    q = info[t, HEAD]
    while q != NO_NODE:
        v = s_value[q]
        if v < a:
            n_lo += 1
            lo_max = max(lo_max, v)
        elif v > a:
            n_hi += 1
            hi_min = min(hi_min, v)
        q = s_next[q]
    c_t = info[t, CIPHER]
    c_l = -1
    c_r = -1
    # Parents of l and r: t itself, or t's in-order neighbour inside its subtree.
    parent_l = t
    parent_r = t
    if n_lo > 0:
        below = lo
        u = node[t, LEFT]
        if u != NO_NODE:
            while node[u, RIGHT] != NO_NODE:
                u = node[u, RIGHT]
            below = info[u, CIPHER]
            parent_l = u
        c_l = _draw_cipher(below, c_t, words, meta)
        if c_l < 0:
            return -1
    if n_hi > 0:
        above = hi
        u = node[t, RIGHT]
        if u != NO_NODE:
            while node[u, LEFT] != NO_NODE:
                u = node[u, LEFT]
            above = info[u, CIPHER]
            parent_r = u
        c_r = _draw_cipher(c_t, above, words, meta)
        if c_r < 0:
            return -1
    label = info[t, LABEL]
    l = NO_NODE
    r = NO_NODE
    if n_lo > 0:
        l = _new_node(node, nodef, info, meta, nodef[t, VMIN], lo_max, label, c_l)
        node[parent_l, LEFT if parent_l == t else RIGHT] = l
    if n_hi > 0:
        r = _new_node(node, nodef, info, meta, hi_min, nodef[t, VMAX], label, c_r)
        node[parent_r, RIGHT if parent_r == t else LEFT] = r
    # Redistribute t's list, keeping insertion order inside each part.
    n_equal = 0
    q = info[t, HEAD]
    info[t, HEAD] = NO_NODE
    info[t, TAIL] = NO_NODE
    while q != NO_NODE:
        nxt = s_next[q]
        v = s_value[q]
        if v < a:
            _append(l, q, info, s_next, s_node)
        elif v > a:
            _append(r, q, info, s_next, s_node)
        else:
            _append(t, q, info, s_next, s_node)
            n_equal += 1
        q = nxt
    return n_equal


@njit(**JIT_OPTIONS)
def _insert_one(s, node, nodef, info, s_value, s_label, s_next, s_node, meta, words):
    a = s_value[s]
    y = s_label[s]
    if meta[N_NODES] == 0:  # the root gets c_max / 2
        t = _new_node(node, nodef, info, meta, a, a, y, (meta[GRID_MAX] // 2) * GRID)
        _append(t, s, info, s_next, s_node)
        return STATUS_DONE
    # Search, reading only ``node``; pred / succ end as the last nodes passed on the right /
    # left: the in-order neighbours of the gap (or of t's subtree). Their ciphers lo / hi are
    # read only when a node is created: every ``info`` row read is a likely cache miss.
    t = 0
    pred = NO_NODE
    succ = NO_NODE
    side = -1
    while True:
        if a < nodef[t, VMIN]:
            succ = t
            if node[t, LEFT] == NO_NODE:
                side = LEFT
                break
            t = node[t, LEFT]
        elif a > nodef[t, VMAX]:
            pred = t
            if node[t, RIGHT] == NO_NODE:
                side = RIGHT
                break
            t = node[t, RIGHT]
        else:
            break
    if side != -1:
        # a falls in the gap between pred and succ: it joins a neighbouring run of its label,
        # or opens a new node there.
        if pred != NO_NODE and info[pred, LABEL] == y:
            _append(pred, s, info, s_next, s_node)
            nodef[pred, VMAX] = a
            return STATUS_DONE
        if succ != NO_NODE and info[succ, LABEL] == y:
            _append(succ, s, info, s_next, s_node)
            nodef[succ, VMIN] = a
            return STATUS_DONE
        lo = 0 if pred == NO_NODE else info[pred, CIPHER]
        hi = meta[GRID_MAX] * GRID if succ == NO_NODE else info[succ, CIPHER]
        c = _draw_cipher(lo, hi, words, meta)
        if c < 0:
            return STATUS_EXHAUSTED
        u = _new_node(node, nodef, info, meta, a, a, y, c)
        node[t, side] = u
        _append(u, s, info, s_next, s_node)
        return STATUS_DONE
    # a lies inside t's range.
    if info[t, LABEL] == y:
        _append(t, s, info, s_next, s_node)
        return STATUS_DONE
    if nodef[t, VMIN] == nodef[t, VMAX]:  # a equals t's single value: t is a value node
        _append(t, s, info, s_next, s_node)
        info[t, LABEL] = MIXED
        return STATUS_DONE
    lo = 0 if pred == NO_NODE else info[pred, CIPHER]
    hi = meta[GRID_MAX] * GRID if succ == NO_NODE else info[succ, CIPHER]
    n_equal = _split(t, s, lo, hi, node, nodef, info, s_value, s_next, s_node, meta, words)
    if n_equal < 0:
        return STATUS_EXHAUSTED
    _append(t, s, info, s_next, s_node)
    info[t, LABEL] = MIXED if n_equal > 0 else y
    nodef[t, VMIN] = a
    nodef[t, VMAX] = a
    return STATUS_DONE


@njit(**JIT_OPTIONS)
def insert_samples(node, nodef, info, s_value, s_label, s_next, s_node, meta, words, start,
                   stop):
    """Insert samples ``start .. stop - 1`` one at a time, in that order.

    Returns ``(status, s)``: STATUS_DONE with ``s == stop``, or the status that stopped it
    with the first sample not inserted (resume from there).
    """
    for s in range(start, stop):
        if words.shape[0] - meta[WORD_POS] < WORDS_PER_INSERT:
            return STATUS_NEED_WORDS, s
        status = _insert_one(s, node, nodef, info, s_value, s_label, s_next, s_node, meta,
                             words)
        if status != STATUS_DONE:
            return status, s
    return STATUS_DONE, stop


# ------------------------------------------------------------------------------ traversal
@njit(**JIT_OPTIONS)
def inorder_nodes(node, n_nodes):
    """Node ids in in-order (increasing values and ciphers); the tree must be valid."""
    order = np.empty(n_nodes, dtype=np.int64)
    stack = np.empty(n_nodes, dtype=np.int64)
    depth = 0
    k = 0
    t = 0 if n_nodes > 0 else NO_NODE
    while depth > 0 or t != NO_NODE:
        while t != NO_NODE:
            stack[depth] = t
            depth += 1
            t = node[t, LEFT]
        depth -= 1
        t = stack[depth]
        order[k] = t
        k += 1
        t = node[t, RIGHT]
    return order


@njit(**JIT_OPTIONS)
def node_lists(info, s_next, order, n_samples):
    """Sample ids of the nodes ``order`` in insertion order, as ``(ptr, samples)`` (CSR)."""
    ptr = np.empty(order.shape[0] + 1, dtype=np.int64)
    samples = np.empty(n_samples, dtype=np.int64)
    k = 0
    for r in range(order.shape[0]):
        ptr[r] = k
        q = info[order[r], HEAD]
        while q != NO_NODE:
            samples[k] = q
            k += 1
            q = s_next[q]
    ptr[order.shape[0]] = k
    return ptr, samples


@njit(**JIT_OPTIONS)
def validate_state(node, nodef, info, s_value, s_label, s_next, s_node, n_nodes, n_samples,
                   c_max):
    """Check every invariant of the module docstring; return ``(code, node)``, code 0 if valid.

    Also used on states read from files, where the arrays may be corrupt: it range-checks
    every index before following it and terminates on cyclic links.
    """
    if (n_nodes == 0) != (n_samples == 0):
        return 2, NO_NODE
    for t in range(n_nodes):
        for side in (LEFT, RIGHT):
            c = node[t, side]
            if c != NO_NODE and (c <= 0 or c >= n_nodes):
                return 1, t
    visited = np.zeros(n_nodes, dtype=np.bool_)
    stack = np.empty(n_nodes, dtype=np.int64)
    seen = np.zeros(n_samples, dtype=np.bool_)
    depth = 0
    n_visited = 0
    total = 0
    prev = NO_NODE
    t = 0 if n_nodes > 0 else NO_NODE
    while depth > 0 or t != NO_NODE:
        while t != NO_NODE:
            if visited[t]:
                return 2, t
            visited[t] = True
            stack[depth] = t
            depth += 1
            t = node[t, LEFT]
        depth -= 1
        t = stack[depth]
        n_visited += 1
        vmin = nodef[t, VMIN]
        vmax = nodef[t, VMAX]
        if not (np.isfinite(vmin) and np.isfinite(vmax) and vmin <= vmax):
            return 3, t
        c = info[t, CIPHER]
        if c <= 0 or c >= c_max or c % GRID != 0:
            return 5, t
        if prev != NO_NODE:
            if not nodef[prev, VMAX] < vmin:
                return 4, t
            if not info[prev, CIPHER] < c:
                return 6, t
        label = info[t, LABEL]
        if label < MIXED:
            return 12, t
        if label == MIXED and vmin != vmax:
            return 10, t
        # The list: distinct samples owned by t, from HEAD to TAIL, at least one.
        q = info[t, HEAD]
        if q == NO_NODE:
            return 7, t
        last = NO_NODE
        lo = np.inf
        hi = -np.inf
        while q != NO_NODE:
            if q < 0 or q >= n_samples or seen[q] or s_node[q] != t:
                return 7, t
            seen[q] = True
            total += 1
            v = s_value[q]
            if not vmin <= v <= vmax:
                return 8, t
            if s_label[q] < 0:
                return 12, t
            if label != MIXED and s_label[q] != label:
                return 9, t
            lo = min(lo, v)
            hi = max(hi, v)
            last = q
            q = s_next[q]
        if last != info[t, TAIL]:
            return 7, t
        if lo != vmin or hi != vmax:
            return 11, t
        prev = t
        t = node[t, RIGHT]
    if n_visited != n_nodes:
        return 2, NO_NODE
    if total != n_samples:
        return 7, NO_NODE
    return VALID, NO_NODE


# ------------------------------------------------------------------------------ encryption
@njit(inline="always", **JIT_OPTIONS)
def _odd_near(x):
    """The odd integer nearest to ``x``, the lower one on a tie."""
    return 2 * np.int64(np.ceil(0.5 * x - 1.0)) + 1


@njit(**JIT_OPTIONS)
def encrypt_values(x, in_vmin, in_vmax, in_cipher, c_max, scale, out, rank):
    """cipher1 of arbitrary values by search only (the state is not changed).

    ``in_*`` are the node ranges and ciphers in in-order (ranks ``0..m-1``). For each value:

    * inside node ``k``'s range: the node's cipher, ``rank = k``;
    * in the gap between nodes ``k`` and ``k+1`` (``rank = -1``): an odd cipher strictly
      between theirs, placed by linear interpolation of the value. The plaintext exact
      splitter would put its threshold at ``t = vmax_k/2 + vmin_{k+1}/2``; values ``<= t`` get
      a cipher below ``(c_k + c_{k+1})/2`` and values above ``t`` one above it, so a forest
      threshold at that cipher midpoint routes unseen values exactly as ``t`` does;
    * below the smallest / above the largest value: an odd cipher in ``(0, c_first)`` /
      ``(c_last, c_max)``, the distance ``d`` to the extreme squashed by ``d / (d + scale)``.

    Non-decreasing in ``x``. ``scale`` is half the training range (positive).
    """
    m = in_vmin.shape[0]
    for i in range(x.shape[0]):
        a = x[i]
        lo = 0
        hi = m
        while lo < hi:
            mid = (lo + hi) >> 1
            if in_vmin[mid] <= a:
                lo = mid + 1
            else:
                hi = mid
        k = lo - 1
        if k >= 0 and a <= in_vmax[k]:
            out[i] = in_cipher[k]
            rank[i] = k
            continue
        rank[i] = -1
        if k < 0:
            c0 = in_cipher[0]
            d = 0.5 * in_vmin[0] - 0.5 * a
            e = _odd_near(c0 * (scale / (d + scale)))
            out[i] = max(min(e, c0 - 1), 1)
        elif k == m - 1:
            cl = in_cipher[k]
            d = 0.5 * a - 0.5 * in_vmax[k]
            e = _odd_near(cl + (c_max - cl) * (d / (d + scale)))
            out[i] = min(max(e, cl + 1), c_max - 1)
        else:
            va = in_vmax[k]
            vb = in_vmin[k + 1]
            ca = in_cipher[k]
            cb = in_cipher[k + 1]
            t = va / 2.0 + vb / 2.0  # exactly the plaintext splitter's midpoint
            if t >= vb or not np.isfinite(t):
                t = va
            f = (0.5 * a - 0.5 * va) / (0.5 * vb - 0.5 * va)
            e = _odd_near(ca + (cb - ca) * f)
            half = (ca + cb) // 2  # even: ca and cb are multiples of GRID
            if a <= t:
                out[i] = max(min(e, half - 1), ca + 1)
            else:
                out[i] = min(max(e, half + 1), cb - 1)



@njit(**JIT_OPTIONS)
def lookup_positions(x, rank, ptr, sorted_values, sorted_positions, out):
    """Position (in its node's insertion-ordered list) of a stored sample equal to ``x[i]``.

    ``sorted_values[ptr[k]:ptr[k+1]]`` are node ``k``'s values sorted, with their positions
    in ``sorted_positions`` (ascending among equal values). ``out[i] = -1`` when ``x[i]`` is
    in no node (``rank[i] < 0``) or equals none of its node's samples.
    """
    for i in range(x.shape[0]):
        k = rank[i]
        out[i] = -1
        if k < 0:
            continue
        lo = ptr[k]
        hi = ptr[k + 1]
        a = x[i]
        while lo < hi:
            mid = (lo + hi) >> 1
            if sorted_values[mid] < a:
                lo = mid + 1
            else:
                hi = mid
        if lo < ptr[k + 1] and sorted_values[lo] == a:
            out[i] = sorted_positions[lo]


@njit(**JIT_OPTIONS)
def decrypt_positions(cipher, position, in_cipher, ptr, node_samples, s_value, out):
    """Appendix A's Decrypt: find the node by cipher1, read its ``position``-th sample.

    Entries with ``position < 0`` are skipped. Returns the index of the first entry whose
    cipher is no node's or whose position is beyond its node's list, or -1.
    """
    m = in_cipher.shape[0]
    for i in range(cipher.shape[0]):
        p = position[i]
        if p < 0:
            continue
        c = cipher[i]
        lo = 0
        hi = m
        while lo < hi:
            mid = (lo + hi) >> 1
            if in_cipher[mid] < c:
                lo = mid + 1
            else:
                hi = mid
        if lo == m or in_cipher[lo] != c or p >= ptr[lo + 1] - ptr[lo]:
            return i
        out[i] = s_value[node_samples[ptr[lo] + p]]
    return -1
