"""The server of the encrypted random forest: grows trees on GIPE ciphers and CKKS/BFV labels.

The server holds the GIPE cipher matrix (integers it may compare), one label ciphertext per
training row and the client's *public* homomorphic context; it never sees a label or a key.
It grows every tree of the forest level by level (docs/private_forest.md, the paper's section 4):

1. For each open node of each tree it draws the candidate features and enumerates the
   candidate thresholds exactly as :class:`~cipherforest.ensemble.RandomForestClassifier`
   does on the same ciphers (same bootstrap counts, same per-node feature draws, same
   midpoints or histogram bins, same ``min_samples_leaf`` filter): everything but the
   impurities is plaintext to the server.
2. Running sums of label ciphertexts along the sorted rows give each candidate's left class
   counts ``L`` (``R = T - L``). Each candidate gets a block of slots (``_blocks``: ``τ``
   complex slots ``L + iR`` in CKKS, ``2τ`` integer slots ``L | R`` in BFV), filled by
   multiplying with a pre-encoded block mask; the node's ``T`` goes to its own block and to
   the ``R`` parts of its candidates' blocks. Squaring the ciphertext (one multiplication for
   all its blocks) gives the client ``ΣL²`` and ``ΣR²`` of every candidate.
3. All trees' blocks of one level travel in one message; the client answers each node with
   a candidate index or "leaf". A leaf keeps the encrypted class counts ``T`` of its rows.

Prediction routes GIPE-encrypted test rows through every tree and returns each (row, tree)
leaf count vector packed ``n_slots / τ`` per ciphertext; the client decrypts and averages.

Protocol state changes only after a message has been validated completely, so a rejected
message (tampered, truncated, foreign, for an unknown node, for another round, replayed)
leaves the session as it was.
"""

from __future__ import annotations

import math
import multiprocessing
import secrets
import time
from dataclasses import dataclass, field

import numpy as np

from ..ensemble._base import effective_n_jobs
from ._blocks import BlockLayout
from ._plan import ForestGrowth, ForestSpec, NodePlan, OpenNode
from .he import HEError, PublicContext
from .protocol import Message, ProtocolError, decode_message, encode_message

__all__ = ["PrivateForestServer"]

# CKKS: a squared block value must stay below 2^(60 - 40 - 1) on the last prime; masks carry
# 2^-shift so that (v * count)^2 <= 2^17 even for the heaviest node.
_CKKS_MAX_SCALED_COUNT = 2.0 ** 8.5
_MAX_LABEL_CHUNK = 4096


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
                 n_classes: int, spec: ForestSpec):
        self.id = session_id
        self.context = context
        self.X = X
        self.n_classes = n_classes
        self.spec = spec
        self.labels: list = []
        self.plan_cache: dict[int, tuple[list, list]] = {}  # tree -> (plans, leaf jobs)
        self.next_tree = 0  # where the next byte-capped round starts
        self.state = "receiving labels"
        self.round = 0
        self.query_token = ""
        self.plans: list[NodePlan] = []
        self.stats = ServerStats()
        self.last_used = time.monotonic()
        self.growth = ForestGrowth(X, spec)
        self.trees = self.growth.trees
        layout = BlockLayout(context.scheme, context.n_slots, n_classes)
        self.block_size = layout.block_size
        self.blocks_per_ciphertext = layout.per_ciphertext


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
        if not 2 <= n_classes <= context.n_slots // 2:
            raise ProtocolError(f"setup: n_classes={n_classes} out of range")
        spec = ForestSpec.from_meta(message.meta, X.shape[0], X.shape[1])
        if X.shape[0] * spec.n_estimators > self.max_rows_x_trees:
            raise ProtocolError(f"setup: {X.shape[0]} rows × {spec.n_estimators} trees exceeds "
                                f"this server's limit of {self.max_rows_x_trees}")
        if len(self._sessions) >= self.max_sessions:
            raise ProtocolError(f"setup: the server holds its maximum of {self.max_sessions} "
                                "sessions; close one or wait for idle ones to expire")
        session = _Session(secrets.token_hex(16), context, X, n_classes, spec)
        self._sessions[session.id] = session
        reply = Message("session", {"session": session.id, "n_labels": X.shape[0],
                                    "max_label_chunk": _MAX_LABEL_CHUNK})
        return session, reply

    def _labels(self, message: Message):
        session = self._session_of(message)
        if session.state != "receiving labels":
            raise ProtocolError(f"labels: session is {session.state}, not receiving labels")
        start = message.value("start", int)
        if start != len(session.labels):
            raise ProtocolError(f"labels: chunk starts at row {start}, expected row "
                                f"{len(session.labels)} (chunks must arrive in order, once)")
        blobs = message.blob_list("labels")
        if not blobs or len(blobs) > _MAX_LABEL_CHUNK:
            raise ProtocolError(f"labels: a chunk holds 1..{_MAX_LABEL_CHUNK} ciphertexts")
        if start + len(blobs) > session.X.shape[0]:
            raise ProtocolError(f"labels: {start + len(blobs)} labels for "
                                f"{session.X.shape[0]} rows")
        loaded = []
        for i, blob in enumerate(blobs):
            try:
                loaded.append(session.context.prepare(
                    session.context.load_fresh_ciphertext(blob)))
            except HEError as exc:
                raise ProtocolError(f"labels: ciphertext of row {start + i}: {exc}") from None
        session.labels.extend(loaded)
        return session, Message("ack", {"received": len(session.labels)})

    def _train(self, message: Message):
        session = self._session_of(message)
        if session.state != "receiving labels" or len(session.labels) != session.X.shape[0]:
            raise ProtocolError(f"train: {len(session.labels)} of {session.X.shape[0]} "
                                f"label ciphertexts received; session is {session.state}")
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
        session.state = "trained"
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
            if not tree.open and t not in session.plan_cache:
                continue
            if t not in session.plan_cache:
                tree_plans, rule_leaves = session.growth.plan_tree(t)
                session.plan_cache[t] = (tree_plans, [(t, node) for node in rule_leaves])
            tree_plans, tree_leaves = session.plan_cache[t]
            tree_blocks = sum(p.n_candidates + 1 for p in tree_plans)
            if plans and not self._round_fits(session, blocks + tree_blocks,
                                              nodes + len(tree_plans)):
                session.next_tree = t
                break
            del session.plan_cache[t]
            blocks += tree_blocks
            nodes += len(tree_plans)
            plans.extend(tree_plans)
            leaf_jobs.extend(tree_leaves)
        else:
            session.next_tree = 0
        # Tree order: the query's block order and the workers' tree ranges agree.
        plans.sort(key=lambda p: p.tree)
        leaf_jobs.sort(key=lambda job: job[0])
        shift = 0
        if plans and session.context.scheme == "ckks":
            max_weight = max(plan.weight for plan in plans)
            shift = max(0, math.ceil(math.log2(max_weight / _CKKS_MAX_SCALED_COUNT)))
        leaves, blobs, blocks_used = self._compute_level(session, leaf_jobs, plans, shift)
        for (t, node), leaf in zip(leaf_jobs, leaves, strict=True):
            session.trees[t].leaves[node.node_id] = leaf
        if not plans:  # every tree was visited and none has an open node left
            session.state = "trained"
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
            "blocks_used": np.asarray(blocks_used, dtype=np.int64),
        }
        return Message("query", meta, arrays, {"squares": blobs})

    def _round_fits(self, session: _Session, n_blocks: int, n_nodes: int) -> bool:
        """Whether a query of ``n_blocks`` blocks for ``n_nodes`` nodes stays within
        ``max_round_bytes`` (always, without a cap)."""
        cap = session.spec.max_round_bytes
        if cap is None:
            return True
        # A query ciphertext sits on the last prime: 2 polynomials of N 64-bit words; each
        # worker process may leave one ciphertext partly filled.
        ciphertext_bytes = 2 * 8 * session.context.n_slots * (
            2 if session.context.scheme == "ckks" else 1) + 128
        n_ciphertexts = -(-n_blocks // session.blocks_per_ciphertext) + self.n_jobs - 1
        metadata = 8 * n_blocks + 56 * n_nodes + 8192  # per-candidate/node arrays, header
        return n_ciphertexts * ciphertext_bytes + metadata <= cap

    def _compute_level(self, session: _Session, leaf_jobs, plans, shift):
        """Encrypted work of one level: leaf totals and the packed, squared query blocks.

        Trees are independent, so with ``n_jobs > 1`` contiguous ranges of trees go to forked
        worker processes (they inherit the session; SEAL holds the GIL). Each returns its
        ciphertexts serialised; blocks stay in tree order, so the query order is unchanged.
        """
        n_jobs = min(self.n_jobs, len(session.trees))
        work = (sum(p.node.samples.shape[0] * (len(p.candidates) + 1) for p in plans)
                + sum(node.samples.shape[0] for _, node in leaf_jobs))
        if n_jobs <= 1 or work < _MIN_PARALLEL_WORK:
            return _level_part(session, leaf_jobs, plans, shift, serialize=False)
        # Encode the block masks once here: masks a worker encodes die with the worker.
        _SquarePacker(session.context, session.n_classes, shift).encode_all_masks()
        bounds = _tree_ranges(session, leaf_jobs, plans, n_jobs)
        tasks = [([j for j in leaf_jobs if lo <= j[0] < hi],
                  [p for p in plans if lo <= p.tree < hi]) for lo, hi in bounds]
        global _FORK_STATE
        _FORK_STATE = (session, tasks, shift)
        try:
            with multiprocessing.get_context("fork").Pool(len(tasks)) as pool:
                parts = pool.map(_level_part_in_worker, range(len(tasks)))
        finally:
            _FORK_STATE = None
        leaves, blobs, used = [], [], []
        for part_leaves, part_blobs, part_used in parts:
            leaves.extend(session.context.load_ciphertext(b) for b in part_leaves)
            blobs.extend(part_blobs)
            used.extend(part_used)
        leaves = [session.context.prepare(ct) for ct in leaves]
        return leaves, blobs, used

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
        session = self._session_of(message)
        if session.state != "trained":
            raise ProtocolError(f"predict: session is {session.state}, not trained")
        X = message.array("X", "float64", 2)
        if X.shape[1] != session.X.shape[1] or not np.all(np.isfinite(X)):
            raise ProtocolError(f"predict: X must be finite with {session.X.shape[1]} columns")
        context = session.context
        tau = session.n_classes
        per_ct = context.n_slots // tau
        n_trees = len(session.trees)
        leaves = np.stack([tree.apply(X) for tree in session.trees], axis=1)  # (rows, trees)
        blobs, acc, filled = [], None, 0
        for r in range(X.shape[0]):
            for t in range(n_trees):
                if filled == per_ct:
                    blobs.append(context.dump_ciphertext(context.finish_plain(acc)))
                    acc, filled = None, 0
                leaf_ct = session.trees[t].leaves[int(leaves[r, t])]
                values = np.zeros(context.n_slots)
                values[filled * tau: (filled + 1) * tau] = 1
                plain = context.mask(("row", tau, filled), values, like=leaf_ct)
                product = context.multiply_mask(leaf_ct, plain)
                if acc is None:
                    acc = product
                else:
                    context.add_inplace(acc, product)
                filled += 1
        if acc is not None:
            blobs.append(context.dump_ciphertext(context.finish_plain(acc)))
        meta = {"session": session.id, "n_rows": X.shape[0], "n_trees": n_trees,
                "block_size": tau}
        return session, Message("scores", meta, {}, {"scores": blobs})


# ---------------------------------------------------------------------- encrypted sums
class _WeightedLabels:
    """Label ciphertexts of one tree's rows, each multiplied by its bootstrap count.

    A row drawn ``k`` times would cost ``k`` additions in every running sum; its ``k``-fold
    ciphertext is built once (``k - 1`` additions) and reused by every sum of the level.
    """

    def __init__(self, session: _Session, t: int):
        self.labels = session.labels
        self.weights = session.growth.weights(t)
        self.context = session.context
        self.multiples: dict[int, object] = {}

    def __getitem__(self, row: int):
        count = int(self.weights[row])
        if count == 1:
            return self.labels[row]
        ct = self.multiples.get(row)
        if ct is None:
            ct = self.context.copy(self.labels[row])
            for _ in range(count - 1):
                self.context.add_inplace(ct, self.labels[row])
            self.multiples[row] = ct
        return ct

    def running_sum(self, rows, acc=None):
        """``acc`` plus the weighted labels of ``rows`` (a new ciphertext if ``acc`` is None)."""
        for row in rows:
            if acc is None:
                acc = self.context.copy(self[row])
            else:
                self.context.add_inplace(acc, self[row])
        return acc


def _make_leaf(session: _Session, t: int, node: OpenNode,
               labels: _WeightedLabels | None = None) -> None:
    session.trees[t].leaves[node.node_id] = _leaf_ciphertext(session, t, node, labels)


def _leaf_ciphertext(session: _Session, t: int, node: OpenNode,
                     labels: _WeightedLabels | None = None):
    labels = _WeightedLabels(session, t) if labels is None else labels
    return session.context.store_leaf(labels.running_sum(node.samples.tolist()))


_FORK_STATE = None  # (session, tasks, shift) inherited by forked level workers
_MIN_PARALLEL_WORK = 2_000  # row-visits below which forking costs more than it saves


def _level_part(session: _Session, leaf_jobs, plans, shift: int, serialize: bool):
    """Leaf ciphertexts and packed query ciphertexts for some trees of one level."""
    per_tree: dict[int, _WeightedLabels] = {}

    def labels_of(t: int) -> _WeightedLabels:
        if t not in per_tree:
            per_tree.clear()  # jobs come in tree order: free the previous tree's multiples
            per_tree[t] = _WeightedLabels(session, t)
        return per_tree[t]

    leaves = [_leaf_ciphertext(session, t, node, labels_of(t))
              for t, node in leaf_jobs]
    if serialize:
        leaves = [session.context.dump_ciphertext(ct) for ct in leaves]
    packer = _SquarePacker(session.context, session.n_classes, shift)
    for plan in plans:
        _pack_node(plan, labels_of(plan.tree), packer)
    blobs, used = packer.finish()
    return leaves, blobs, used


def _level_part_in_worker(index: int):
    session, tasks, shift = _FORK_STATE
    leaf_jobs, plans = tasks[index]
    return _level_part(session, leaf_jobs, plans, shift, serialize=True)


def _tree_ranges(session: _Session, leaf_jobs, plans, n_parts: int) -> list[tuple[int, int]]:
    """Split the trees into ``n_parts`` contiguous ranges of about equal encrypted work."""
    cost = np.zeros(len(session.trees))
    for t, node in leaf_jobs:
        cost[t] += node.samples.shape[0]
    for p in plans:
        cost[p.tree] += p.node.samples.shape[0] * (len(p.candidates) + 1)
    cumulative = np.cumsum(cost)
    cuts = np.searchsorted(cumulative, cumulative[-1] * np.arange(1, n_parts) / n_parts)
    edges = [0, *sorted(set(int(c) + 1 for c in cuts)), len(session.trees)]
    edges = sorted(set(min(e, len(session.trees)) for e in edges))
    return [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:], strict=True) if hi > lo]


def _pack_node(plan: NodePlan, labels: _WeightedLabels, packer: _SquarePacker) -> None:
    """Blocks of one node: its candidates in the forest's order, then its total ``T``.

    ``T`` is the end of the first feature's running sum, so it costs no pass of its own.
    """
    packer.begin_node()
    for order, cands in zip(plan.orders, plan.candidates, strict=True):
        acc, done = None, 0
        for cand in cands:
            acc = labels.running_sum(order[done: cand.end].tolist(), acc)
            done = cand.end
            packer.add_candidate(acc)
        if packer.total is None:
            packer.set_total(labels.running_sum(order[done:].tolist(), acc))
    packer.end_node()


class _SquarePacker:
    """Packs candidate (L, R) blocks and node totals into ciphertexts, then squares them.

    A candidate's ``R = T - L`` needs the node total ``T``, known only once the node's first
    running sum ends; ciphertexts filled before that wait in ``pending``.
    """

    def __init__(self, context: PublicContext, n_classes: int, shift: int):
        self.context = context
        self.layout = BlockLayout(context.scheme, context.n_slots, n_classes)
        self.per_ct = self.layout.per_ciphertext
        self.value = 2.0 ** -shift if context.scheme == "ckks" else 1
        self.shift = shift
        self.blobs: list[bytes] = []
        self.used: list[int] = []
        self.acc = None
        self.filled = 0
        self.total = None
        self.total_mask = None  # how the node's T enters the current ciphertext's blocks
        self.pending: list[tuple] = []  # (acc, total_mask, filled) waiting for T

    def _block_index(self) -> int:
        if self.filled == self.per_ct:
            self._close_ciphertext()
        index = self.filled
        self.filled += 1
        if self.total_mask is None:
            self.total_mask = self.layout.empty_mask()
        return index

    def _add(self, product) -> None:
        if self.acc is None:
            self.acc = product
        else:
            self.context.add_inplace(self.acc, product)

    def _candidate_mask(self, index: int):
        return self.context.mask(("candidate", index, self.shift),
                                 self.layout.candidate_mask(index, self.value))

    def encode_all_masks(self) -> None:
        for index in range(self.per_ct):
            self._candidate_mask(index)

    def begin_node(self) -> None:
        self.total = None

    def add_candidate(self, left) -> None:
        index = self._block_index()
        self._add(self.context.multiply_mask(left, self._candidate_mask(index)))
        self.layout.add_total(self.total_mask, index, self.value, node_block=False)

    def set_total(self, total) -> None:
        """The node's ``T``: completes the waiting ciphertexts, in order."""
        self.total = total
        for acc, mask, filled in self.pending:
            self._finish(self._with_total(acc, mask), filled)
        self.pending = []

    def end_node(self) -> None:
        index = self._block_index()
        self.layout.add_total(self.total_mask, index, self.value, node_block=True)
        self.acc = self._with_total(self.acc, self.total_mask)
        self.total_mask = None
        self.total = None

    def _with_total(self, acc, mask):
        if mask is not None and mask.any():
            product = self.context.multiply_mask(self.total, self.context.encode_mask(mask))
            if acc is None:
                return product
            self.context.add_inplace(acc, product)
        return acc

    def _close_ciphertext(self) -> None:
        if self.total is None and self.total_mask is not None and self.total_mask.any():
            self.pending.append((self.acc, self.total_mask, self.filled))
        else:
            self._finish(self._with_total(self.acc, self.total_mask), self.filled)
        self.acc = None
        self.filled = 0
        self.total_mask = None

    def _finish(self, acc, filled: int) -> None:
        if acc is not None:
            squared = self.context.square(self.context.finish_sum(acc))
            self.blobs.append(self.context.dump_ciphertext(squared))
            self.used.append(filled)

    def finish(self) -> tuple[list[bytes], list[int]]:
        if self.pending:
            raise RuntimeError("a node was left without its total")
        self._close_ciphertext()
        return self.blobs, self.used
