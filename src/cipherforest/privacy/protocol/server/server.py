"""The server of the encrypted random forest: grows trees on GIPE ciphers and CKKS/BFV labels.

The server holds the GIPE cipher matrix (integers it may compare), the packed label
ciphertexts (many rows each, :mod:`...he.blocks`) and the client's *public* homomorphic context with
Galois keys for one rotation step; it never sees a label or a key.
It grows every tree of the forest level by level (docs/private_forest.md, the paper's section 4):

1. For each open node of each tree it draws the candidate features and enumerates the
   candidate thresholds exactly as :class:`~cipherforest.ensemble.RandomForestClassifier`
   does on the same ciphers (same bootstrap counts, same per-node feature draws, same
   midpoints or histogram bins, same ``min_samples_leaf`` filter): everything but the
   impurities is plaintext to the server.
2. Each candidate's left class counts ``L`` and each node's total ``T`` get a block of a
   query ciphertext (:mod:`...he.blocks`: two blocks per lane of slots). A running sum of label
   rotations along the node's rows sorted by a feature, bound to a lane, gives the
   feature's candidates' ``L`` one after the other (the lane's mask keeps them), and its
   end is ``T``. A feature's blocks fill one lane of consecutive query ciphertexts (lanes
   are filled column by column, a lane change rotates the sum along), so one sum serves
   many candidates. The client decrypts ``L`` and ``T`` per class and takes ``R = T - L``.
3. All trees' blocks of one level travel in one message; the client answers each node with
   a candidate index or "leaf". A leaf's encrypted class counts ``T`` (CKKS: frequencies)
   go to one slot block of the packed leaf store (:mod:`...he.blocks`); the encrypted
   work of a level is in :mod:`.level`.

A level is a sum over rows: with a Dask client the label rotations live in shards of rows on
the workers, each computes its partial sums, and the partials are added on the way back
(:mod:`.dask_levels`); otherwise this process holds them and may fork workers per level.

Prediction routes GIPE-encrypted test rows through every tree and returns the leaf-store
ciphertexts the rows reach plus each (row, tree)'s leaf position; the client decrypts the
store and averages.

Protocol state changes only after a message has been validated completely, so a rejected
message (tampered, truncated, foreign, for an unknown node, for another round, replayed)
leaves the session as it was.
"""

from __future__ import annotations

import math
import secrets
import time

import numpy as np

from ...._parallel import effective_n_jobs
from ...he import BlockLayout, HEError, PublicContext
from ..messages import Message, ProtocolError, decode_message, encode_message
from ..params import ForestSpec
from ..planner import NodePlan, OpenNode, plan_fields
from ..selections import selection
from .growth import leaf_rows
from .learners import SERVER_LEARNERS
from .level import CKKS_MAX_SCALED_COUNT, LocalLevels, store_order
from .row_sums import can_sum_rows, row_sum_ciphertexts
from .session import ServerSession, ServerStats
from .shards import ShardError
from .state import SessionState, apply_state, export_state, setup_message

__all__ = ["MAX_LABEL_CHUNK", "PrivateForestServer"]

MAX_LABEL_CHUNK = 64  # label packs per upload message



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
    dask_client : distributed.Client or str or None, default=None
        Run the label work on Dask (``pip install 'cipherforest[dask]'``): a client, or a
        scheduler address (``"tcp://host:8786"``) to connect to. Each session's label
        rotations are placed in shards of rows on the workers once, at upload; every level
        sums each shard's rows there and adds the partial sums on the way back
        (:mod:`.dask_levels`). ``n_jobs`` is then unused. None: this process does the work.

    Raises
    ------
    ImportError
        ``dask_client`` given without ``dask.distributed`` installed.
    OSError
        A scheduler address that cannot be reached.
    """

    def __init__(self, n_jobs: int | None = None, *, max_sessions: int = 32,
                 session_ttl: float = 3600.0, max_rows_x_trees: int = 10**8,
                 dask_client=None):
        self._sessions: dict[str, ServerSession] = {}
        self.n_jobs = effective_n_jobs(n_jobs)
        self.max_sessions = max_sessions
        self.session_ttl = session_ttl
        self.max_rows_x_trees = max_rows_x_trees
        if dask_client is None:
            self._levels = LocalLevels(self.n_jobs)
        else:
            try:
                from .dask_levels import DaskLevels  # dask is an optional extra
            except ImportError as exc:
                raise ImportError(f"dask_client needs dask.distributed ({exc}): "
                                  "pip install 'cipherforest[dask]'") from None
            self._levels = DaskLevels(dask_client)

    @property
    def levels(self):
        """What computes the training levels: this process and its forked workers
        (``LocalLevels``) or the Dask workers (``DaskLevels``, whose ``worker_timeout`` says
        how long a level waits for a worker to appear)."""
        return self._levels

    def close(self) -> None:
        """Forget every session (releasing its label shards) and, if this server connected
        to a scheduler address itself, close that Dask client."""
        for session_id in list(self._sessions):
            self.forget_session(session_id)
        self._levels.close()

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
        try:
            session, reply = handlers[message.kind](message)
        except ShardError:
            # A level the Dask workers could not finish leaves the session between
            # levels in memory: forget it (the service restores it from disk).
            self.forget_session(message.meta.get("session"))
            raise
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
        # (a copy of the items: a caller may forget a session from another thread)
        for session_id in [sid for sid, session in list(self._sessions.items())
                           if now - session.last_used > self.session_ttl]:
            self.forget_session(session_id)

    def session_stats(self, session_id: str) -> ServerStats:
        return self._session(session_id).stats

    def tree_arrays(self, session_id: str) -> list[dict[str, np.ndarray]]:
        """Plaintext structure of each grown tree (cipher-space thresholds): the server's view."""
        session = self._session(session_id)
        return [tree.arrays() for tree in session.trees]

    # ------------------------------------------------------------------ sessions
    def session(self, session_id: str) -> ServerSession:
        """The session ``session_id`` (:class:`ProtocolError` if the server has none)."""
        return self._session(session_id)

    @property
    def session_ids(self) -> list[str]:
        """The sessions held in memory."""
        return list(self._sessions)

    def has_session(self, session_id: str) -> bool:
        """Whether this server holds ``session_id`` in memory."""
        return session_id in self._sessions

    def forget_session(self, session_id: str) -> None:
        """Drop ``session_id`` if it is here (its storage deleted it, or it left memory),
        with its label rotations (here or on Dask workers)."""
        session = self._sessions.pop(session_id, None) if isinstance(session_id, str) else None
        if session is not None:
            session.labels.clear()

    def session_progress(self, session_id: str) -> dict:
        """Where a session stands (:meth:`ServerSession.progress`)."""
        return self._session(session_id).progress()

    def export_state(self, session_id: str,
                     skip_stores: frozenset | set | dict = frozenset()) -> SessionState:
        """The training state of ``session_id`` as plain arrays and bytes
        (:func:`.state.export_state`), for persistence."""
        return export_state(self._session(session_id), skip_stores)

    def setup_message(self, session_id: str, public_context: bytes) -> bytes:
        """A ``setup`` message recreating ``session_id``'s forest parameters and cipher
        matrix (:func:`.state.setup_message`)."""
        return setup_message(self._session(session_id), public_context)

    def restore_session(self, session_id: str, uploads: list[bytes],
                        state: SessionState | None) -> None:
        """Rebuild session ``session_id`` from its uploaded messages and exported state.

        Parameters
        ----------
        uploads : list of bytes
            The session's ``setup`` message followed by its ``labels`` messages, as
            received. A trained session may be restored from its setup alone (prediction
            needs no label).
        state : SessionState or None
            From :meth:`export_state` (with every finished store's bytes); None: the session
            had not started training.

        Raises
        ------
        ProtocolError
            If the uploads or the state do not describe a valid session (the server is then
            left without ``session_id``).
        """
        if not uploads:
            raise ProtocolError("restore: no setup message")
        if session_id in self._sessions:
            raise ProtocolError(f"restore: session {session_id!r} exists already")
        reply = decode_message(self.handle(uploads[0]), "session")
        session = self._sessions.pop(reply.value("session", str))
        session.id = session_id
        self._sessions[session_id] = session
        try:
            for message in uploads[1:]:
                self.handle(message)
            if state is not None:
                apply_state(session, state)
        except BaseException:
            self.forget_session(session_id)
            raise

    def _session(self, session_id) -> ServerSession:
        if not isinstance(session_id, str) or session_id not in self._sessions:
            raise ProtocolError(f"unknown session {session_id!r}")
        return self._sessions[session_id]

    def _session_of(self, message: Message) -> ServerSession:
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
        spec = ForestSpec.from_meta(message.meta, X.shape[0], X.shape[1])
        learner = SERVER_LEARNERS[spec.learner]
        if spec.split_selection not in learner.selections:
            raise ProtocolError(f"setup: a {learner.name} trains with split_selection in "
                                f"{learner.selections}, not {spec.split_selection!r}")
        # A learner without classes has a layout of two slots per row: unused, or (the
        # regressor's "paper" rounds) its scaled targets' statistics (y', y'²).
        n_classes = message.value("n_classes", int) if learner.needs_classes else 2
        if not 2 <= n_classes <= context.n_slots // 4:
            raise ProtocolError(f"setup: n_classes={n_classes} out of range")
        learner.check_setup(spec, n_classes)
        pack_rows = message.meta.get("label_pack_rows")
        if pack_rows is not None and (isinstance(pack_rows, bool) or not isinstance(
                pack_rows, int) or pack_rows < 1):
            raise ProtocolError(f"setup: label_pack_rows must be None or a positive integer, "
                                f"got {pack_rows!r}")
        layout = BlockLayout(context.scheme, context.n_slots, n_classes, X.shape[0], pack_rows)
        with_labels = message.meta.get("label_ciphertexts", True)
        round_counts = message.meta.get("round_counts", True)
        asks_rounds = selection(spec.split_selection).asks_rounds
        if not isinstance(round_counts, bool) or not (round_counts or asks_rounds):
            raise ProtocolError("setup: round_counts must be true, or false for a 'gini' or "
                                "'dp' session (whose client decides from its own counts)")
        if not isinstance(with_labels, bool) or not (
                with_labels or not (asks_rounds and round_counts)):
            raise ProtocolError("setup: label_ciphertexts must be true, or false for a "
                                "session whose client counts its own leaves ('rr', 'blind', "
                                "or 'gini'/'dp' with plan-only rounds: round_counts false)")
        if with_labels and not (learner.needs_classes or asks_rounds):
            raise ProtocolError(f"setup: a {learner.name} session takes no label "
                                "ciphertexts (label_ciphertexts must be false)")
        if not learner.needs_classes and asks_rounds and not (
                with_labels and round_counts and context.kind.approximate):
            raise ProtocolError(f"setup: a {learner.name}'s {spec.split_selection!r} rounds "
                                "sum CKKS target ciphertexts (ckks, label_ciphertexts and "
                                "round_counts true)")
        # Without label ciphertexts there is no homomorphic work, so no Galois key to need.
        if with_labels and not context.has_rotation(layout.stride):
            raise ProtocolError(f"setup: the public context lacks Galois keys for rotations "
                                f"by ±{layout.stride} slots (the label packs' lane width)")
        if with_labels and layout.parts > 1 and not context.has_rotation(
                layout.span * layout.stride, both_ways=False):
            raise ProtocolError(f"setup: the public context lacks the Galois key for "
                                f"rotations by {layout.span * layout.stride} slots (the "
                                f"label rotations' {layout.parts} parts)")
        max_count = context.kind.max_count
        if max_count is not None and spec.n_draws > max_count:
            raise ProtocolError(f"setup: {spec.n_draws} bootstrap draws per tree exceed the "
                                f"{max_count} a {context.scheme} class count holds exactly "
                                "(its plain modulus); draw fewer (max_samples)")
        if X.shape[0] * spec.n_estimators > self.max_rows_x_trees:
            raise ProtocolError(f"setup: {X.shape[0]} rows × {spec.n_estimators} trees exceeds "
                                f"this server's limit of {self.max_rows_x_trees}")
        if len(self._sessions) >= self.max_sessions:
            raise ProtocolError(f"setup: the server holds its maximum of {self.max_sessions} "
                                "sessions; close one or wait for idle ones to expire")
        randomized = self._randomized_labels(message, spec, X.shape[0], n_classes)
        session = ServerSession(secrets.token_hex(16), context, X, n_classes, spec, layout)
        session.randomized_labels = randomized
        session.label_ciphertexts = with_labels
        session.round_counts = round_counts and asks_rounds
        session.labels = self._levels.new_labels(context, layout, session.growth.keys,
                                                 context_blob[0])
        self._sessions[session.id] = session
        reply = Message("session", {"session": session.id, "n_labels": X.shape[0],
                                    "max_label_chunk": MAX_LABEL_CHUNK,
                                    "rows_per_pack": session.layout.rows_per_pack})
        return session, reply

    def _labels(self, message: Message):
        """A chunk of label packs (``rows_per_pack`` rows each, the last pack fewer): each is
        validated, then expanded into its lane rotations (one key switch per rotation),
        here or on the Dask worker holding its shard."""
        session = self._session_of(message)
        if not session.label_ciphertexts:
            raise ProtocolError("labels: this session takes no label ciphertexts (its client "
                                "counts its own leaves)")
        if session.state != "receiving labels":
            raise ProtocolError(f"labels: session is {session.state}, not receiving labels")
        start = message.value("start", int)
        if start != session.n_labels:
            raise ProtocolError(f"labels: chunk starts at row {start}, expected row "
                                f"{session.n_labels} (chunks must arrive in order, once)")
        blobs = message.blob_list("labels")
        if not blobs or len(blobs) > MAX_LABEL_CHUNK:
            raise ProtocolError(f"labels: a chunk holds 1..{MAX_LABEL_CHUNK} label packs")
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
        session.labels.add_packs(start // m, loaded, blobs)
        session.n_labels = covered
        return session, Message("ack", {"received": covered})

    def _train(self, message: Message):
        session = self._session_of(message)
        expected = session.X.shape[0] if session.label_ciphertexts else 0
        if session.state != "receiving labels" or session.n_labels != expected:
            raise ProtocolError(f"train: {session.n_labels} of {expected} "
                                f"labels received; session is {session.state}")
        if not selection(session.spec.split_selection).asks_rounds:
            return session, self._train_without_rounds(session)
        reply = self._next_query(session)
        if reply.kind == "query":
            session.state = "training"
        return session, reply

    @staticmethod
    def _randomized_labels(message: Message, spec: ForestSpec, n_rows: int,
                           n_classes: int) -> np.ndarray | None:
        """The randomized-response labels a ``"rr"`` setup carries (None otherwise), as
        its learner reads them."""
        if not selection(spec.split_selection).sends_randomized_labels:
            if "y_rr" in message.arrays:
                raise ProtocolError("setup: randomized labels (y_rr) go with "
                                    "split_selection 'rr' only")
            return None
        return SERVER_LEARNERS[spec.learner].read_labels(message, n_rows, n_classes)

    def _train_without_rounds(self, session: ServerSession) -> Message:
        """Grow every tree without asking the client — from the ciphers alone (``"blind"``)
        or by the Gini rule on the randomized-response labels (``"rr"``, the compiled grower:
        :mod:`.growth`) — and sum each leaf's label ciphertexts: no query round."""
        started = time.perf_counter()
        chosen = selection(session.spec.split_selection)
        if chosen.sends_randomized_labels:
            SERVER_LEARNERS[session.spec.learner].grow(
                session.growth, session.randomized_labels, session.n_classes, self.n_jobs)
        else:
            chosen.grow(session.growth, None, self.n_jobs)
        grown = time.perf_counter()
        session.stats.growth_seconds += grown - started
        n_leaves = sum(int(np.count_nonzero(np.asarray(tree.left) < 0))
                       for tree in session.trees)
        if session.label_ciphertexts:  # the leaf store of the paper's prediction replies
            leaf_jobs = store_order(session, leaf_rows(session.growth, self.n_jobs))
            leaves, _, _ = self._levels.compute(session, leaf_jobs, [], 0)
            session.stats.leaf_seconds += time.perf_counter() - grown
            for (t, node), leaf in zip(leaf_jobs, leaves, strict=True):
                session.trees[t].leaves[node.node_id] = leaf
        session.finish_training()
        # The leaf each training row reaches: the client counts its own labels per leaf
        # (the trees are this server's; the client does not replay their growth).
        return Message("trained", {"session": session.id, "rounds": 0, "n_leaves": n_leaves},
                       {"leaf": session.route(session.X, self.n_jobs).astype(np.int32)})

    # ------------------------------------------------------------------ one level
    def _next_query(self, session: ServerSession) -> Message:
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
        if plans and session.round_counts and session.context.kind.approximate:
            max_weight = max(plan.weight for plan in plans)
            shift = max(0, math.ceil(math.log2(max_weight / CKKS_MAX_SCALED_COUNT)))
        if shift != session.mask_shift:  # masks of another shift will not be used again
            session.context.clear_masks()
            session.mask_shift = shift
        # Plan-only rounds (round_counts false): no encrypted count; the level's homomorphic
        # work is then the leaf store alone, and none without label ciphertexts.
        blobs, positions = [], []
        if session.round_counts or session.label_ciphertexts:
            leaves, blobs, positions = self._levels.compute(
                session, leaf_jobs, plans if session.round_counts else [], shift)
            for (t, node), leaf in zip(leaf_jobs, leaves, strict=True):
                session.trees[t].leaves[node.node_id] = leaf
        if not plans:  # every tree was visited and none has an open node left
            session.finish_training()
            session.plans = []
            n_leaves = sum(int(np.count_nonzero(np.asarray(tree.left) < 0))
                           for tree in session.trees)
            return Message("trained", {"session": session.id, "rounds": session.round,
                                       "n_leaves": n_leaves})
        session.round += 1
        session.query_token = secrets.token_hex(8)
        session.plans = plans
        session.stats.rounds += 1
        session.stats.query_ciphertexts += len(blobs)
        fields = plan_fields(session.growth, plans)
        session.stats.candidates += int(fields["n_candidates"].sum())
        meta = {"session": session.id, "round": session.round, "token": session.query_token}
        if not session.round_counts:  # the plan alone: the client counts its own labels
            return Message("query", meta, fields)
        meta.update(shift=shift, block_size=session.block_size,
                    blocks_per_ciphertext=session.blocks_per_ciphertext)
        arrays = {**fields, "block_position": np.asarray(positions, dtype=np.int64)}
        return Message("query", meta, arrays, {"counts": blobs})

    def _round_fits(self, session: ServerSession, n_blocks: int, n_nodes: int) -> bool:
        """Whether a query of ``n_blocks`` blocks for ``n_nodes`` nodes stays within
        ``max_round_bytes`` (always, without a cap)."""
        cap = session.spec.max_round_bytes
        if cap is None:
            return True
        # A query ciphertext sits on the last prime: 2 polynomials of N 64-bit words; each
        # worker process may leave one ciphertext partly filled. (Node counted as a block:
        # the cap errs on the safe side.)
        ciphertext_bytes = 2 * 8 * session.context.kind.poly_modulus_degree + 128
        n_ciphertexts = (-(-n_blocks // session.blocks_per_ciphertext)
                         + self._levels.n_parts - 1) if session.round_counts else 0
        metadata = 8 * n_blocks + 56 * n_nodes + 8192  # per-candidate/node arrays, header
        return n_ciphertexts * ciphertext_bytes + metadata <= cap

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
            session.queue_leaf(plan.tree, plan.node)
        return session, self._next_query(session)

    def _close(self, message: Message):
        """Forget a session: its ciphertexts, trees and leaves."""
        session = self._session_of(message)
        self.forget_session(session.id)
        return session, Message("closed", {"session": session.id})

    # ------------------------------------------------------------------ prediction
    def _predict(self, message: Message):
        """Route the rows through every tree and reply with either

        * ``reply="sums"`` (asked for, and possible: CKKS with the giant-step key): per test
          row, its leaves' class frequencies summed over the trees, a few ciphertexts
          (:mod:`.row_sums`); or
        * ``reply="leaves"``: the leaf-store ciphertexts the rows reach and, per (row, tree),
          the leaf's position among those ciphertexts' leaves and its bootstrap draws
          (the client rounds CKKS frequencies times draws to exact counts); or
        * ``reply="ids"`` (the client's default): per (row, tree) the node id of the leaf the
          row reaches, nothing encrypted (the client holds its own leaf counts).
        """
        session = self._session_of(message)
        if session.state != "trained":
            raise ProtocolError(f"predict: session is {session.state}, not trained")
        X = message.array("X", "float64", 2)
        if X.shape[1] != session.X.shape[1] or not np.all(np.isfinite(X)):
            raise ProtocolError(f"predict: X must be finite with {session.X.shape[1]} columns")
        asked = message.meta.get("reply", "leaves")
        if asked not in ("ids", "sums", "leaves"):
            raise ProtocolError(f"predict: reply must be 'ids', 'sums' or 'leaves', not "
                                f"{asked!r}")
        if asked != "ids" and not session.label_ciphertexts:
            raise ProtocolError(f"predict: this session was trained without label "
                                f"ciphertexts and holds no leaf store: ask for 'ids', not "
                                f"{asked!r}")
        layout, context = session.layout, session.context
        leaf_ids = session.route(X, self.n_jobs)
        meta = {"session": session.id, "n_rows": X.shape[0], "n_trees": len(session.trees)}
        if asked == "ids":
            return session, Message("scores", {**meta, "reply": "ids"},
                                    {"leaf": leaf_ids.astype(np.int32)})
        # Store position of every (row, tree)'s leaf: one lookup in the forest's node table.
        reached = session.leaf_positions()[leaf_ids + session.packed_forest().offsets[:-1]]
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
        draws = session.leaf_totals()[leaf_ids + session.packed_forest().offsets[:-1]]
        return session, Message("scores", {**meta, "reply": "leaves",
                                           "leaves_per_ciphertext": per_ct},
                                {"leaf": positions.astype(np.int32),
                                 "draws": draws.astype(np.int32)}, {"leaves": blobs})
