"""The server's encrypted work for one tree level: leaf sums and packed query blocks.

For the leaves a level closes, the weighted label rotations of their rows are added and
masked into their slot of the packed leaf store. For the nodes it plans, running sums of
label rotations along each candidate feature's row order give every candidate's left class
counts ``L`` and the node's total ``T``; :class:`LanePacker` places them as blocks in the
lanes of query ciphertexts (:mod:`...he.blocks` documents the layout). The client receives
the counts themselves and squares them.

Every sum is linear in the rows, so the same code computes a level over all rows (one
server) or over one shard of rows (a Dask worker, :mod:`.dask_levels`): a shard's partial
query and leaf-store ciphertexts add up to the whole level's. On one server, trees are
independent, so with ``n_jobs > 1`` contiguous ranges of trees go to forked worker
processes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...he import BlockLayout, PublicContext
from ..planner import NodePlan
from .labels import DrawSums, LabelRotations, LeafJob, add_into, join_parts, leaf_sums
from .session import ServerSession
from .worker_pool import level_worker_pool

__all__ = ["CKKS_MAX_SCALED_COUNT", "LanePacker", "NodeRows", "QueryGrid", "add_to_leaf_store",
           "assign_leaves", "compute_level", "level_part",
           "merge_partials", "node_rows_of_plan", "store_order", "LocalLevels"]

# CKKS: labels sit at scale 2^37 and masks at 2^40; after the rescale by a 40-bit prime a
# query block z reaches the client at scale 2^37 on the 50-bit prime: |z| · 2^37 < 2^49, i.e.
# |z| < 2^12. A slot holds two blocks' counts, z = v·a + i·v·b, |z| <= sqrt(2)·v·W for a node
# of weight W: masks carry v = 2^-shift so that v·W <= 2^11 even for the heaviest node.
CKKS_MAX_SCALED_COUNT = 2.0 ** 11


@dataclass
class NodeRows:
    """One planned node's rows as its running sums visit them: per planned feature the row
    ids in the feature's order, their bootstrap draws, and each candidate's end (rows
    ``order[:end]`` go left). On a shard, only the shard's rows."""

    orders: list[np.ndarray]
    counts: list[np.ndarray]
    ends: list[np.ndarray]


def node_rows_of_plan(plan: NodePlan, weights: np.ndarray) -> NodeRows:
    """All of a planned node's rows (one server)."""
    return NodeRows(list(plan.orders), [weights[order] for order in plan.orders],
                    [np.array([c.end for c in cands], dtype=np.int64)
                     for cands in plan.candidates])


@dataclass
class QueryGrid:
    """Where a level's query blocks go: ``height`` ciphertexts, each block's position
    (``ciphertext * blocks_per_ciphertext + 2 * lane + part``) in query order, and the
    *pieces* the running sums make: ``(node, feature, first block, places)`` with places
    ``(lane, ciphertext, part)`` of consecutive lanes of one slot-matrix row."""

    height: int
    positions: list[int]
    pieces: list[tuple[int, int, int, list[tuple[int, int, int]]]]


class LanePacker:
    """Packs query blocks (candidates' ``L``, nodes' ``T``) into lanes of query ciphertexts.

    A node's blocks in query order: the candidates of each of its features, then its total
    ``T``. Blocks fill the lanes column by column, two blocks per lane of each of the ``H``
    ciphertexts: block ``j`` goes to lane ``j // 2H``; within the lane's column, ``v = j mod
    2H`` is ciphertext ``v mod H``, part ``v // H`` (:meth:`grid`). One running sum per
    feature of a node, over the node's rows sorted by the feature, emits each candidate's
    ``L`` through its lane's part mask; when the blocks move on to the next lane, the sum is
    rotated one lane along (instead of summed again). The last feature's sum runs on to the
    node's last row and emits ``T``; the others stop at their last candidate. ``H`` is at
    least the fewest ciphertexts, ``ceil(blocks / blocks per ciphertext)``: a longer ``H``
    saves lane changes (one rotation each) but costs bytes, decryptions and the rotations
    that join the ciphertexts' rotation parts: :meth:`height` weighs the two.
    """

    def __init__(self, context: PublicContext, layout: BlockLayout, shift: int):
        self.context = context
        self.layout = layout
        self.value = 2.0 ** -shift if context.kind.approximate else 1
        self.shift = shift

    def _mask(self, lane: int, part: int, rotation_part: int):
        # Cached by the lane the mask selects: rotation part i of lane K is the lane
        # i·span further along, whose own part-0 mask it is (no more masks with parts).
        physical = self.layout.part_lane(lane, rotation_part)
        return self.context.mask(
            ("block", physical, part, self.shift),
            lambda: self.layout.block_mask(lane, part, self.value, rotation_part))

    def encode_all_masks(self) -> None:
        for lane in range(self.layout.per_ciphertext):
            for part in (0, 1):
                for rotation_part in range(self.layout.parts):
                    self._mask(lane, part, rotation_part)

    def grid(self, n_candidates: list[list[int]], height: int | None = None,
             taller: bool = True) -> QueryGrid:
        """The query grid of nodes with ``n_candidates[i][f]`` candidates on their planned
        features, ``height`` ciphertexts high (None: :meth:`height`, taller than the fewest
        only if ``taller``). A function of its arguments alone: a shard computes the
        server's grid."""
        blocks = []  # (node, feature, k): candidate k, or k = its count for the node total
        for i, counts in enumerate(n_candidates):
            last = len(counts) - 1
            for f, n in enumerate(counts):
                blocks.extend((i, f, k) for k in range(n + (f == last)))
        if not blocks:
            return QueryGrid(0, [], [])
        layout = self.layout
        if height is None:
            height = self.height(n_candidates, taller)
        column = 2 * height  # blocks per lane

        def place(j: int) -> tuple[int, int, int]:  # (lane, ciphertext, part) of block j
            lane, v = divmod(j, column)
            return lane, v % height, v // height

        positions = []
        for j in range(len(blocks)):
            lane, ct, part = place(j)
            positions.append(ct * layout.blocks_per_ciphertext + 2 * lane + part)
        pieces = []
        j = 0
        while j < len(blocks):
            i, f, first = blocks[j]
            last = len(n_candidates[i]) - 1
            stop = j + n_candidates[i][f] + (f == last) - first
            # A piece: consecutive lanes of one slot-matrix row (BFV has two).
            row = (j // column) // layout.lanes_per_row
            stop = min(stop, (row + 1) * layout.lanes_per_row * column)
            pieces.append((i, f, first, [place(k) for k in range(j, stop)]))
            j = stop
        return QueryGrid(height, positions, pieces)

    def height(self, n_candidates: list[list[int]], taller: bool = True) -> int:
        """Query ciphertexts for these blocks: at least the fewest that hold them; taller
        (if ``taller``) when that saves more lane changes — ``P`` rotations each, a
        feature's blocks changing lanes every ``2H`` blocks — than the extra ciphertexts
        cost (``P - 1`` rotations to join their parts, finishing, bytes and the client's
        decryption: counted as two rotations each)."""
        sizes = [n + (f == len(counts) - 1) for counts in n_candidates
                 for f, n in enumerate(counts)]
        fewest = -(-sum(sizes) // self.layout.blocks_per_ciphertext)
        if not taller:
            return fewest
        widest = max(sizes)

        def cost(h: int) -> int:
            changes = sum(-(-b // (2 * h)) - 1 for b in sizes)
            return self.layout.parts * changes + (self.layout.parts + 1) * h

        heights, h = {fewest, max(fewest, -(-widest // 2))}, fewest
        while 2 * h < widest:
            h *= 2
            heights.add(h)
        return min(sorted(heights), key=cost)

    def accumulate(self, grid: QueryGrid, nodes: list[NodeRows], label_copy) -> list:
        """The query ciphertexts of ``grid`` over ``nodes``' rows, finished sums with their
        rotation parts joined but not yet on the last level (None where no row
        contributes): what shards add up."""
        parts = [[None] * self.layout.parts for _ in range(grid.height)]
        for i, f, first, places in grid.pieces:
            self._piece(nodes[i], f, first, places, parts, label_copy)
        context = self.context
        return [join_parts(context, self.layout,
                           [None if ct is None else context.finish_sum(ct) for ct in cts])
                for cts in parts]

    def finish(self, query: list) -> list[bytes]:
        """Query ciphertexts from :meth:`accumulate` (summed over shards), on the last
        level, serialised."""
        return [self.context.dump_ciphertext(self.context.last_level(ct)) for ct in query]

    def _piece(self, node: NodeRows, f: int, first: int,
               places: list[tuple[int, int, int]], query: list, label_copy) -> None:
        """Blocks ``first ..`` of feature ``f`` of a node (its candidates, then for the last
        feature the node total), at ``places`` (lane, ciphertext, part)."""
        context, layout = self.context, self.layout
        rows, counts, ends = node.orders[f], node.counts[f], node.ends[f]
        # Pairs of draws pay off when a block's sum is read after more than ~16 draws
        # (a read costs three ciphertext operations, a pair saves one per ~3.6 draws).
        pairs = counts.sum() > 16 * len(places)
        sums, lane, stop = DrawSums(context, layout.parts, pairs), places[0][0], 0
        for k, (block_lane, ct, part) in enumerate(places, start=first):
            if block_lane != lane:  # next lane: move the sums along
                sums.rotate(-layout.stride)
                lane = block_lane
            end = int(ends[k]) if k < len(ends) else rows.shape[0]
            sums.add_rows(label_copy, rows[stop: end], counts[stop: end],
                          layout.lane_position(lane))
            stop = end
            for rotation_part, acc in enumerate(sums.totals()):
                if acc is not None:
                    add_into(context, query[ct], rotation_part, context.multiply_mask(
                        acc, self._mask(lane, part, rotation_part)))


def merge_partials(context: PublicContext, parts: list[tuple]):
    """Add shards' partial leaf-store sums (by store index) and query ciphertexts
    (position by position; None contributes nothing): ``parts`` are ``(store, query, ...)``.
    Bytes are loaded first."""
    def load(ct):
        return context.load_ciphertext(ct) if isinstance(ct, bytes) else ct

    store: dict[int, object] = {}
    query: list = [None] * max((len(part[1]) for part in parts), default=0)
    for part_store, part_query, *_ in parts:
        for index, ct in part_store.items():
            add_into(context, store, index, load(ct))
        for k, ct in enumerate(part_query):
            if ct is not None:
                add_into(context, query, k, load(ct))
    return store, query


_FORK_STATE = None  # (session, tasks, shift) inherited by forked level workers
_MIN_PARALLEL_WORK = 2_000  # row-visits below which forking costs more than it saves


def level_part(session: ServerSession, leaf_jobs, plans, shift: int, serialize: bool):
    """For some trees of one level, on this server's label rotations: the leaves' counts
    added into their leaf-store ciphertexts (unfinished partial sums by store index) and
    the packed query ciphertexts (with each block's position).

    ``leaf_jobs``: ``(tree, node, store position)``; ``session`` needs ``context``,
    ``layout``, ``label_copy`` and ``growth.weights``.
    """
    context, layout = session.context, session.layout
    per_store = layout.leaves_per_ciphertext
    jobs = []
    for t, node, leaf in leaf_jobs:
        weights = session.growth.weights(t)
        index, position = divmod(leaf, per_store)
        counts = weights[node.samples]
        jobs.append(LeafJob(index, position, node.samples, counts, int(counts.sum())))
    store = leaf_sums(context, layout, session.label_copy, jobs)
    packer = LanePacker(context, layout, shift)
    grid = packer.grid([[len(c) for c in p.candidates] for p in plans],
                       taller=session.spec.max_round_bytes is None)
    nodes = [node_rows_of_plan(p, session.growth.weights(p.tree)) for p in plans]
    blobs = packer.finish(packer.accumulate(grid, nodes, session.label_copy))
    if serialize:
        store = {index: context.dump_ciphertext(ct) for index, ct in store.items()}
    return store, blobs, grid.positions


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


def assign_leaves(session: ServerSession, leaf_jobs) -> list[tuple]:
    """Give the level's leaves the next positions of the leaf store, in job order:
    ``(tree, node, position)``."""
    leaves = range(session.n_leaves, session.n_leaves + len(leaf_jobs))
    session.n_leaves += len(leaf_jobs)
    return [(t, node, position) for (t, node), position in zip(leaf_jobs, leaves, strict=True)]


def add_to_leaf_store(session: ServerSession, stores: list[dict]) -> None:
    """Add a level's leaf-store partial sums (by store index, from every part of the
    level), then finish the ciphertexts that are full."""
    for store in stores:
        for index, partial in store.items():
            if isinstance(partial, bytes):
                partial = session.context.load_ciphertext(partial)
            if index in session.leaf_open:
                session.context.add_inplace(session.leaf_open[index], partial)
            else:
                session.leaf_open[index] = partial
    session.finish_leaf_store(everything=False)


def store_order(session: ServerSession, leaf_jobs) -> list:
    """``leaf_jobs`` ordered so that :func:`assign_leaves` fills the leaf store column by
    column: leaves sorted by their total draws ``T`` take position 0 of every store
    ciphertext, then position 1, and so on. Leaves at one position with equal ``T`` share
    their masks (:func:`.labels.leaf_sums`): with many leaves, one encoding per position
    and ``T`` instead of one per leaf. For a level with all its leaves at once (trees grown
    without rounds); the leaves are the same, only their store positions differ."""
    if not leaf_jobs:
        return []
    totals = np.array([int(session.growth.weights(t)[node.samples].sum())
                       for t, node in leaf_jobs], dtype=np.int64)
    by_total = np.argsort(totals, kind="stable")
    position = np.arange(session.n_leaves, session.n_leaves + len(leaf_jobs))
    store, lane = np.divmod(position, session.layout.leaves_per_ciphertext)
    # Column-major rank of each position: by lane, then by store.
    rank = np.empty(len(leaf_jobs), dtype=np.int64)
    rank[np.lexsort((store, lane))] = np.arange(len(leaf_jobs))
    return [leaf_jobs[i] for i in by_total[rank].tolist()]


def compute_level(session: ServerSession, leaf_jobs, plans, shift: int, n_jobs: int):
    """Encrypted work of one level on this server: leaf counts into the leaf store and the
    packed query blocks. Returns each leaf's store position, the query ciphertexts and
    each block's position (``ciphertext * blocks_per_ciphertext + 2 * lane + part``) in
    query order.

    Trees are independent, so with ``n_jobs > 1`` contiguous ranges of trees go to the
    parent and ``n_jobs - 1`` forked worker processes (they inherit the session and its
    label rotations, shared copy-on-write; SEAL holds the GIL). Workers return their
    ciphertexts serialised; blocks stay in tree order, so the query order is unchanged.
    """
    leaf_jobs = assign_leaves(session, leaf_jobs)
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
        LanePacker(session.context, session.layout, shift).encode_all_masks()
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
    add_to_leaf_store(session, [part_store for part_store, _, _ in parts])
    blobs, positions = [], []
    for _, part_blobs, part_positions in parts:
        positions.extend(len(blobs) * session.layout.blocks_per_ciphertext + p
                         for p in part_positions)
        blobs.extend(part_blobs)
    return [position for _, _, position in leaf_jobs], blobs, positions


class LocalLevels:
    """Levels computed by this process (and ``n_jobs - 1`` forked workers): the label
    rotations of a session are held here."""

    def __init__(self, n_jobs: int):
        self.n_jobs = n_jobs

    @property
    def n_parts(self) -> int:
        """How many partly filled query ciphertexts a level may end with."""
        return self.n_jobs

    def new_labels(self, context: PublicContext, layout: BlockLayout, keys: np.ndarray,
                   public_context: bytes) -> LabelRotations:
        """Where a new session's label rotations are held: here."""
        return LabelRotations(context, layout)

    def compute(self, session: ServerSession, leaf_jobs, plans, shift: int):
        """:func:`compute_level`."""
        return compute_level(session, leaf_jobs, plans, shift, self.n_jobs)

    def close(self) -> None:
        """Nothing to release."""
