"""The server's encrypted work for one tree level: leaf sums and packed query blocks.

For the leaves a level closes, the weighted label rotations of their rows are added and
masked into their slot of the packed leaf store. For the nodes it plans, running sums of
label rotations along each candidate feature's row order give every candidate's left class
counts ``L`` and the node's total ``T``; :class:`LanePacker` places them as blocks in the
lanes of query ciphertexts and squares each ciphertext once (:mod:`...he.blocks` documents the
layout). Trees are independent, so with ``n_jobs > 1`` contiguous ranges of trees go to
forked worker processes.
"""

from __future__ import annotations

import multiprocessing
import signal

import numpy as np

from ...he import BlockLayout, PublicContext
from ..planner import NodePlan
from .session import ServerSession

__all__ = ["CKKS_MAX_SCALED_COUNT", "LanePacker", "compute_level", "lane_rotations", "level_part",
           "level_worker_pool"]

# CKKS: labels sit at scale 2^37 and masks at 2^40, so a query block z reaches the square at
# scale ~2^37 on 50 + 40 bits of modulus: (z * 2^37)^2 < 2^89, i.e. |z| < 2^7.5. A slot
# holds two blocks' counts, z = v·a + i·v·b, |z| <= sqrt(2)·v·W for a node of weight W:
# masks carry v = 2^-shift so that v·W <= 2^7 even for the heaviest node.
CKKS_MAX_SCALED_COUNT = 2.0 ** 7
# CKKS leaves are stored as class frequencies (counts / T, at most 1): at scale 2^48 they fit
# the 50-bit prime of a leaf reply, and the store's rescale noise (~3e3 in scaled units) is
# ~1e-11 of a frequency.
_CKKS_STORE_SCALE_BITS = 48


def _ckks_leaf_mask_scale(context: PublicContext) -> float:
    """Encoding scale of the leaf masks: the store lands at 2^48 after the rescale by the
    mask's 40-bit prime."""
    return 2.0 ** _CKKS_STORE_SCALE_BITS * context.scale / context.label_scale


def lane_rotations(context: PublicContext, layout: BlockLayout, pack) -> dict[int, object]:
    """A label pack rotated by every lane offset the running sums need (one key switch per
    rotation, each from its neighbour), prepared for mask multiplication."""
    offsets = layout.offsets()
    copies = {0: pack}
    forward = [d for d in offsets if 0 < d <= layout.rows_per_pack - 1 or
               len(offsets) == layout.cycle and d > 0]
    for d in forward:
        copies[d] = context.rotate(copies[d - 1], layout.stride)
    for d in sorted((d for d in offsets if d not in copies), reverse=True):
        previous = copies[(d + 1) % layout.cycle]
        copies[d] = context.rotate(previous, -layout.stride)
    return {d: context.prepare(ct) for d, ct in copies.items()}


def _add_rows(session: ServerSession, weights: np.ndarray, rows: np.ndarray, lane: int, acc=None):
    """``acc`` plus the weighted labels of ``rows`` bound to ``lane`` (other lanes: garbage);
    a new ciphertext if ``acc`` is None."""
    context = session.context
    position = session.layout.lane_position(lane)
    for row in rows.tolist():
        ct = session.label_copy(row, position)
        for _ in range(int(weights[row])):
            if acc is None:
                acc = context.copy(ct)
            else:
                context.add_inplace(acc, ct)
    return acc


_FORK_STATE = None  # (session, tasks, shift) inherited by forked level workers
_MIN_PARALLEL_WORK = 2_000  # row-visits below which forking costs more than it saves


def level_part(session: ServerSession, leaf_jobs, plans, shift: int, serialize: bool):
    """For some trees of one level: the leaves' counts added into their leaf-store
    ciphertexts (unfinished partial sums by store index) and the packed query ciphertexts
    (with each block's position)."""
    context, layout = session.context, session.layout
    per_store = layout.leaves_per_ciphertext
    store: dict[int, object] = {}
    ckks = context.kind.approximate
    scale = _ckks_leaf_mask_scale(context) if ckks else None
    for t, node, leaf in leaf_jobs:
        index, position = divmod(leaf, per_store)
        weights = session.growth.weights(t)
        total = _add_rows(session, weights, node.samples, layout.leaf_lane(position))
        # CKKS stores frequencies: the mask carries 1/T, T the leaf's bootstrap draws.
        mask = layout.leaf_mask(position)
        if ckks:
            mask = mask / float(weights[node.samples].sum())
        # Leaf masks are not cached: a level has few leaves, and a cached mask set would
        # cost as much memory as the query masks.
        product = context.multiply_mask(total, context.encode_mask(mask, scale=scale))
        if index in store:
            context.add_inplace(store[index], product)
        else:
            store[index] = product
    packer = LanePacker(session, shift)
    blobs, positions = packer.run(plans)
    if serialize:
        store = {index: context.dump_ciphertext(ct) for index, ct in store.items()}
    return store, blobs, positions


def level_worker_pool(n_workers: int):
    """``n_workers`` processes forked from this one (they share its session pages), which
    die on SIGTERM and SIGINT whatever Python handlers this process has installed."""
    return multiprocessing.get_context("fork").Pool(n_workers,
                                                    initializer=_default_stop_signals)


def _default_stop_signals() -> None:
    # A forked worker inherits its parent's Python signal handlers. An HTTP server's
    # (uvicorn's) SIGTERM handler only takes note, and a pool that ends with an error holds
    # its task queue's lock and SIGTERMs its workers: they would block on that lock, and the
    # parent wait for them, forever (seen with ``cipherforest serve --jobs 2``).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _level_part_in_worker(index: int):
    session, tasks, shift = _FORK_STATE
    leaf_jobs, plans = tasks[index]
    return level_part(session, leaf_jobs, plans, shift, serialize=True)


def _tree_ranges(session: ServerSession, leaf_jobs, plans, n_parts: int) -> list[tuple[int, int]]:
    """Split the trees into ``n_parts`` contiguous ranges of about equal encrypted work."""
    cost = np.zeros(len(session.trees))
    for t, node, _ in leaf_jobs:
        cost[t] += node.samples.shape[0]
    for p in plans:
        cost[p.tree] += p.node.samples.shape[0] * len(p.candidates)
    cumulative = np.cumsum(cost)
    cuts = np.searchsorted(cumulative, cumulative[-1] * np.arange(1, n_parts) / n_parts)
    edges = [0, *sorted(set(int(c) + 1 for c in cuts)), len(session.trees)]
    edges = sorted(set(min(e, len(session.trees)) for e in edges))
    return [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:], strict=True) if hi > lo]


class LanePacker:
    """Packs query blocks (candidates' ``L``, nodes' ``T``) into lanes of query ciphertexts,
    then squares them.

    A node's blocks in query order: the candidates of each of its features, then its total
    ``T``. Blocks fill the lanes column by column, two blocks per lane of each of the ``H``
    ciphertexts: block ``j`` goes to lane ``j // 2H``; within the lane's column, ``v = j mod
    2H`` is ciphertext ``v mod H``, part ``v // H`` (``_blocks``). One running sum per
    feature of a node, over the node's rows sorted by the feature, emits each candidate's
    ``L`` through its lane's part mask; when the blocks move on to the next lane, the sum is
    rotated one lane along (instead of summed again). The last feature's sum runs on to the
    node's last row and emits ``T``; the others stop at their last candidate. ``H`` is the
    fewest ciphertexts, ``ceil(blocks / blocks per ciphertext)``: a longer ``H`` saves lane
    changes (one rotation each) but costs about as much in squares, bytes and decryptions,
    and holds more accumulators in memory (benchmarks.md, "Query packing").
    """

    def __init__(self, session: ServerSession, shift: int):
        self.session = session
        self.context = session.context
        self.layout = session.layout
        self.value = 2.0 ** -shift if self.context.kind.approximate else 1
        self.shift = shift

    def _mask(self, lane: int, part: int):
        return self.context.mask(("block", lane, part, self.shift),
                                 lambda: self.layout.block_mask(lane, part, self.value))

    def encode_all_masks(self) -> None:
        for lane in range(self.layout.per_ciphertext):
            for part in (0, 1):
                self._mask(lane, part)

    def run(self, plans: list[NodePlan]) -> tuple[list[bytes], list[int]]:
        # (plan, feature, k): candidate k of the feature, or k = its candidate count for the
        # node total T, which ends the node's last feature.
        blocks = []
        for i, plan in enumerate(plans):
            last = len(plan.candidates) - 1
            for f, cands in enumerate(plan.candidates):
                blocks.extend((i, f, k) for k in range(len(cands) + (f == last)))
        if not blocks:
            return [], []
        layout = self.layout
        height = -(-len(blocks) // layout.blocks_per_ciphertext)
        column = 2 * height  # blocks per lane

        def place(j: int) -> tuple[int, int, int]:  # (lane, ciphertext, part) of block j
            lane, v = divmod(j, column)
            return lane, v % height, v // height

        positions = []
        for j in range(len(blocks)):
            lane, ct, part = place(j)
            positions.append(ct * layout.blocks_per_ciphertext + 2 * lane + part)
        query: list = [None] * height
        j = 0
        while j < len(blocks):
            i, f, first = blocks[j]
            last = len(plans[i].candidates) - 1
            stop = j + len(plans[i].candidates[f]) + (f == last) - first
            # A piece: consecutive lanes of one slot-matrix row (BFV has two).
            row = (j // column) // layout.lanes_per_row
            stop = min(stop, (row + 1) * layout.lanes_per_row * column)
            self._piece(plans[i], f, first, [place(k) for k in range(j, stop)], query)
            j = stop
        blobs = []
        for acc in query:
            squared = self.context.square(self.context.finish_sum(acc))
            blobs.append(self.context.dump_ciphertext(squared))
        return blobs, positions

    def _piece(self, plan: NodePlan, f: int, first: int,
               places: list[tuple[int, int, int]], query: list) -> None:
        """Blocks ``first ..`` of feature ``f`` of a node (its candidates, then for the last
        feature the node total), at ``places`` (lane, ciphertext, part)."""
        context, layout = self.context, self.session.layout
        cands = plan.candidates[f]
        weights = self.session.growth.weights(plan.tree)
        rows = plan.orders[f]
        acc, lane, stop = None, places[0][0], 0
        for k, (block_lane, ct, part) in enumerate(places, start=first):
            if block_lane != lane:  # next lane: move the sum along
                acc = context.rotate(acc, -layout.stride)
                lane = block_lane
            end = cands[k].end if k < len(cands) else rows.shape[0]
            acc = _add_rows(self.session, weights, rows[stop: end], lane, acc)
            stop = end
            self._add(query, ct, context.multiply_mask(acc, self._mask(lane, part)))

    def _add(self, query: list, ct: int, product) -> None:
        if query[ct] is None:
            query[ct] = product
        else:
            self.context.add_inplace(query[ct], product)


def compute_level(session: ServerSession, leaf_jobs, plans, shift: int, n_jobs: int):
    """Encrypted work of one level: leaf counts into the leaf store and the packed,
    squared query blocks. Returns each leaf's store position, the query ciphertexts and
    each block's position (``ciphertext * blocks_per_ciphertext + 2 * lane + part``) in
    query order.

    Trees are independent, so with ``n_jobs > 1`` contiguous ranges of trees go to the
    parent and ``n_jobs - 1`` forked worker processes (they inherit the session and its
    label rotations, shared copy-on-write; SEAL holds the GIL). Workers return their
    ciphertexts serialised; blocks stay in tree order, so the query order is unchanged.
    """
    # Leaves take the next positions of the leaf store, in job order.
    leaves = list(range(session.n_leaves, session.n_leaves + len(leaf_jobs)))
    leaf_jobs = [(t, node, position) for (t, node), position in
                 zip(leaf_jobs, leaves, strict=True)]
    session.n_leaves += len(leaf_jobs)
    n_jobs = min(n_jobs, len(session.trees))
    work = (sum(p.node.samples.shape[0] * len(p.candidates) for p in plans)
            + sum(node.samples.shape[0] for _, node, _ in leaf_jobs))
    bounds = [(0, len(session.trees))]
    if n_jobs > 1 and work >= _MIN_PARALLEL_WORK:
        bounds = _tree_ranges(session, leaf_jobs, plans, n_jobs)
    if len(bounds) == 1:
        parts = [level_part(session, leaf_jobs, plans, shift, serialize=False)]
    else:
        # Encode the lane masks once here: masks a worker encodes die with the worker.
        LanePacker(session, shift).encode_all_masks()
        tasks = [([j for j in leaf_jobs if lo <= j[0] < hi],
                  [p for p in plans if lo <= p.tree < hi]) for lo, hi in bounds]
        global _FORK_STATE
        _FORK_STATE = (session, tasks, shift)
        try:
            # The parent takes the first range itself: one process fewer holding private
            # pages (the summed memory peak is during these levels), nothing serialised.
            with level_worker_pool(len(tasks) - 1) as pool:
                forked = pool.map_async(_level_part_in_worker, range(1, len(tasks)))
                own = level_part(session, *tasks[0], shift, serialize=False)
                parts = [own, *forked.get()]
                pool.close()  # the workers exit on their own; terminate is for errors
                pool.join()
        finally:
            _FORK_STATE = None
    blobs, positions = [], []
    for part_store, part_blobs, part_positions in parts:
        for index, partial in part_store.items():
            if isinstance(partial, bytes):
                partial = session.context.load_ciphertext(partial)
            if index in session.leaf_open:
                session.context.add_inplace(session.leaf_open[index], partial)
            else:
                session.leaf_open[index] = partial
        positions.extend(len(blobs) * session.layout.blocks_per_ciphertext + p
                         for p in part_positions)
        blobs.extend(part_blobs)
    session.finish_leaf_store(everything=False)
    return leaves, blobs, positions
