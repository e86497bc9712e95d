"""The server of the encrypted random forest: grows trees on GIPE ciphers and CKKS/BFV labels.

The server holds the GIPE cipher matrix (integers it may compare), the packed label
ciphertexts (many rows each, ``_blocks``) and the client's *public* homomorphic context with
Galois keys for one rotation step; it never sees a label or a key.
It grows every tree of the forest level by level (docs/private_forest.md, the paper's section 4):

1. For each open node of each tree it draws the candidate features and enumerates the
   candidate thresholds exactly as :class:`~cipherforest.ensemble.RandomForestClassifier`
   does on the same ciphers (same bootstrap counts, same per-node feature draws, same
   midpoints or histogram bins, same ``min_samples_leaf`` filter): everything but the
   impurities is plaintext to the server.
2. Each candidate's left class counts ``L`` and each node's total ``T`` get a block of a
   query ciphertext (``_blocks``: two blocks per lane of slots). A running sum of label
   rotations along the node's rows sorted by a feature, bound to a lane, gives the
   feature's candidates' ``L`` one after the other (the lane's mask keeps them), and its
   end is ``T``. A feature's blocks fill one lane of consecutive query ciphertexts (lanes
   are filled column by column, a lane change rotates the sum along), so one sum serves
   many candidates. Squaring each query ciphertext (one multiplication for all its lanes)
   gives the client ``L²`` and ``T²`` per class; it takes ``R = T - L``.
3. All trees' blocks of one level travel in one message; the client answers each node with
   a candidate index or "leaf". A leaf's encrypted class counts ``T`` (CKKS: frequencies)
   go to one slot block of the packed leaf store (``_blocks``).

Prediction routes GIPE-encrypted test rows through every tree and returns the leaf-store
ciphertexts the rows reach plus each (row, tree)'s leaf position; the client decrypts the
store and averages.

Protocol state changes only after a message has been validated completely, so a rejected
message (tampered, truncated, foreign, for an unknown node, for another round, replayed)
leaves the session as it was.
"""

from __future__ import annotations

import math
import multiprocessing
import secrets
import signal
import time
from dataclasses import dataclass, field

import numpy as np

from ..ensemble._base import effective_n_jobs
from ._blocks import BlockLayout
from ._plan import ForestGrowth, ForestSpec, NodePlan, OpenNode
from ._row_sums import can_sum_rows, row_sum_ciphertexts
from .he import HEError, PublicContext
from .protocol import Message, ProtocolError, decode_message, encode_message

__all__ = ["PrivateForestServer"]

# CKKS: labels sit at scale 2^37 and masks at 2^40, so a query block z reaches the square at
# scale ~2^37 on 50 + 40 bits of modulus: (z * 2^37)^2 < 2^89, i.e. |z| < 2^7.5. A slot
# holds two blocks' counts, z = v·a + i·v·b, |z| <= sqrt(2)·v·W for a node of weight W:
# masks carry v = 2^-shift so that v·W <= 2^7 even for the heaviest node.
_CKKS_MAX_SCALED_COUNT = 2.0 ** 7
# CKKS leaves are stored as class frequencies (counts / T, at most 1): at scale 2^48 they fit
# the 50-bit prime of a leaf reply, and the store's rescale noise (~3e3 in scaled units) is
# ~1e-11 of a frequency.
_CKKS_STORE_SCALE_BITS = 48


def _ckks_leaf_mask_scale(context: PublicContext) -> float:
    """Encoding scale of the leaf masks: the store lands at 2^48 after the rescale by the
    mask's 40-bit prime."""
    return 2.0 ** _CKKS_STORE_SCALE_BITS * context.scale / context.label_scale


_MAX_LABEL_CHUNK = 64  # label packs per upload message


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


class _Session:
    def __init__(self, session_id: str, context: PublicContext, X: np.ndarray,
                 n_classes: int, spec: ForestSpec, layout: BlockLayout):
        self.id = session_id
        self.context = context
        self.X = X
        self.n_classes = n_classes
        self.spec = spec
        self.layout = layout
        # label_copies[p][d]: label pack p rotated by d lanes (BlockLayout.offsets)
        self.label_copies: list[dict[int, object]] = []
        self.n_labels = 0
        self.leaf_store: list = []  # packed leaf ciphertexts, finished (one level left: CKKS)
        self.leaf_totals: list | None = None  # per tree, bootstrap draws per node (predict)
        self.leaf_open: dict[int, object] = {}  # store index -> unfinished sum of leaves
        self.n_leaves = 0  # leaf positions handed out
        self.pending_leaves: list[tuple[int, OpenNode]] = []  # leaves decided by answers
        self.mask_shift = None  # the shift of the cached query masks
        self.next_tree = 0  # where the next byte-capped round starts
        self.state = "receiving labels"
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
        """The label rotation holding ``row``'s one-hot label in lane ``lane_position``."""
        pack, b = divmod(int(row), self.layout.rows_per_pack)
        return self.label_copies[pack][self.layout.copy_index(b, lane_position)]


class PrivateForestServer:
    """Encrypted random-forest server: holds sessions, answers protocol messages (bytes).

    Each session is created by a ``setup`` message carrying the client's public context, the
    GIPE cipher matrix and the forest parameters; the server never receives a secret key.
    :meth:`handle` takes one encoded message and returns the encoded reply; it raises
    :class:`~cipherforest.privacy.protocol.ProtocolError` for anything invalid, leaving the
    session unchanged.

    Parameters
    ----------
    n_jobs : int or None, default=None
        Worker processes per tree level (trees are split among them): None means 1, -1 all
        cores, as in scikit-learn.
    max_sessions : int, default=32
        Sessions held at once; a ``setup`` beyond it is refused.
    session_ttl : float, default=3600.0
        Seconds a session may stay idle (no message) before the server forgets it.
    max_rows_x_trees : int, default=10**8
        Largest ``n_samples × n_estimators`` a session may ask for: a level's open nodes
        hold up to that many row ids.
    """

    def __init__(self, n_jobs: int | None = None, *, max_sessions: int = 32,
                 session_ttl: float = 3600.0, max_rows_x_trees: int = 10**8):
        self._sessions: dict[str, _Session] = {}
        self.n_jobs = effective_n_jobs(n_jobs)
        self.max_sessions = max_sessions
        self.session_ttl = session_ttl
        self.max_rows_x_trees = max_rows_x_trees

    # ------------------------------------------------------------------ dispatch
    def handle(self, data: bytes) -> bytes:
        """Process one request message and return the reply message (both as bytes)."""
        started = time.perf_counter()
        self._expire_idle_sessions()
        message = decode_message(data)
        handlers = {"setup": self._setup, "labels": self._labels, "train": self._train,
                    "answer": self._answer, "predict": self._predict, "close": self._close}
        if message.kind not in handlers:
            raise ProtocolError(f"unknown request kind {message.kind!r}")
        session, reply = handlers[message.kind](message)
        out = encode_message(reply)
        session.stats.seconds += time.perf_counter() - started
        session.last_used = time.monotonic()
        session.stats.bytes_in += len(data)
        session.stats.bytes_out += len(out)
        if reply.kind == "query":
            session.stats.bytes_per_round.append(len(out))
        return out

    def _expire_idle_sessions(self) -> None:
        now = time.monotonic()
        for session_id in [sid for sid, session in self._sessions.items()
                           if now - session.last_used > self.session_ttl]:
            del self._sessions[session_id]

    def session_stats(self, session_id: str) -> ServerStats:
        return self._session(session_id).stats

    def tree_arrays(self, session_id: str) -> list[dict[str, np.ndarray]]:
        """Plaintext structure of each grown tree (cipher-space thresholds): the server's view."""
        session = self._session(session_id)
        return [tree.arrays() for tree in session.trees]

    def _session(self, session_id) -> _Session:
        if not isinstance(session_id, str) or session_id not in self._sessions:
            raise ProtocolError(f"unknown session {session_id!r}")
        return self._sessions[session_id]

    def _session_of(self, message: Message) -> _Session:
        session = self._session(message.meta.get("session"))
        fingerprint = message.meta.get("context")
        if fingerprint != session.context.fingerprint_public:
            raise ProtocolError("message was made under a different homomorphic context "
                                f"(fingerprint {fingerprint!r}, session uses "
                                f"{session.context.fingerprint_public!r})")
        return session

    # ------------------------------------------------------------------ setup and upload
    def _setup(self, message: Message):
        context_blob = message.blob_list("context")
        if len(context_blob) != 1:
            raise ProtocolError("setup: expected exactly one public context")
        try:
            context = PublicContext.from_bytes(context_blob[0])
        except HEError as exc:
            raise ProtocolError(f"setup: {exc}") from None
        X = message.array("X", "float64", 2)
        if X.shape[0] < 2 or X.shape[1] < 1 or not np.all(np.isfinite(X)):
            raise ProtocolError("setup: X must be a finite cipher matrix with >= 2 rows")
        n_classes = message.value("n_classes", int)
        if not 2 <= n_classes <= context.n_slots // 4:
            raise ProtocolError(f"setup: n_classes={n_classes} out of range")
        pack_rows = message.meta.get("label_pack_rows")
        if pack_rows is not None and (isinstance(pack_rows, bool) or not isinstance(
                pack_rows, int) or pack_rows < 1):
            raise ProtocolError(f"setup: label_pack_rows must be None or a positive integer, "
                                f"got {pack_rows!r}")
        layout = BlockLayout(context.scheme, context.n_slots, n_classes, X.shape[0], pack_rows)
        if not context.has_rotation(layout.stride):
            raise ProtocolError(f"setup: the public context lacks Galois keys for rotations "
                                f"by ±{layout.stride} slots (the label packs' lane width)")
        spec = ForestSpec.from_meta(message.meta, X.shape[0], X.shape[1])
        if X.shape[0] * spec.n_estimators > self.max_rows_x_trees:
            raise ProtocolError(f"setup: {X.shape[0]} rows × {spec.n_estimators} trees exceeds "
                                f"this server's limit of {self.max_rows_x_trees}")
        if len(self._sessions) >= self.max_sessions:
            raise ProtocolError(f"setup: the server holds its maximum of {self.max_sessions} "
                                "sessions; close one or wait for idle ones to expire")
        session = _Session(secrets.token_hex(16), context, X, n_classes, spec, layout)
        self._sessions[session.id] = session
        reply = Message("session", {"session": session.id, "n_labels": X.shape[0],
                                    "max_label_chunk": _MAX_LABEL_CHUNK,
                                    "rows_per_pack": session.layout.rows_per_pack})
        return session, reply

    def _labels(self, message: Message):
        """A chunk of label packs (``rows_per_pack`` rows each, the last pack fewer): each is
        validated, then expanded into its lane rotations (one key switch per rotation)."""
        session = self._session_of(message)
        if session.state != "receiving labels":
            raise ProtocolError(f"labels: session is {session.state}, not receiving labels")
        start = message.value("start", int)
        if start != session.n_labels:
            raise ProtocolError(f"labels: chunk starts at row {start}, expected row "
                                f"{session.n_labels} (chunks must arrive in order, once)")
        blobs = message.blob_list("labels")
        if not blobs or len(blobs) > _MAX_LABEL_CHUNK:
            raise ProtocolError(f"labels: a chunk holds 1..{_MAX_LABEL_CHUNK} label packs")
        m = session.layout.rows_per_pack
        n_rows = session.X.shape[0]
        covered = min(start + len(blobs) * m, n_rows)
        if start + (len(blobs) - 1) * m >= n_rows:
            raise ProtocolError(f"labels: {len(blobs)} packs of {m} rows from row {start} "
                                f"exceed the {n_rows} rows")
        context = session.context
        loaded = []
        for i, blob in enumerate(blobs):
            try:
                loaded.append(context.load_fresh_ciphertext(blob))
            except HEError as exc:
                first = start + i * m
                raise ProtocolError(f"labels: pack {i} (rows {first}-"
                                    f"{min(first + m, n_rows) - 1}): {exc}") from None
        for pack in loaded:
            session.label_copies.append(_lane_rotations(context, session.layout, pack))
        session.n_labels = covered
        return session, Message("ack", {"received": covered})

    def _train(self, message: Message):
        session = self._session_of(message)
        if session.state != "receiving labels" or session.n_labels != session.X.shape[0]:
            raise ProtocolError(f"train: {session.n_labels} of {session.X.shape[0]} "
                                f"labels received; session is {session.state}")
        if session.spec.split_selection == "blind":
            return session, self._train_label_blind(session)
        reply = self._next_query(session)
        if reply.kind == "query":
            session.state = "training"
        return session, reply

    def _train_label_blind(self, session: _Session) -> Message:
        """Grow every tree from the ciphers alone and sum each leaf's label ciphertexts:
        no query round, nothing label-dependent in the server's view."""
        leaf_jobs = session.growth.grow_label_blind()
        leaves, _, _ = self._compute_level(session, leaf_jobs, [], 0)
        for (t, node), leaf in zip(leaf_jobs, leaves, strict=True):
            session.trees[t].leaves[node.node_id] = leaf
        _finish_training(session)
        return Message("trained", {"session": session.id, "rounds": 0,
                                   "n_leaves": len(leaf_jobs)})

    # ------------------------------------------------------------------ one level
    def _next_query(self, session: _Session) -> Message:
        """Plan the open nodes, finish leaves, and pack the next query.

        By default a query covers the current level of every tree. With ``max_round_bytes``
        it covers the current levels of as many trees (taken in turn) as fit in that many
        bytes, at least one tree; the other trees keep their plans for a later round.
        """
        plans: list[NodePlan] = []
        leaf_jobs: list[tuple[int, OpenNode]] = []
        n_trees = len(session.trees)
        blocks = nodes = 0
        for step in range(n_trees):
            t = (session.next_tree + step) % n_trees
            tree = session.trees[t]
            if not tree.open:
                continue
            open_before = list(tree.open)
            tree_plans, rule_leaves = session.growth.plan_tree(t)
            tree_blocks = sum(p.n_candidates + 1 for p in tree_plans)
            if plans and not self._round_fits(session, blocks + tree_blocks,
                                              nodes + len(tree_plans)):
                # Left for a later round as it was: between messages every tree's state is
                # its open nodes (what a restored session re-plans), never a half-made plan.
                tree.open = open_before
                session.next_tree = t
                break
            tree_leaves = [(t, node) for node in rule_leaves]
            blocks += tree_blocks
            nodes += len(tree_plans)
            plans.extend(tree_plans)
            leaf_jobs.extend(tree_leaves)
        else:
            session.next_tree = 0
        leaf_jobs.extend(session.pending_leaves)
        session.pending_leaves = []
        # Tree order: the query's block order and the workers' tree ranges agree.
        plans.sort(key=lambda p: p.tree)
        leaf_jobs.sort(key=lambda job: job[0])
        shift = 0
        if plans and session.context.scheme == "ckks":
            max_weight = max(plan.weight for plan in plans)
            shift = max(0, math.ceil(math.log2(max_weight / _CKKS_MAX_SCALED_COUNT)))
        if shift != session.mask_shift:  # masks of another shift will not be used again
            session.context.clear_masks()
            session.mask_shift = shift
        leaves, blobs, positions = self._compute_level(session, leaf_jobs, plans, shift)
        for (t, node), leaf in zip(leaf_jobs, leaves, strict=True):
            session.trees[t].leaves[node.node_id] = leaf
        if not plans:  # every tree was visited and none has an open node left
            _finish_training(session)
            session.plans = []
            return Message("trained", {"session": session.id, "rounds": session.round,
                                       "n_leaves": sum(len(t.leaves) for t in session.trees)})
        session.round += 1
        session.query_token = secrets.token_hex(8)
        session.plans = plans
        session.stats.rounds += 1
        session.stats.query_ciphertexts += len(blobs)
        n_cands = np.array([p.n_candidates for p in plans], dtype=np.int64)
        session.stats.candidates += int(n_cands.sum())
        left_weight = np.array([c.left_weight for p in plans for cs in p.candidates for c in cs],
                               dtype=np.int64)
        meta = {"session": session.id, "round": session.round, "token": session.query_token,
                "shift": shift, "block_size": session.block_size,
                "blocks_per_ciphertext": session.blocks_per_ciphertext}
        arrays = {
            "tree": np.array([p.tree for p in plans], dtype=np.int64),
            "node": np.array([p.node.node_id for p in plans], dtype=np.int64),
            "weight": np.array([p.weight for p in plans], dtype=np.int64),
            "tree_weight": np.array([session.trees[p.tree].total_weight for p in plans],
                                    dtype=np.int64),
            "n_candidates": n_cands,
            "left_weight": left_weight,
            "block_position": np.asarray(positions, dtype=np.int64),
        }
        return Message("query", meta, arrays, {"squares": blobs})

    def _round_fits(self, session: _Session, n_blocks: int, n_nodes: int) -> bool:
        """Whether a query of ``n_blocks`` blocks for ``n_nodes`` nodes stays within
        ``max_round_bytes`` (always, without a cap)."""
        cap = session.spec.max_round_bytes
        if cap is None:
            return True
        # A query ciphertext sits on the last prime: 2 polynomials of N 64-bit words; each
        # worker process may leave one ciphertext partly filled. (Node counted as a block:
        # the cap errs on the safe side.)
        ciphertext_bytes = 2 * 8 * session.context.n_slots * (
            2 if session.context.scheme == "ckks" else 1) + 128
        n_ciphertexts = -(-n_blocks // session.blocks_per_ciphertext) + self.n_jobs - 1
        metadata = 8 * n_blocks + 56 * n_nodes + 8192  # per-candidate/node arrays, header
        return n_ciphertexts * ciphertext_bytes + metadata <= cap

    def _compute_level(self, session: _Session, leaf_jobs, plans, shift):
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
        n_jobs = min(self.n_jobs, len(session.trees))
        work = (sum(p.node.samples.shape[0] * len(p.candidates) for p in plans)
                + sum(node.samples.shape[0] for _, node, _ in leaf_jobs))
        bounds = [(0, len(session.trees))]
        if n_jobs > 1 and work >= _MIN_PARALLEL_WORK:
            bounds = _tree_ranges(session, leaf_jobs, plans, n_jobs)
        if len(bounds) == 1:
            parts = [_level_part(session, leaf_jobs, plans, shift, serialize=False)]
        else:
            # Encode the lane masks once here: masks a worker encodes die with the worker.
            _LanePacker(session, shift).encode_all_masks()
            tasks = [([j for j in leaf_jobs if lo <= j[0] < hi],
                      [p for p in plans if lo <= p.tree < hi]) for lo, hi in bounds]
            global _FORK_STATE
            _FORK_STATE = (session, tasks, shift)
            try:
                # The parent takes the first range itself: one process fewer holding private
                # pages (the summed memory peak is during these levels), nothing serialised.
                with level_worker_pool(len(tasks) - 1) as pool:
                    forked = pool.map_async(_level_part_in_worker, range(1, len(tasks)))
                    own = _level_part(session, *tasks[0], shift, serialize=False)
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
        _finish_leaf_store(session, everything=False)
        return leaves, blobs, positions

    # ------------------------------------------------------------------ answers
    def _answer(self, message: Message):
        session = self._session_of(message)
        if session.state != "training":
            raise ProtocolError(f"answer: session is {session.state}, no query is open")
        round_ = message.value("round", int)
        if round_ < session.round:
            raise ProtocolError(f"answer for round {round_} replayed: round {round_} was "
                                f"already answered, the open query is round {session.round}")
        if round_ != session.round or message.value("token", str) != session.query_token:
            raise ProtocolError(f"answer for round {round_} does not match the open query "
                                f"(round {session.round})")
        trees = message.array("tree", "int64", 1)
        nodes = message.array("node", "int64", 1)
        choices = message.array("choice", "int64", 1)
        plans = session.plans
        if not (trees.shape[0] == nodes.shape[0] == choices.shape[0]):
            raise ProtocolError("answer: tree, node and choice arrays differ in length")
        expected = {(p.tree, p.node.node_id): i for i, p in enumerate(plans)}
        order = np.full(len(plans), -1, dtype=np.int64)
        for k, key in enumerate(zip(trees.tolist(), nodes.tolist(), strict=True)):
            i = expected.get(key)
            if i is None:
                raise ProtocolError(f"answer names node {key[1]} of tree {key[0]}, which is "
                                    f"not an open node of round {session.round}")
            if order[i] >= 0:
                raise ProtocolError(f"answer names node {key[1]} of tree {key[0]} twice")
            order[i] = k
        if (order < 0).any():
            i = int(np.flatnonzero(order < 0)[0])
            raise ProtocolError(f"answer misses node {plans[i].node.node_id} of tree "
                                f"{plans[i].tree}")
        decided = choices[order]
        for plan, choice in zip(plans, decided.tolist(), strict=True):
            n_cands = plan.n_candidates
            if not -1 <= choice < n_cands:
                raise ProtocolError(f"answer: node {plan.node.node_id} of tree {plan.tree} has "
                                    f"{n_cands} candidates, choice {choice} is not one")
        # Everything checked: apply.
        for plan in session.growth.apply_level(plans, decided.tolist()):
            _make_leaf(session, plan.tree, plan.node)
        return session, self._next_query(session)

    def _close(self, message: Message):
        """Forget a session: its ciphertexts, trees and leaves."""
        session = self._session_of(message)
        del self._sessions[session.id]
        return session, Message("closed", {"session": session.id})

    # ------------------------------------------------------------------ prediction
    def _predict(self, message: Message):
        """Route the rows through every tree and reply with either

        * ``reply="sums"`` (asked for, and possible: CKKS with the giant-step key): per test
          row, its leaves' class frequencies summed over the trees, a few ciphertexts
          (:mod:`._row_sums`); or
        * ``reply="leaves"``: the leaf-store ciphertexts the rows reach and, per (row, tree),
          the leaf's position among those ciphertexts' leaves and its bootstrap draws
          (the client rounds CKKS frequencies times draws to exact counts).
        """
        session = self._session_of(message)
        if session.state != "trained":
            raise ProtocolError(f"predict: session is {session.state}, not trained")
        X = message.array("X", "float64", 2)
        if X.shape[1] != session.X.shape[1] or not np.all(np.isfinite(X)):
            raise ProtocolError(f"predict: X must be finite with {session.X.shape[1]} columns")
        asked = message.meta.get("reply", "leaves")
        if asked not in ("sums", "leaves"):
            raise ProtocolError(f"predict: reply must be 'sums' or 'leaves', not {asked!r}")
        layout, context = session.layout, session.context
        reached = np.empty((X.shape[0], len(session.trees)), dtype=np.int64)
        leaf_ids = [tree.apply(X) for tree in session.trees]
        for t, tree in enumerate(session.trees):
            position = np.full(len(tree.left), -1, dtype=np.int64)
            position[list(tree.leaves)] = list(tree.leaves.values())
            reached[:, t] = position[leaf_ids[t]]
        meta = {"session": session.id, "n_rows": X.shape[0], "n_trees": len(session.trees)}
        if asked == "sums" and can_sum_rows(context, layout, session.leaf_store):
            sums = row_sum_ciphertexts(context, layout, session.leaf_store, reached)
            return session, Message(
                "scores", {**meta, "reply": "sums", "rows_per_sum": layout.rows_per_sum}, {},
                {"sums": [context.dump_ciphertext(ct) for ct in sums]})
        per_ct = layout.leaves_per_ciphertext
        stores, local = np.unique(reached // per_ct, return_inverse=True)
        positions = local.reshape(reached.shape) * per_ct + reached % per_ct
        blobs = [context.dump_ciphertext(context.last_level(session.leaf_store[int(i)]))
                 for i in stores]
        totals = _leaf_totals(session)
        draws = np.stack([totals[t][leaf_ids[t]] for t in range(len(session.trees))], axis=1)
        return session, Message("scores", {**meta, "reply": "leaves",
                                           "leaves_per_ciphertext": per_ct},
                                {"leaf": positions.astype(np.int32),
                                 "draws": draws.astype(np.int32)}, {"leaves": blobs})


def _leaf_totals(session: _Session) -> list[np.ndarray]:
    """Per tree and node id, the bootstrap draws of the training rows reaching the node
    (public to the server: the rows and their seeded weights); computed once per session.
    A leaf reply sends them: the client turns CKKS frequencies back into exact counts."""
    if session.leaf_totals is None:
        session.leaf_totals = [
            np.bincount(tree.apply(session.X), weights=session.growth.weights(t),
                        minlength=len(tree.left))
            for t, tree in enumerate(session.trees)]
    return session.leaf_totals


# ---------------------------------------------------------------------- encrypted sums
def _lane_rotations(context: PublicContext, layout: BlockLayout, pack) -> dict[int, object]:
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


def _add_rows(session: _Session, weights: np.ndarray, rows: np.ndarray, lane: int, acc=None):
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


def _make_leaf(session: _Session, tree: int, node: OpenNode) -> None:
    """Queue a leaf: its counts go to the leaf store with the next level's work."""
    session.pending_leaves.append((tree, node))


_FORK_STATE = None  # (session, tasks, shift) inherited by forked level workers
_MIN_PARALLEL_WORK = 2_000  # row-visits below which forking costs more than it saves


def _level_part(session: _Session, leaf_jobs, plans, shift: int, serialize: bool):
    """For some trees of one level: the leaves' counts added into their leaf-store
    ciphertexts (unfinished partial sums by store index) and the packed query ciphertexts
    (with each block's position)."""
    context, layout = session.context, session.layout
    per_store = layout.leaves_per_ciphertext
    store: dict[int, object] = {}
    ckks = context.scheme == "ckks"
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
    packer = _LanePacker(session, shift)
    blobs, positions = packer.run(plans)
    if serialize:
        store = {index: context.dump_ciphertext(ct) for index, ct in store.items()}
    return store, blobs, positions


def _finish_leaf_store(session: _Session, everything: bool) -> None:
    """Finish (rescale, switch to the last level) the leaf-store ciphertexts whose positions
    are all handed out, or all of them at the end of training."""
    per_store = session.layout.leaves_per_ciphertext
    complete = -(-session.n_leaves // per_store) if everything else \
        session.n_leaves // per_store
    while len(session.leaf_store) < complete:
        index = len(session.leaf_store)
        session.leaf_store.append(
            session.context.finish_leaf_store(session.leaf_open.pop(index)))


def _finish_training(session: _Session) -> None:
    """The last leaves into the store; then forget what only training needs: the label
    rotations (one ciphertext per training row, most of a session's memory) and the masks.
    Prediction needs the trees and the leaf store alone."""
    _finish_leaf_store(session, everything=True)
    session.state = "trained"
    session.label_copies = []
    session.context.clear_masks()


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
    return _level_part(session, leaf_jobs, plans, shift, serialize=True)


def _tree_ranges(session: _Session, leaf_jobs, plans, n_parts: int) -> list[tuple[int, int]]:
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


class _LanePacker:
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

    def __init__(self, session: _Session, shift: int):
        self.session = session
        self.context = session.context
        self.layout = session.layout
        self.value = 2.0 ** -shift if self.context.scheme == "ckks" else 1
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
