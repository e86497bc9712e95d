"""One session of the encrypted-forest server: :class:`ServerSession`.

A session holds what one client uploaded — the GIPE cipher matrix, the forest parameters,
the client's public homomorphic context, the label packs (each expanded into the lane
rotations the running sums need, here or on Dask workers) — and what training has produced
so far: the trees grown
level by level (:class:`~..planner.ForestGrowth`), the packed leaf store, and the protocol
position (state, round, the open query's token and node plans).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...he import BlockLayout, PublicContext
from ..params import ForestSpec
from ..planner import ForestGrowth, NodePlan, OpenNode
from ..selections import selection
from .labels import LabelRotations
from .routing import PackedForest, pack_forest, route_rows

__all__ = ["SESSION_STATES", "ServerSession", "ServerStats"]

#: A session's states, in order.
SESSION_STATES = ("receiving labels", "training", "trained")


@dataclass
class ServerStats:
    """What a session cost the server: seconds and bytes per message kind, rounds."""

    seconds: float = 0.0
    rounds: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    bytes_per_round: list[int] = field(default_factory=list)
    query_ciphertexts: int = 0
    candidates: int = 0
    growth_seconds: float = 0.0  # growing trees without rounds ("rr", "blind")
    leaf_seconds: float = 0.0  # summing the leaves' label ciphertexts without rounds


class ServerSession:
    """The server's state for one client's forest (see the module docstring).

    Attributes
    ----------
    id : str
    context : PublicContext
        The client's public context (evaluation only).
    X : ndarray
        The GIPE cipher matrix.
    spec : ForestSpec
    layout : BlockLayout
    labels : LabelRotations or ShardedLabels
        Where the label packs' lane rotations are held: here
        (:class:`~.labels.LabelRotations`) or in shards on Dask workers
        (:class:`~.dask_levels.ShardedLabels`); released once the forest is trained.
    leaf_store : list
        Finished leaf-store ciphertexts; ``leaf_open`` holds the partial sums of the others.
    trees : list of TreeGrowth
    state, round, query_token, plans
        The protocol position: the open query's round, token and node plans.
    """

    def __init__(self, session_id: str, context: PublicContext, X: np.ndarray,
                 n_classes: int, spec: ForestSpec, layout: BlockLayout):
        self.id = session_id
        self.context = context
        self.X = X
        self.n_classes = n_classes
        self.spec = spec
        self.layout = layout
        self.labels = LabelRotations(context, layout)  # or shards, set by the server
        self.n_labels = 0
        self.randomized_labels: np.ndarray | None = None  # "rr": the client's ỹ
        # False: "rr"/"blind" sessions whose client reads its own leaf counts send none.
        self.label_ciphertexts = True
        # False: plan-only rounds ("gini"/"dp" whose client decides from its own counts).
        self.round_counts = selection(spec.split_selection).asks_rounds
        self.leaf_store: list = []  # packed leaf ciphertexts, finished (one level left: CKKS)
        # Prediction's tables of the trained trees, made at the first predict: the packed
        # forest (.routing), and per node of it the bootstrap draws and store position.
        self._packed: PackedForest | None = None
        self._leaf_totals: np.ndarray | None = None
        self._leaf_positions: np.ndarray | None = None
        self.leaf_open: dict[int, object] = {}  # store index -> unfinished sum of leaves
        self.n_leaves = 0  # leaf positions handed out
        self.pending_leaves: list[tuple[int, OpenNode]] = []  # leaves decided by answers
        self.mask_shift = None  # the shift of the cached query masks
        self.next_tree = 0  # where the next byte-capped round starts
        self.state = SESSION_STATES[0]
        self.round = 0
        self.query_token = ""
        self.plans: list[NodePlan] = []
        self.stats = ServerStats()
        self.last_used = time.monotonic()
        self.growth = ForestGrowth(X, spec)
        self.trees = self.growth.trees
        self.block_size = self.layout.block_size
        self.blocks_per_ciphertext = self.layout.blocks_per_ciphertext

    def label_copy(self, row: int, lane_position: int):
        """The label rotation holding ``row``'s one-hot label in lane ``lane_position``
        (labels held here)."""
        return self.labels.copy(row, lane_position)

    def packed_forest(self) -> PackedForest:
        """The trained trees in one node table (:func:`.routing.pack_forest`), made once."""
        if self._packed is None:
            self._packed = pack_forest(self.trees)
        return self._packed

    def route(self, X: np.ndarray, n_jobs: int | None = None) -> np.ndarray:
        """Leaf node id (local to its tree) of every row of ``X`` in every tree:
        ``(n_rows, n_trees)``, from the compiled walk (:func:`.routing.route_rows`)."""
        return route_rows(self.packed_forest(), X, n_jobs)

    def leaf_totals(self) -> np.ndarray:
        """Per node of :meth:`packed_forest`, the bootstrap draws of the training rows
        reaching it (public to the server: the rows and their seeded weights); computed once
        per session. A leaf reply sends them: the client turns CKKS frequencies back into
        exact counts."""
        if self._leaf_totals is None:
            offsets = self.packed_forest().offsets
            reached = self.route(self.X)
            totals = np.zeros(int(offsets[-1]), dtype=np.float64)
            for t in range(len(self.trees)):
                totals[offsets[t]: offsets[t + 1]] = np.bincount(
                    reached[:, t], weights=self.growth.weights(t),
                    minlength=int(offsets[t + 1] - offsets[t]))
            self._leaf_totals = totals
        return self._leaf_totals

    def leaf_positions(self) -> np.ndarray:
        """Per node of :meth:`packed_forest`, its leaf's position in the leaf store (-1: not
        a leaf)."""
        if self._leaf_positions is None:
            offsets = self.packed_forest().offsets
            positions = np.full(int(offsets[-1]), -1, dtype=np.int64)
            for t, tree in enumerate(self.trees):
                nodes = np.fromiter(tree.leaves.keys(), dtype=np.int64, count=len(tree.leaves))
                positions[offsets[t] + nodes] = np.fromiter(
                    tree.leaves.values(), dtype=np.int64, count=len(tree.leaves))
            self._leaf_positions = positions
        return self._leaf_positions

    def queue_leaf(self, tree: int, node: OpenNode) -> None:
        """A leaf decided by an answer: its counts go to the leaf store with the next
        level's work."""
        self.pending_leaves.append((tree, node))

    def finish_leaf_store(self, everything: bool) -> None:
        """Finish (rescale, switch to the last level) the leaf-store ciphertexts whose
        positions are all handed out, or all of them at the end of training."""
        per_store = self.layout.leaves_per_ciphertext
        complete = -(-self.n_leaves // per_store) if everything else self.n_leaves // per_store
        while len(self.leaf_store) < complete:
            index = len(self.leaf_store)
            self.leaf_store.append(self.context.finish_leaf_store(self.leaf_open.pop(index)))

    def finish_training(self) -> None:
        """The last leaves into the store; then forget what only training needs: the label
        rotations (one ciphertext per training row, most of a session's memory) and the
        masks. Prediction needs the trees and the leaf store alone."""
        self.finish_leaf_store(everything=True)
        self.forget_prediction_tables()
        self.state = "trained"
        self.labels.clear()
        self.context.clear_masks()

    def forget_prediction_tables(self) -> None:
        """Drop the tables :meth:`packed_forest`, :meth:`leaf_totals` and
        :meth:`leaf_positions` made (the trees changed: a restored state)."""
        self._packed = self._leaf_totals = self._leaf_positions = None

    def progress(self) -> dict:
        """Where the session stands: state, round, label count, open nodes, leaves."""
        return {"state": self.state, "round": self.round,
                "labels_received": self.n_labels, "n_labels": int(self.X.shape[0]),
                "n_trees": len(self.trees),
                "open_nodes": sum(len(t.open) for t in self.trees),
                "leaves": sum(len(t.leaves) for t in self.trees)}
