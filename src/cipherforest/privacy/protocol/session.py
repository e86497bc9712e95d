"""The data owner's side of the protocol as public steps: :class:`ClientSession`.

One :class:`ClientSession` holds a private forest's client state — the GIPE encryptor, the
homomorphic secret context, the slot layout, the classes, the server session — and runs the
protocol in four steps that the estimator (:class:`~cipherforest.privacy.PrivateForestClient`),
the staged CLI (``cipherforest client encrypt / upload / train``) and the experiments all
use:

1. :meth:`~ClientSession.encrypt` — offline: GIPE ciphers, keys, the ``setup`` message and
   the ``labels`` messages (nothing is sent);
2. :meth:`~ClientSession.upload` — open the server session with ``setup``, send the labels;
3. :meth:`~ClientSession.train` — ask the server to train and answer its rounds: each query
   is checked against the client's own replay of the server's plan, decrypted, checked
   again, and answered with one candidate per node (:mod:`.decisions`);
4. :meth:`~ClientSession.predict_proba` — encrypt test rows, read the leaves they reach in
   the client's own leaf counts (or, in the paper's flow, decrypt the server's scores).

Secret keys never leave this object (:mod:`cipherforest.privacy.package` saves them to a
0600 directory).
"""

from __future__ import annotations

import hashlib
import secrets
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dp import LabelPrivacyAccountant
from ..gipe import GiniPreservingEncryptor
from ..he import BlockLayout, SecretContext
from ..ledger import LedgerError, PrivacyLedger, default_ledger_path
from .decisions import (
    check_counts,
    clear_counts,
    squares_of_counts,
)
from .leaf_table import LeafTable
from .messages import Message, ProtocolError, decode_message, encode_message
from .params import ForestSpec, forest_meta, label_epsilon
from .planner import ForestGrowth, NodePlan, leaves_reached, plan_fields
from .replies import leaf_counts, query_counts, row_sums
from .selections import SplitSelection, selection
from .transport import ResumableTransport, Transport

__all__ = ["ClientSession", "ProtocolStats", "new_gipe_encryptor"]


def new_gipe_encryptor(params: Mapping[str, Any]) -> GiniPreservingEncryptor:
    """The unfitted GIPE encryptor a private estimator's fit uses, keys and jitter from the OS.

    Parameters
    ----------
    params : mapping
        The estimator's parameters (its ``get_params()``): ``security_parameter``,
        ``gipe_mode`` and ``gipe_bins`` are read.

    Returns
    -------
    GiniPreservingEncryptor
        Unfitted, its output NumPy arrays whatever scikit-learn's global ``set_output``.
    """
    return GiniPreservingEncryptor(params["security_parameter"], mode=params["gipe_mode"],
                                   n_bins=params["gipe_bins"]).set_output(transform="default")


@dataclass
class ProtocolStats:
    """Costs of one fit or predict as seen by the client."""

    client_seconds: float = 0.0
    server_seconds: float = 0.0
    rounds: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    bytes_per_round: list[int] = field(default_factory=list)
    reply: str = ""  # predict: "sums" or "leaves", what the server answered with


class ClientSession:
    """A private forest's client: keys, encryptor, layout, server session, protocol steps.

    Parameters
    ----------
    params : mapping
        :class:`~cipherforest.privacy.PrivateForestClient`'s parameters (its
        ``get_params()``), validated by it.
    transport : Transport or None
        Where the server is; may be set later (:attr:`transport`), before :meth:`upload`.

    Attributes
    ----------
    classes : ndarray
        The class labels, in the order of the encoded labels.
    encryptor : GiniPreservingEncryptor
        The GIPE state (secret).
    he : SecretContext
        The homomorphic keys (secret).
    layout : BlockLayout
        The slot layout shared with the server.
    session_id : str or None
        The server's session, once ``setup`` is accepted.
    n_draws : int
        Bootstrap draws per tree (bounds every leaf's counts).
    labels : ndarray or None
        The training labels as class indices (secret): the client checks every decrypted
        count against them.
    accountant : LabelPrivacyAccountant
        The label-privacy guarantee of the last :meth:`train`.
    deviations : list of dict
        Where the last :meth:`train`'s server sent class counts that are not the client's
        own (``round``, ``tree``, ``node``, ``what``; tree and node -1 when a round's counts
        could not be read at all). Recorded, never reacted to during the fit: the estimator
        reports them after it (``privacy_report_``, a warning).
    """

    #: The class of :attr:`leaf_table` (what a saved client's leaf arrays are read as).
    leaf_table_type = LeafTable

    def __init__(self, params: Mapping[str, Any], transport: Transport | None = None):
        self.params = dict(params)
        self.transport = transport
        self.session_id: str | None = None
        self.classes: np.ndarray | None = None
        self.encryptor: GiniPreservingEncryptor | None = None
        self.he: SecretContext | None = None
        self.layout: BlockLayout | None = None
        self.n_draws = 0
        self.labels: np.ndarray | None = None
        self.accountant = self._new_accountant()
        self.deviations: list[dict] = []
        self.leaf_table: LeafTable | None = None
        self.ledger: PrivacyLedger | None = None
        self.row_keys: np.ndarray | None = None
        self.release_digest: str | None = None

    def _new_accountant(self) -> LabelPrivacyAccountant:
        return LabelPrivacyAccountant(self.params["split_selection"],
                                      label_epsilon(self.params),
                                      self.params.get("label_delta", 1e-6))

    @property
    def rows_per_message(self) -> int:
        """Label rows per ``labels`` message: ``label_chunk`` packs of the layout's rows."""
        return self.layout.rows_per_pack * int(self.params["label_chunk"])

    @property
    def selection(self) -> SplitSelection:
        """The split selection (:mod:`.selections`)."""
        return selection(self.params["split_selection"])

    @property
    def asks_rounds(self) -> bool:
        """Whether the server asks this client to choose splits (``"gini"``, ``"dp"``)."""
        return self.selection.asks_rounds

    @property
    def round_counts(self) -> bool:
        """Whether the rounds carry the server's encrypted class counts: only in the paper's
        flow (``decide_from="server"``). By default the client decides from the counts of
        its own labels, so the server sends the plan alone (plan-only rounds)."""
        return self.asks_rounds and self.params.get("decide_from", "own") == "server"

    @property
    def sends_labels(self) -> bool:
        """Whether the server gets label ciphertexts: only where it computes counts for the
        rounds (the paper's flow) or encrypted prediction replies (``prediction_reply``
        ``"sums"``/``"leaves"``); when predictions read the client's own leaf counts
        (``"ids"``) and no round needs counts, the server has no use for them."""
        return self.round_counts or self.params.get("prediction_reply", "ids") != "ids"

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def verbose(self) -> int:
        """Progress printing level: the ``verbose`` parameter, settable between stages."""
        return int(self.params["verbose"])

    @verbose.setter
    def verbose(self, value: int) -> None:
        self.params["verbose"] = int(value)

    def restore(self, classes: np.ndarray, encryptor: GiniPreservingEncryptor,
                he: SecretContext, n_draws: int, rows_per_pack: int,
                session_id: str | None, labels: np.ndarray | None = None,
                leaf_table: LeafTable | None = None, row_keys: np.ndarray | None = None,
                release_digest: str | None = None) -> ClientSession:
        """Set the state a saved client directory holds (:mod:`..package`); ``labels``
        only where the forest remains to be trained, ``leaf_table`` once it is."""
        if he.scheme != self.params["scheme"]:
            raise ValueError(f"the keys are {he.scheme} keys, the client was fitted with "
                             f"{self.params['scheme']}")
        self.classes = np.asarray(classes)
        self.encryptor = encryptor
        self.he = he
        self.n_draws = int(n_draws)
        self.layout = BlockLayout(he.scheme, he.n_slots, self.n_classes, rows_per_pack,
                                  rows_per_pack)
        self.session_id = session_id
        self.labels = None if labels is None else np.asarray(labels, dtype=np.int64)
        self.leaf_table = leaf_table
        self.row_keys = None if row_keys is None else np.asarray(row_keys, dtype=np.uint64)
        self.release_digest = release_digest
        return self

    # ------------------------------------------------------------------ 1. encrypt
    def encrypt(self, X: np.ndarray, y_codes: np.ndarray, classes: np.ndarray,
                encryptor: GiniPreservingEncryptor | None = None,
                ) -> tuple[Message, Iterator[Message]]:
        """Offline: fit GIPE on ``X``, make the keys and layout, and the messages to upload.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features), float64
        y_codes : ndarray of shape (n_samples,)
            Labels as indices into ``classes``.
        classes : ndarray
            At least two classes.
        encryptor : GiniPreservingEncryptor or None
            Unfitted, to fit here; None makes one with keys and jitter from the operating
            system (nothing the server receives seeds it), as every private fit should.

        Returns
        -------
        setup : Message
            GIPE ciphers, forest parameters and the *public* homomorphic context.
        labels : iterator of Message
            The label packs, ``label_chunk`` per message, encrypted as they are taken.
            Neither carries the server's session id: :meth:`addressed` adds it.
        """
        if len(classes) < 2:
            raise ValueError("a private forest needs at least two classes")
        self.classes = np.asarray(classes)
        params = self.params
        n_samples, n_features = X.shape
        # Before anything else (and long before anything is sent): what this release
        # spends, checked against the ledger and max_total_epsilon.
        y_rr = self._ledger_release(X, np.asarray(y_codes, dtype=np.int64),
                                    forest_meta(params, n_samples, n_features)["n_draws"])
        if encryptor is None:
            encryptor = new_gipe_encryptor(params)
        self.encryptor = encryptor
        X_cipher = np.asarray(encryptor.fit_transform(X, y_codes), dtype=np.float64)
        scheme = params["scheme"]
        layout = BlockLayout(scheme, SecretContext.slot_count(scheme), self.n_classes,
                             n_samples, params["label_pack_rows"])
        # Rotation parts and CKKS row sums need keys beyond the lanes' ±stride.
        if self.sends_labels:
            self.he = SecretContext(scheme, rotation_step=layout.stride,
                                    extra_rotations=layout.rotation_steps()[2:])
        else:  # the server does no homomorphic work: no Galois key to send
            self.he = SecretContext(scheme)
        self.layout = layout
        meta = {"n_classes": self.n_classes, **forest_meta(params, n_samples, n_features),
                "label_pack_rows": None if params["label_pack_rows"] is None
                else int(params["label_pack_rows"])}
        self.n_draws = meta["n_draws"]
        self.labels = np.asarray(y_codes, dtype=np.int64)
        arrays = {"X": X_cipher}
        if y_rr is not None:
            arrays["y_rr"] = y_rr
        if not self.sends_labels:
            meta["label_ciphertexts"] = False
        if self.asks_rounds and not self.round_counts:
            meta["round_counts"] = False
        setup = Message("setup", meta, arrays, {"context": [self.he.public_bytes()]})
        return setup, (self._label_messages() if self.sends_labels else iter(()))

    def _label_messages(self) -> Iterator[Message]:
        """The ``labels`` messages of :attr:`labels`, ``label_chunk`` packs each."""
        step = self.rows_per_message
        for start in range(0, self.labels.shape[0], step):
            packs = self.encrypt_label_rows(slice(start, start + step))
            yield Message("labels", {"context": self.he.fingerprint_public, "start": start},
                          blobs={"labels": packs})

    def encrypt_label_rows(self, rows: slice) -> list[bytes]:
        """The label packs of the training rows ``rows``: their one-hot labels (a learner
        whose rounds sum other row vectors encrypts those: :meth:`label_rows`)."""
        return self.he.encrypt_packed_labels(self.labels[rows], self.layout)

    def label_rows(self) -> np.ndarray:
        """``(n_samples, τ)``: what each training row adds to a query's sums (its one-hot
        label), from which the client computes its own sums of a round."""
        return np.eye(self.n_classes)[self.labels]

    def read_counts(self, query: Message) -> tuple[np.ndarray, np.ndarray | float]:
        """A round's decrypted sums in query order and how far each block may differ from
        the client's own: exact class counts (tolerance 0)."""
        return query_counts(self.he, self.layout, query), 0.0

    def decision_blocks(self, counts: np.ndarray, own: np.ndarray,
                        n_candidates: np.ndarray) -> np.ndarray:
        """What the selection decides from, given the round's checked ``counts`` and the
        client's ``own``: the squared class counts of ``counts``."""
        return squares_of_counts(counts, n_candidates)

    def _ledger_release(self, X: np.ndarray, y_codes: np.ndarray, n_draws: int
                        ) -> np.ndarray | None:
        """Open the privacy ledger, refuse a release that would exceed
        ``max_total_epsilon``, and return the memoized randomized labels (``"rr"``, charged
        now: they travel in ``setup``) or None (``"dp"``/``"gini"`` are charged when the
        rounds end, with what they spent; ``"blind"`` spends nothing)."""
        params = self.params
        chosen = self.selection
        self.ledger = PrivacyLedger(params.get("privacy_ledger") or default_ledger_path())
        self.row_keys = self.ledger.row_keys(X)
        limit = params.get("max_total_epsilon")
        if chosen.sends_randomized_labels:
            epsilon = label_epsilon(params)
            # Memoized: the same rows and labels give the same randomized labels on every
            # fit, retry and resume, so a server that forces refits learns nothing new.
            y_rr = self.ledger.randomized_labels(X, y_codes, epsilon, self.n_classes)
            self.release_digest = hashlib.sha256(
                b"rr" + np.float64(epsilon).tobytes() + self.row_keys.tobytes()
                + y_rr.tobytes()).hexdigest()
            self.ledger.check(self.row_keys, epsilon, self.release_digest, limit)
            self.ledger.charge("rr", epsilon, 0.0, self.row_keys, self.release_digest)
            return y_rr
        self.release_digest = f"{chosen.name}:{secrets.token_hex(16)}"  # each fit draws anew
        if chosen.charged_after_rounds:
            self.ledger.check(self.row_keys, self._worst_case_epsilon(n_draws), None, limit)
        return None

    def _worst_case_epsilon(self, n_draws: int) -> float:
        """The most a ``"dp"`` or ``"gini"`` fit can spend: one choice per level of every
        tree, a tree of ``n_draws`` rows at most ``max_depth`` (else ``n_draws - 1``) deep."""
        worst = self._new_accountant()
        depth = self.params["max_depth"]
        worst.spend(int(self.params["n_estimators"])
                    * (n_draws - 1 if depth is None else min(int(depth), n_draws - 1)))
        return worst.epsilon_spent

    def charge_rounds(self) -> None:
        """Record what the answered rounds spent (``"dp"``, ``"gini"``, ``"paper"``) in the
        ledger (:meth:`train` does when its rounds end; a simulation of them, after it)."""
        if self.accountant.choices == 0 or not self.selection.charged_after_rounds:
            return
        if self.ledger is None:
            self.ledger = PrivacyLedger(self.params.get("privacy_ledger")
                                        or default_ledger_path())
        self.ledger.charge(self.params["split_selection"], self.accountant.epsilon_spent,
                           self.accountant.delta_spent, self.row_keys, self.release_digest)

    def cumulative_spent(self) -> tuple[float, float] | None:
        """``(ε, δ)`` the ledger holds for the most charged row of this client's data (None
        without a ledger).

        A restored session (a staged train: encrypt charged the release in another process)
        reopens the ledger its rows are keyed in; it never creates one.
        """
        if self.row_keys is None:
            return None
        if self.ledger is None:
            try:
                self.ledger = PrivacyLedger(self.params.get("privacy_ledger")
                                            or default_ledger_path(), create=False)
            except LedgerError:
                return None
        return self.ledger.spent(self.row_keys)

    # ------------------------------------------------------------------ 2. upload
    def upload(self, setup: Message, labels: Iterable[Message], stats: ProtocolStats,
               started: float | None = None) -> None:
        """Open the server session with ``setup`` and send every labels message."""
        started = time.perf_counter() if started is None else started
        self.accept_session(self.exchange(setup, "session", stats))
        n_samples = setup.arrays["X"].shape[0]
        for message in labels:
            self.exchange(self.addressed(message), "ack", stats)
            if self.verbose:
                done = min(n_samples, message.value("start", int) + self.rows_per_message)
                self._progress(f"labels {done}/{n_samples} rows, "
                               f"{stats.bytes_sent / 1e6:.1f} MB sent, "
                               f"{time.perf_counter() - started:.1f} s")

    def accept_session(self, reply: Message) -> None:
        """Take the session id of the server's reply to ``setup`` (checking its layout)."""
        session_id = reply.value("session", str)
        if reply.value("rows_per_pack", int) != self.layout.rows_per_pack:
            raise ProtocolError(f"session: the server packs {reply.meta['rows_per_pack']} "
                                f"label rows per ciphertext, this client "
                                f"{self.layout.rows_per_pack}")
        self.session_id = session_id

    def addressed(self, labels: Message) -> Message:
        """A labels message of :meth:`encrypt` addressed to the current session."""
        return Message("labels", self._meta({"start": labels.value("start", int)}),
                       blobs={"labels": labels.blob_list("labels")})

    # ------------------------------------------------------------------ 3. train
    def train(self, setup: Message, stats: ProtocolStats, started: float | None = None, *,
              answered: Sequence[Message] = (),
              on_answer: Callable[[Message], None] | None = None) -> None:
        """Ask the uploaded session to train and answer its rounds until it is trained.

        The client grows the same label-free plan as the server (from the ciphers and forest
        parameters of ``setup``) and refuses any query that differs from it.

        Parameters
        ----------
        answered : sequence of Message
            To resume a session whose client stopped during the rounds: the answers that
            client sent (as ``on_answer`` recorded them), replayed on the plan to bring it to
            the server's level; the rounds then continue from the server's current reply
            (the transport must be a :class:`~.transport.ResumableTransport`).
        on_answer : callable or None
            Called with each answer before it is sent (to record it for a resume).
        """
        started = time.perf_counter() if started is None else started
        X_cipher = setup.arrays["X"]
        n_samples, n_features = X_cipher.shape
        self._growth = ForestGrowth(X_cipher, ForestSpec.from_meta(setup.meta, n_samples,
                                                                   n_features))
        self.accountant = self._new_accountant()
        self.deviations = []
        self._rng = secrets.SystemRandom()
        # A package staged before plan-only rounds asked the server for counts: they come,
        # and are ignored; a server that sends counts nobody asked for is recorded.
        self._plan_only = setup.meta.get("round_counts", True) is False
        if self.labels is None:
            raise ValueError("this client has no labels to decide and count the leaves "
                             "from: encrypt the data again (packages made before the "
                             "client kept them do not hold them)")
        if self.asks_rounds and (self.row_keys is None or self.release_digest is None):
            raise ValueError("this package was encrypted before the privacy ledger: its "
                             "rounds could not be charged; encrypt the data again")
        no_rounds = not self.asks_rounds
        try:
            if answered:
                reply = self._resume(answered, stats)
            else:
                reply = self.exchange(Message("train", self._meta({})), ("query", "trained"),
                                      stats)
            while reply.kind == "query":
                if no_rounds:
                    raise ProtocolError(f"the server sent a query in "
                                        f"{self.params['split_selection']!r} mode, where the "
                                        "client answers none")
                stats.rounds += 1
                round_started = time.perf_counter()
                answer = self.answer(reply)
                if on_answer is not None:
                    on_answer(answer)
                reply_bytes = stats.bytes_per_round[-1]
                reply = self.exchange(answer, ("query", "trained"), stats)
                if self.verbose:
                    self._progress(f"round {stats.rounds}: {answer.arrays['node'].shape[0]} "
                                   f"open nodes, {reply_bytes / 1e6:.1f} MB query, "
                                   f"{time.perf_counter() - round_started:.1f} s")
            if no_rounds:
                reached = self._training_leaves(reply, n_samples)
            else:
                self._check_finished()
                reached = leaves_reached(self._growth.trees, X_cipher)
            self.leaf_table = self.count_leaves(reached, self._growth.weights)
        finally:
            del self._growth
            self.charge_rounds()  # what the server saw, even of rounds that then failed
        stats.client_seconds = time.perf_counter() - started - stats.server_seconds

    def count_leaves(self, reached: np.ndarray, weights_of: Callable[[int], np.ndarray]):
        """The client's own leaf statistics once the structure is known: the class counts
        of :attr:`labels` in the leaves ``reached`` (a subclass for another learner keeps
        what its predictions need; :attr:`leaf_table_type` reads them back)."""
        return LeafTable.from_rows(reached, self.labels, weights_of, self.n_classes)

    def _training_leaves(self, trained: Message, n_samples: int) -> np.ndarray:
        """The leaf each training row reaches in each tree, as the server that grew the
        trees without rounds names them (checked for shape only: the client counts its own
        labels in whatever leaves it is told, and any wrong structure only harms accuracy,
        which the server could harm anyway)."""
        n_trees = len(self._growth.trees)  # the setup's trees (a boosting's: all rounds')
        if "leaf" not in trained.arrays:
            raise ProtocolError("trained: the server names no training leaves (a server "
                                "older than this client)")
        reached = trained.array("leaf", "int32", 2)
        if reached.shape != (n_samples, n_trees) or (reached < 0).any():
            raise ProtocolError(f"trained: expected a leaf id per training row and tree "
                                f"({n_samples} × {n_trees})")
        return reached

    def _resume(self, answered: Sequence[Message], stats: ProtocolStats) -> Message:
        """Replay the recorded answers on the plan, then take the server's current reply;
        if the last answer never reached the server (its query is still open), send it."""
        if not isinstance(self.transport, ResumableTransport):
            raise TypeError("resuming the rounds needs a transport that keeps the session "
                            "(HTTPTransport), not " + type(self.transport).__name__)
        for answer in answered:
            trees = np.unique(answer.array("tree", "int64", 1)).tolist()
            plans = [p for t in trees for p in self._growth.plan_tree(t)[0]]
            if not np.array_equal(answer.array("node", "int64", 1),
                                  [p.node.node_id for p in plans]):
                raise ProtocolError("the recorded answers do not replay on this forest's "
                                    "plan: they belong to another package")
            self.accountant.spend(len(trees))
            self._growth.apply_level(plans, answer.array("choice", "int64", 1).tolist())
        last = answered[-1].value("round", int)
        data = self.transport.current_reply()
        reply = decode_message(data, ("query", "trained"))
        stats.bytes_received += len(data)
        if reply.kind == "query":
            stats.bytes_per_round.append(len(data))
            if reply.value("round", int) == last:
                return self.exchange(answered[-1], ("query", "trained"), stats)
            if reply.value("round", int) != last + 1:
                raise ProtocolError(f"the server's open query is round "
                                    f"{reply.value('round', int)}; this client's recorded "
                                    f"answers end at round {last}")
        return reply

    def answer(self, query: Message) -> Message:
        """The answer to one query: plan checked, one candidate per node chosen.

        By default (``decide_from="own"``) the choice comes from the class counts of the
        client's own labels on its own replay of the plan; the server's encrypted counts are
        decrypted and compared only to record a difference (:attr:`deviations`), never to
        refuse or change anything the server can see, so a server that forges counts learns
        nothing from the answers. ``decide_from="server"`` is the paper's flow: choose from
        the decrypted counts and refuse the round when they differ from the client's own.
        """
        plans = self._check_plan(query)
        own = clear_counts(plans, self.label_rows(), self._growth.weights)
        if self.round_counts:
            counts, tolerance = self.read_counts(query)
            check_counts(plans, counts, own, tolerance)
        else:
            self._audit(query)
            counts = own
        blocks = self.decision_blocks(counts, own, query.array("n_candidates", "int64", 1))
        params = self.params
        choice = self.selection.decide(self._growth, plans, blocks, self.n_classes,
                                       params["reveal_leaves"], label_epsilon(params),
                                       self._rng)
        self.accountant.spend(len({p.tree for p in plans}))
        self._growth.apply_level(plans, choice.tolist())
        arrays = {"tree": query.array("tree", "int64", 1),
                  "node": query.array("node", "int64", 1), "choice": choice}
        return Message("answer", self._meta({"round": query.value("round", int),
                                             "token": query.value("token", str)}), arrays)

    def _audit(self, query: Message) -> None:
        """Record a plan-only round's query that carries encrypted counts anyway (this
        client asked for none and decrypts nothing of them); nothing here raises or changes
        the answer."""
        if self._plan_only and query.blobs.get("counts"):
            self.deviations.append({
                "round": query.value("round", int), "tree": -1, "node": -1,
                "what": "the query carries encrypted class counts in plan-only rounds "
                        "(not decrypted)"})

    def _check_plan(self, query: Message) -> list[NodePlan]:
        """The client's own plan of the trees a query covers; a query that differs from it
        (other nodes, weights, candidates) is refused before anything is decrypted."""
        growth = self._growth
        trees = query.array("tree", "int64", 1)
        n_trees = len(growth.trees)
        if trees.size == 0 or (trees[:-1] > trees[1:]).any() or trees.min() < 0 \
                or trees.max() >= n_trees:
            raise ProtocolError("query: tree ids must be sorted ids of this forest's trees")
        covered = np.unique(trees).tolist()
        plans: list[NodePlan] = []
        for t in covered:
            tree_plans, _ = growth.plan_tree(t)
            plans.extend(tree_plans)
        if self.params["max_round_bytes"] is None:  # one round covers every growing tree
            for t in sorted(set(range(n_trees)) - set(covered)):
                if growth.trees[t].open and growth.plan_tree(t)[0]:
                    raise ProtocolError(f"query: tree {t} has open nodes but is not in the "
                                        "round")
        for name, values in plan_fields(growth, plans).items():
            got = query.array(name, "int64", 1)
            if got.shape[0] != len(values) or not np.array_equal(got, values):
                raise ProtocolError(f"query: {name!r} differs from the forest's plan (the "
                                    "server asked about nodes or candidates this forest "
                                    "does not have)")
        return plans

    def _check_finished(self) -> None:
        growth = self._growth
        for t in range(len(growth.trees)):
            if growth.trees[t].open and growth.plan_tree(t)[0]:
                raise ProtocolError(f"the server declared the forest trained, but tree {t} "
                                    "still has nodes to split")

    # ------------------------------------------------------------------ 4. predict
    def predict_proba(self, X: np.ndarray, stats: ProtocolStats,
                      reply: str = "ids") -> np.ndarray:
        """Class probabilities of the rows ``X`` (validated float64): the mean over trees of
        the leaf class frequencies. ``reply``: what to ask the server for — ``"ids"`` (the
        leaves the rows reach; the frequencies come from the client's own
        :attr:`leaf_table`, nothing is decrypted) or the paper's encrypted replies,
        ``"sums"`` (per-row sums over the trees, CKKS) and ``"leaves"``."""
        started = time.perf_counter()
        n_trees = int(self.params["n_estimators"])
        if reply == "ids" and self.leaf_table is None:
            raise ValueError("this client holds no leaf class counts (saved before the "
                             "client counted its own leaves): encrypt and train again, or "
                             "predict with prediction_reply='sums' (the server's encrypted "
                             "sums)")
        X_cipher = np.asarray(self.encryptor.transform(X), dtype=np.float64)
        request = Message("predict", self._meta({"reply": reply}),
                          {"X": X_cipher})
        reply = self.exchange(request, "scores", stats)
        if reply.value("n_rows", int) != X.shape[0] or reply.value("n_trees", int) != n_trees:
            raise ProtocolError(f"scores: expected {X.shape[0]} rows × {n_trees} trees")
        kind = reply.value("reply", str)
        if kind == "ids" and self.leaf_table is not None:
            proba = self.leaf_table.proba(reply.array("leaf", "int32", 2))
        elif kind == "sums" and self.he.kind.approximate:
            # Each row sums to n_trees up to noise; dividing by the row's own sum keeps the
            # probabilities summing to one, as a forest's do.
            sums = row_sums(self.he, self.layout, reply, X.shape[0], n_trees)
            proba = sums / sums.sum(axis=1, keepdims=True)
        elif kind == "leaves":
            counts = leaf_counts(self.he, self.layout, reply, X.shape[0], n_trees)
            totals = counts.sum(axis=2, keepdims=True)
            if (counts < 0).any() or (totals <= 0).any() or (totals > self.n_draws).any():
                raise ProtocolError("decrypted leaf counts are not counts of at most "
                                    f"{self.n_draws} bootstrap draws: the scores were not "
                                    "made with this client's key or are corrupted")
            proba = (counts / totals).mean(axis=1)
        else:
            raise ProtocolError(f"scores: unknown reply {kind!r} for a {self.he.scheme} "
                                "client")
        stats.client_seconds = time.perf_counter() - started - stats.server_seconds
        stats.reply = kind
        return proba

    def close(self) -> None:
        """Ask the server to forget this session (its ciphertexts and trees)."""
        self.exchange(Message("close", self._meta({})), "closed", ProtocolStats())
        self.session_id = None

    # ------------------------------------------------------------------ messages
    def exchange(self, message: Message, expected, stats: ProtocolStats) -> Message:
        """Send ``message`` through the transport, count its costs, return the decoded reply
        (required to be of the ``expected`` kind or kinds)."""
        if self.transport is None:
            raise ValueError("the client session has no transport")
        data = encode_message(message)
        started = time.perf_counter()
        reply = self.transport.handle(data)
        stats.server_seconds += time.perf_counter() - started
        stats.bytes_sent += len(data)
        stats.bytes_received += len(reply)
        decoded = decode_message(reply, expected)
        if decoded.kind == "query":
            stats.bytes_per_round.append(len(reply))
        return decoded

    def _meta(self, extra: dict) -> dict:
        return {"session": self.session_id, "context": self.he.fingerprint_public, **extra}

    @staticmethod
    def _progress(text: str) -> None:
        print(f"[PrivateForestClient] {text}", file=sys.stderr, flush=True)
