"""The data owner's side of the encrypted random forest: :class:`PrivateForestClient`.

The client encrypts features with GIPE and labels with CKKS (or BFV, the exact mode), hands
the ciphertexts and its *public* homomorphic context to a server, then answers one query per
tree level for the whole forest: it decrypts the packed squared class counts, computes every
candidate's Gini impurity and tells the server, per node, which candidate wins or that the
node is a leaf. Secret keys never leave the client. Predictions come back as encrypted leaf
counts (BFV, or on request) or, with CKKS, as each test row's class frequencies already
summed over the trees by the server; the client decrypts and averages them as a random
forest does.
"""

from __future__ import annotations

import math
import secrets
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.preprocessing import LabelEncoder
from sklearn.utils._param_validation import Interval, RealNotInt, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from ..ensemble._base import resolve_n_draws
from ..tree._classes import resolve_max_features
from ._blocks import BlockLayout
from ._plan import SPLIT_SELECTIONS, ForestGrowth, ForestSpec, NodePlan
from .gipe import GiniPreservingEncryptor
from .he import SCHEMES, HEError, SecretContext
from .protocol import Message, ProtocolError, decode_message, encode_message

__all__ = ["PrivateForestClient", "ProtocolStats", "choose_splits", "decide_splits",
           "exponential_mechanism", "split_sensitivity"]

_EPSILON = np.finfo(np.float64).eps
# CKKS returns squared counts with an error far below this; more means a wrong key or a
# corrupted ciphertext, not rounding.
_CKKS_INTEGER_TOLERANCE = 0.25
# Row sums (predict_proba) carry CKKS noise of ~1e-6 per tree (measured); this bound per
# tree flags a wrong key or a corrupted ciphertext, whose slots are far off.
_CKKS_SUM_TOLERANCE = 1e-4
# Probabilities from row sums closer than this count as tied in predict. Their noise comes
# from the labels' rotations (leaf frequencies in the store: median 1.9e-7, max 5.7e-7 on
# pendigits) and reached 7.6e-7 in probability with 5 trees (benchmarks/row_sums.py
# noise); two classes' probabilities that truly differ differ by far more
# (1 / (n_trees · T · T') for leaf draws T, T').
_CKKS_TIE_TOLERANCE = 1e-5


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


class PrivateForestClient(ClassifierMixin, BaseEstimator):
    """Random forest trained by a server on encrypted data (GIPE features, CKKS labels).

    Parameters mirror :class:`~cipherforest.ensemble.RandomForestClassifier` (Gini criterion);
    with the same ``random_state`` the server grows the trees that random forest grows on the
    GIPE ciphertexts with clear labels (exactly so with ``reveal_leaves=True``; by default
    pure nodes are split further at random, which leaves every prediction unchanged).

    What the server may learn is set by three choices (docs/threat_model.md measures each):

    * ``gipe_mode`` — how features are encrypted. ``"quantile"`` (default) and ``"order"``
      give ciphers whose equality and order are functions of ``X`` alone; ``"paper"`` is the
      paper's scheme, whose cipher runs follow the labels.
    * ``reveal_leaves`` — the paper's rule answers "leaf" exactly for pure nodes, which tells
      the server that the node's rows share a label. By default the client never does: nodes
      stop by public rules only and a pure node gets a uniformly random candidate.
    * ``split_selection`` — ``"gini"`` (the paper: the best candidate), ``"dp"`` (the
      exponential mechanism on the candidates' Gini scores, ``label_epsilon`` per choice,
      total in ``epsilon_spent_``), or ``"blind"`` (the server draws feature and threshold
      at random and only sums leaf label ciphertexts: no query rounds, nothing in its view
      depends on the labels).

    The client replays the server's deterministic plan (bootstrap counts, feature draws,
    candidates, node weights) and refuses a query that differs from it.

    Parameters
    ----------
    n_estimators : int, default=100
    max_features : {"sqrt", "log2"}, int, float or None, default="sqrt"
        Features drawn per split. In ``"blind"`` selection one feature is drawn per split
        (without labels there is nothing to choose between features).
    max_depth : int or None, default=None
    min_samples_split : int, default=2
        The paper's α: nodes with fewer samples become leaves.
    min_samples_leaf : int, default=1
    bootstrap : bool, default=True
    max_samples : int, float or None, default=None
    max_bins : int or None, default=None
        Candidate thresholds at most ``max_bins - 1`` bin edges per feature (histogram
        forest) instead of every midpoint: fewer blocks per round.
    random_state : int, RandomState instance or None, default=None
        Seeds the forest only (bootstrap draws, feature draws; sent to the server). GIPE
        keys and jitter and the homomorphic keys always come from the operating system.
    scheme : {"ckks", "bfv"}, default="ckks"
        Label encryption. "bfv" is the exact mode: integer counts, decisions identical to the
        plaintext forest's by construction.
    security_parameter : float, default=6.4
        GIPE's λ.
    gipe_mode : {"quantile", "order", "paper"}, default="quantile"
        Feature encryption (:class:`~cipherforest.privacy.GiniPreservingEncryptor`'s
        ``mode``).
    gipe_bins : int, default=32
        Quantile bins per feature in ``gipe_mode="quantile"``.
    reveal_leaves : bool, default=False
        True restores the paper's rule: answer "leaf" for pure and no-gain nodes.
    split_selection : {"gini", "dp", "blind"}, default="gini"
    label_epsilon : float or None, default=None
        ε of each exponential-mechanism choice with ``split_selection="dp"`` (required
        there, unused otherwise). 0 chooses uniformly; ``inf`` is the Gini choice.
    max_round_bytes : int or None, default=None
        None: one round per tree level for all trees (the paper's O(depth) rounds). An int
        (at least 256 KiB) caps each query: a round then covers the current levels of as many
        trees as fit (at least one tree, which alone may exceed the cap), so rounds grow to
        about total bytes / cap.
    server : str, PrivateForestServer-like or None, default=None
        ``"http://host:port"`` of a ``cipherforest serve`` process; or anything with
        ``handle(bytes) -> bytes``; None runs a server in this process.
    n_jobs : int or None, default=None
        Worker processes of the embedded server (None: 1, -1: all cores).
    label_chunk : int, default=2
        Label packs per upload message (each pack is one ciphertext holding the labels of up
        to ``4096 / τ`` rows, τ rounded up to a power of two; at most 64 per message).
    label_pack_rows : int or None, default=None
        At most this many rows' labels per label ciphertext (None: as many as the slots
        hold). Fewer rows per pack mean fewer candidate lanes per query ciphertext.
    prediction_reply : {"sums", "leaves"}, default="sums"
        What :meth:`predict_proba` asks the server for. ``"sums"``: each test row's leaf
        class frequencies summed over the trees on the server (CKKS only; a few ciphertexts
        per 2·4096/τ' rows, probabilities within ~1e-6 of the plaintext forest's; BFV
        sessions answer with leaves). ``"leaves"``: the leaf-store ciphertexts the rows reach
        and a position per (row, tree); exact integer counts, more bytes.
    verbose : int, default=0
        1: print upload progress and one line per round (round, open nodes, bytes, seconds)
        on stderr, as the plaintext ensembles draw their progress.
    server_key : str or None, default=None
        Access key of a server given by URL; None reads ``$CIPHERFOREST_SERVER_KEY``.
    timeout : float, default=120
        Seconds a server given by URL may stay unreachable (retried with backoff) before
        ``fit`` or ``predict`` gives up; after a reconnect the session continues where it
        stands.

    Attributes
    ----------
    classes_ : ndarray
    encryptor_ : GiniPreservingEncryptor
        The GIPE state (secret).
    session_ : str
        Server session id.
    epsilon_spent_ : float
        Label-DP budget spent against the server: 0 for ``"blind"``, ``inf`` for
        ``"gini"``, for ``"dp"`` ``label_epsilon`` times the number of (tree, level) pairs
        with a choice (parallel composition over a level's disjoint nodes, sequential over
        levels and trees).
    fit_stats_ : ProtocolStats
    predict_stats_ : ProtocolStats
        Of the last ``predict_proba`` call.
    """

    _parameter_constraints: dict = {
        "n_estimators": [Interval(Integral, 1, 10_000, closed="both")],
        "max_features": [Interval(Integral, 1, None, closed="left"),
                         Interval(RealNotInt, 0.0, 1.0, closed="right"),
                         StrOptions({"sqrt", "log2"}), None],
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "min_samples_split": [Interval(Integral, 2, None, closed="left")],
        "min_samples_leaf": [Interval(Integral, 1, None, closed="left")],
        "bootstrap": ["boolean"],
        "max_samples": [None, Interval(RealNotInt, 0.0, 1.0, closed="right"),
                        Interval(Integral, 1, None, closed="left")],
        "max_bins": [Interval(Integral, 2, 255, closed="both"), None],
        "random_state": ["random_state"],
        "scheme": [StrOptions(set(SCHEMES))],
        "security_parameter": [Interval(Real, 1.0, None, closed="left")],
        "gipe_mode": [StrOptions({"quantile", "order", "paper"})],
        "gipe_bins": [Interval(Integral, 2, None, closed="left")],
        "reveal_leaves": ["boolean"],
        "split_selection": [StrOptions(set(SPLIT_SELECTIONS))],
        "label_epsilon": [Interval(Real, 0.0, None, closed="both"), None],
        "max_round_bytes": [Interval(Integral, 1 << 18, None, closed="left"), None],
        "server": "no_validation",
        "n_jobs": [Integral, None],
        "label_chunk": [Interval(Integral, 1, 64, closed="both")],
        "label_pack_rows": [Interval(Integral, 1, None, closed="left"), None],
        "prediction_reply": [StrOptions({"sums", "leaves"})],
        "verbose": ["verbose"],
        "server_key": [str, None],
        "timeout": [Interval(Real, 0.0, None, closed="left")],
    }

    def __init__(self, n_estimators=100, *, max_features="sqrt", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, bootstrap=True, max_samples=None,
                 max_bins=None, random_state=None, scheme="ckks", security_parameter=6.4,
                 gipe_mode="quantile", gipe_bins=32, reveal_leaves=False,
                 split_selection="gini", label_epsilon=None, max_round_bytes=None,
                 server=None, n_jobs=None, label_chunk=2, label_pack_rows=None,
                 prediction_reply="sums", verbose=0, server_key=None, timeout=120.0):
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.bootstrap = bootstrap
        self.max_samples = max_samples
        self.max_bins = max_bins
        self.random_state = random_state
        self.scheme = scheme
        self.security_parameter = security_parameter
        self.gipe_mode = gipe_mode
        self.gipe_bins = gipe_bins
        self.reveal_leaves = reveal_leaves
        self.split_selection = split_selection
        self.label_epsilon = label_epsilon
        self.max_round_bytes = max_round_bytes
        self.server = server
        self.n_jobs = n_jobs
        self.label_chunk = label_chunk
        self.label_pack_rows = label_pack_rows
        self.prediction_reply = prediction_reply
        self.verbose = verbose
        self.server_key = server_key
        self.timeout = timeout

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Encrypt ``X`` and ``y``, let the server grow the forest, answer its queries."""
        stats = ProtocolStats()
        started = time.perf_counter()
        setup, labels = self._encrypt(X, y)
        server = self._fresh_server()
        self._upload(server, setup, labels, stats, started)
        return self._train(server, setup, stats, started)

    def _encrypt(self, X, y) -> tuple[Message, Iterator[Message]]:
        """Stage 1 of :meth:`fit`, offline: validate, fit GIPE, make the HE keys and layout.

        Returns the ``setup`` message and the ``labels`` messages (a generator that
        encrypts one message's packs at a time). Neither carries the server's session id
        yet: :meth:`_upload` adds it (:meth:`_session_labels`).
        """
        self._check_selection_params()
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        n_classes = len(self.classes_)
        if n_classes < 2:
            raise ValueError("PrivateForestClient needs at least two classes")
        y_encoded = encoder.transform(y)
        n_samples, n_features = X.shape
        if self.max_samples is not None and isinstance(self.max_samples, Integral) \
                and self.max_samples > n_samples:
            raise ValueError(f"max_samples={self.max_samples} exceeds the {n_samples} "
                             "training rows")
        self.encryptor_ = self._new_encryptor()
        X_cipher = self.encryptor_.fit_transform(X, y_encoded).astype(np.float64)
        layout = BlockLayout(self.scheme, SecretContext.slot_count(self.scheme), n_classes,
                             X.shape[0], self.label_pack_rows)
        # CKKS: the giant-step key of the row sums (predict_proba) as well.
        giant = ([layout.giant_step * layout.stride]
                 if self.scheme == "ckks" and layout.giant_step < layout.cycle else [])
        self._he = SecretContext(self.scheme, rotation_step=layout.stride,
                                 extra_rotations=giant)
        self._layout = layout
        self._n_classes = n_classes
        meta = {"n_classes": n_classes, **forest_meta(self, n_samples, n_features),
                "max_round_bytes": None if self.max_round_bytes is None
                else int(self.max_round_bytes),
                "label_pack_rows": None if self.label_pack_rows is None
                else int(self.label_pack_rows)}
        self._n_draws = meta["n_draws"]
        setup = Message("setup", meta, {"X": X_cipher},
                        {"context": [self._he.public_bytes()]})
        return setup, self._label_messages(y_encoded)

    def _label_messages(self, y_encoded: np.ndarray) -> Iterator[Message]:
        """The labels as packs of ``rows_per_pack`` rows, ``label_chunk`` packs per
        message (without the session id)."""
        layout = self._layout
        rows_per_message = layout.rows_per_pack * self.label_chunk
        for start in range(0, y_encoded.shape[0], rows_per_message):
            packs = self._he.encrypt_packed_labels(y_encoded[start: start + rows_per_message],
                                                   layout)
            yield Message("labels", {"context": self._he.fingerprint_public, "start": start},
                          blobs={"labels": packs})

    def _upload(self, server, setup: Message, labels: Iterable[Message],
                stats: ProtocolStats, started: float) -> None:
        """Stage 2 of :meth:`fit`: open the session with ``setup``, send every labels
        message."""
        self._accept_session(self._exchange(server, setup, "session", stats))
        n_samples = setup.arrays["X"].shape[0]
        for message in labels:
            self._exchange(server, self._session_labels(message), "ack", stats)
            if self.verbose:
                done = min(n_samples, message.value("start", int)
                           + self._layout.rows_per_pack * self.label_chunk)
                print(f"[PrivateForestClient] labels {done}/{n_samples} rows, "
                      f"{stats.bytes_sent / 1e6:.1f} MB sent, "
                      f"{time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)

    def _accept_session(self, reply: Message) -> None:
        """Take the session id of the server's reply to ``setup`` (checking its layout)."""
        self.session_ = reply.value("session", str)
        if reply.value("rows_per_pack", int) != self._layout.rows_per_pack:
            raise ProtocolError(f"session: the server packs {reply.meta['rows_per_pack']} "
                                f"label rows per ciphertext, this client "
                                f"{self._layout.rows_per_pack}")

    def _session_labels(self, message: Message) -> Message:
        """A labels message of :meth:`_encrypt` addressed to the current session."""
        return Message("labels", self._meta({"start": message.value("start", int)}),
                       blobs={"labels": message.blob_list("labels")})

    def _train(self, server, setup: Message, stats: ProtocolStats, started: float, *,
               answered: Sequence[Message] = (), on_answer: Callable | None = None):
        """Stage 3 of :meth:`fit`: ask the uploaded session to train, answer its rounds.

        The client grows the same label-free plan as the server (from the ciphers and forest
        parameters of ``setup``) to check each query.

        Parameters
        ----------
        answered : sequence of Message
            To resume a session whose client stopped during the rounds: the answers that
            client sent (as ``on_answer`` recorded them), replayed on the plan to bring it to
            the server's level; the rounds then continue from the server's current reply
            (``server.current_reply()``).
        on_answer : callable or None
            Called with each answer before it is sent (to record it for a resume).
        """
        X_cipher = setup.arrays["X"]
        n_samples, n_features = X_cipher.shape
        self._growth = ForestGrowth(X_cipher, ForestSpec.from_meta(setup.meta, n_samples,
                                                                   n_features))
        self._levels_chosen = 0
        self._rng = secrets.SystemRandom()
        if answered:
            reply = self._resume(server, answered, stats)
        else:
            reply = self._exchange(server, Message("train", self._meta({})),
                                   ("query", "trained"), stats)
        while reply.kind == "query":
            if self.split_selection == "blind":
                raise ProtocolError("the server sent a query in label-blind mode, where the "
                                    "client answers none")
            stats.rounds += 1
            round_started = time.perf_counter()
            answer = self._answer(reply)
            if on_answer is not None:
                on_answer(answer)
            reply_bytes = stats.bytes_per_round[-1]
            reply = self._exchange(server, answer, ("query", "trained"), stats)
            if self.verbose:
                print(f"[PrivateForestClient] round {stats.rounds}: "
                      f"{answer.arrays['node'].shape[0]} open nodes, "
                      f"{reply_bytes / 1e6:.1f} MB query, "
                      f"{time.perf_counter() - round_started:.1f} s", file=sys.stderr, flush=True)
        if self.split_selection != "blind":
            self._check_finished()
        self.epsilon_spent_ = self._epsilon_spent()
        del self._growth
        stats.client_seconds = time.perf_counter() - started - stats.server_seconds
        self.fit_stats_ = stats
        return self

    def _resume(self, server, answered: Sequence[Message], stats: ProtocolStats) -> Message:
        """Replay the recorded answers on the plan, then take the server's current reply;
        if the last answer never reached the server (its query is still open), send it."""
        for answer in answered:
            trees = np.unique(answer.array("tree", "int64", 1)).tolist()
            plans = [p for t in trees for p in self._growth.plan_tree(t)[0]]
            if not np.array_equal(answer.array("node", "int64", 1),
                                  [p.node.node_id for p in plans]):
                raise ProtocolError("the recorded answers do not replay on this forest's "
                                    "plan: they belong to another package")
            self._levels_chosen += len(trees)
            self._growth.apply_level(plans, answer.array("choice", "int64", 1).tolist())
        last = answered[-1].value("round", int)
        data = server.current_reply()
        reply = decode_message(data, ("query", "trained"))
        stats.bytes_received += len(data)
        if reply.kind == "query":
            stats.bytes_per_round.append(len(data))
            if reply.value("round", int) == last:
                return self._exchange(server, answered[-1], ("query", "trained"), stats)
            if reply.value("round", int) != last + 1:
                raise ProtocolError(f"the server's open query is round "
                                    f"{reply.value('round', int)}; this client's recorded "
                                    f"answers end at round {last}")
        return reply

    def _check_selection_params(self) -> None:
        if self.split_selection == "dp" and self.label_epsilon is None:
            raise ValueError('split_selection="dp" needs label_epsilon (ε per choice)')
        if self.split_selection != "dp" and self.label_epsilon is not None:
            raise ValueError(f"label_epsilon is used only with split_selection='dp', "
                             f"not {self.split_selection!r}")
        if self.reveal_leaves and self.split_selection != "gini":
            raise ValueError("reveal_leaves=True is the paper's rule for "
                             "split_selection='gini' only")

    def _new_encryptor(self) -> GiniPreservingEncryptor:
        """GIPE with keys and jitter from the OS: nothing the server receives seeds it."""
        return GiniPreservingEncryptor(self.security_parameter, mode=self.gipe_mode,
                                       n_bins=self.gipe_bins).set_output(transform="default")

    def _epsilon_spent(self) -> float:
        if self.split_selection == "blind":
            return 0.0
        if self.split_selection == "gini":
            return math.inf
        return float(self.label_epsilon) * self._levels_chosen

    def _server(self):
        if self.server is not None and not isinstance(self.server, str):
            return self.server
        if getattr(self, "server_", None) is None:
            if isinstance(self.server, str):
                from ..service.transport import HTTPTransport

                self.server_ = HTTPTransport(self.server, self.server_key,
                                             timeout=self.timeout)
            else:
                from .server import PrivateForestServer

                self.server_ = PrivateForestServer(n_jobs=self.n_jobs)
        return self.server_

    def _fresh_server(self):
        """The server for a new fit; an embedded one (or an HTTP session) is replaced,
        dropping old sessions."""
        if self.server is None or isinstance(self.server, str):
            self.server_ = None
        return self._server()

    def _meta(self, extra: dict) -> dict:
        return {"session": self.session_, "context": self._he.fingerprint_public, **extra}

    def _exchange(self, server, message: Message, expected, stats: ProtocolStats) -> Message:
        data = encode_message(message)
        started = time.perf_counter()
        reply = server.handle(data)
        stats.server_seconds += time.perf_counter() - started
        stats.bytes_sent += len(data)
        stats.bytes_received += len(reply)
        message = decode_message(reply, expected)
        if message.kind == "query":
            stats.bytes_per_round.append(len(reply))
        return message

    def _answer(self, query: Message) -> Message:
        token = query.value("token", str)
        round_ = query.value("round", int)
        plans = self._check_plan(query)
        squares = self._decrypt_blocks(query)
        choice = decide_splits(self._growth, plans, squares, self._n_classes,
                               self.split_selection, self.reveal_leaves, self.label_epsilon,
                               self._rng)
        self._levels_chosen += len({p.tree for p in plans})
        self._growth.apply_level(plans, choice.tolist())
        arrays = {"tree": query.array("tree", "int64", 1),
                  "node": query.array("node", "int64", 1), "choice": choice}
        return Message("answer", self._meta({"round": round_, "token": token}), arrays)

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
        if self.max_round_bytes is None:  # one round covers every tree still growing
            for t in sorted(set(range(n_trees)) - set(covered)):
                if growth.trees[t].open and growth.plan_tree(t)[0]:
                    raise ProtocolError(f"query: tree {t} has open nodes but is not in the "
                                        "round")
        expected = {
            "tree": [p.tree for p in plans],
            "node": [p.node.node_id for p in plans],
            "weight": [p.weight for p in plans],
            "tree_weight": [growth.trees[p.tree].total_weight for p in plans],
            "n_candidates": [p.n_candidates for p in plans],
            "left_weight": [c.left_weight for p in plans for cs in p.candidates for c in cs],
        }
        for name, values in expected.items():
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

    def _decrypt_blocks(self, query: Message) -> np.ndarray:
        """Per candidate in query order ``(ΣL², ΣR²)`` as exact integers, each node's
        candidates followed by its total block ``(ΣT², 0)``. The query carries each node's
        candidates' ``L`` and then its ``T`` (per class); ``R = T - L``, checked to be a count."""
        layout = self._layout
        shift = query.value("shift", int)
        if (query.value("block_size", int), query.value("blocks_per_ciphertext", int)) != (
                layout.block_size, layout.blocks_per_ciphertext):
            raise ProtocolError("query: block layout differs from this client's "
                                f"({layout.block_size} slots × {layout.blocks_per_ciphertext})")
        if not 0 <= shift <= 60:
            raise ProtocolError(f"query: shift {shift} out of range")
        ciphertexts = query.blob_list("squares")
        positions = query.array("block_position", "int64", 1)
        n_candidates = query.array("n_candidates", "int64", 1)
        n_blocks = int((n_candidates + 1).sum())
        if (n_candidates < 1).any() or positions.shape[0] != n_blocks:
            raise ProtocolError(f"query: {positions.shape[0]} block positions for "
                                f"{int(n_candidates.sum())} candidates and "
                                f"{n_candidates.shape[0]} node totals (each node needs >= 1 "
                                "candidate)")
        per_ct = layout.blocks_per_ciphertext
        n_places = len(ciphertexts) * per_ct
        if positions.size and (positions.min() < 0 or positions.max() >= n_places
                               or np.unique(positions).shape[0] != positions.shape[0]):
            raise ProtocolError(f"query: block positions must be distinct blocks of the "
                                f"{len(ciphertexts)} ciphertexts")
        squares = np.zeros((max(n_places, 1), layout.tau))
        for i, blob in enumerate(ciphertexts):
            slots = self._decrypt_blob(blob, "query", complex_slots=True)
            squares[i * per_ct: (i + 1) * per_ct] = layout.block_squares(slots)
        squares = squares[positions]  # (blocks, τ) in query order
        if self.scheme == "ckks":
            squares = _integers(squares * 4.0 ** shift, "squared counts", "the query was")
        else:
            squares = self._he.centered(squares.astype(np.int64)).astype(np.float64)
        counts = np.sqrt(np.maximum(squares, 0.0))
        if (squares < 0).any() or (np.rint(counts) ** 2 != squares).any():
            raise ProtocolError("decrypted squared counts are not squares of counts: the "
                                "query was not made with this client's key or is corrupted")
        counts = np.rint(counts)
        blocks, start = [], 0
        for k in n_candidates.tolist():
            left, total = counts[start: start + k], counts[start + k]
            right = total - left
            if (right < 0).any():
                raise ProtocolError("query: a candidate's left counts exceed its node's class "
                                    "totals: not made with this client's key or corrupted")
            blocks.append(np.stack([(left ** 2).sum(axis=1), (right ** 2).sum(axis=1)],
                                   axis=1))
            blocks.append([[float((total ** 2).sum()), 0.0]])
            start += k + 1
        return np.concatenate(blocks) if blocks else np.zeros((0, 2))

    def _decrypt_blob(self, blob: bytes, where: str, complex_slots: bool = False) -> np.ndarray:
        try:
            ct = self._he.load_ciphertext(blob)
        except HEError as exc:
            raise ProtocolError(f"{where}: {exc}") from None
        return self._he.decrypt(ct, complex_slots=complex_slots)

    # ------------------------------------------------------------------ predict
    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities: mean over trees of the leaf class frequencies (decrypted)."""
        check_is_fitted(self, "session_")
        self._validate_params()
        stats = ProtocolStats()
        started = time.perf_counter()
        X = validate_data(self, X, dtype=np.float64, reset=False)
        X_cipher = self.encryptor_.transform(X).astype(np.float64)
        request = Message("predict", self._meta({"reply": self.prediction_reply}),
                          {"X": X_cipher})
        reply = self._exchange(self._server(), request, "scores", stats)
        n_trees = reply.value("n_trees", int)
        if reply.value("n_rows", int) != X.shape[0] or n_trees != self.n_estimators:
            raise ProtocolError(f"scores: expected {X.shape[0]} rows × "
                                f"{self.n_estimators} trees")
        kind = reply.value("reply", str)
        if kind == "sums" and self.scheme == "ckks":
            # Each row sums to n_trees up to noise; dividing by the row's own sum keeps
            # the probabilities summing to one, as a forest's do.
            sums = self._row_sums(reply, X.shape[0])
            proba = sums / sums.sum(axis=1, keepdims=True)
        elif kind == "leaves":
            counts = self._leaf_counts(reply, X.shape[0], n_trees)
            totals = counts.sum(axis=2, keepdims=True)
            if (counts < 0).any() or (totals <= 0).any() or (totals > self._n_draws).any():
                raise ProtocolError("decrypted leaf counts are not counts of at most "
                                    f"{self._n_draws} bootstrap draws: the scores were not "
                                    "made with this client's key or are corrupted")
            proba = (counts / totals).mean(axis=1)
        else:
            raise ProtocolError(f"scores: unknown reply {kind!r} for a {self.scheme} client")
        stats.client_seconds = time.perf_counter() - started - stats.server_seconds
        stats.reply = kind
        self.predict_stats_ = stats
        return proba

    def _row_sums(self, reply: Message, n_rows: int) -> np.ndarray:
        """``(rows, τ)`` per-row sums over trees of leaf class frequencies (CKKS), checked:
        every frequency is in [0, 1] per tree, and each row's sum over classes is the number
        of trees."""
        layout = self._layout
        if reply.value("rows_per_sum", int) != layout.rows_per_sum:
            raise ProtocolError("scores: row-sum layout differs from this client's "
                                f"({layout.rows_per_sum} rows per ciphertext)")
        blobs = reply.blob_list("sums")
        if len(blobs) != -(-n_rows // layout.rows_per_sum):
            raise ProtocolError(f"scores: {len(blobs)} row-sum ciphertexts for {n_rows} rows")
        sums = np.concatenate([layout.row_sums(self._decrypt_blob(blob, "scores",
                                                                  complex_slots=True))
                               for blob in blobs])[:n_rows] if blobs else \
            np.zeros((0, layout.tau))
        n_trees = self.n_estimators
        tolerance = _CKKS_SUM_TOLERANCE * n_trees
        if (sums < -tolerance).any() or (sums > n_trees + tolerance).any() or \
                (np.abs(sums.sum(axis=1) - n_trees) > tolerance).any():
            raise ProtocolError("decrypted row sums are not sums of class frequencies over "
                                f"{n_trees} trees: the scores were not made with this client's "
                                "key or are corrupted")
        return np.clip(sums, 0.0, None)

    def _leaf_counts(self, reply: Message, n_rows: int, n_trees: int) -> np.ndarray:
        """``(rows, trees, τ)`` leaf class counts from a scores reply: the leaf-store
        ciphertexts decrypted once, each (row, tree) reading its leaf's position."""
        layout = self._layout
        if reply.value("leaves_per_ciphertext", int) != layout.leaves_per_ciphertext:
            raise ProtocolError("scores: leaf layout differs from this client's "
                                f"({layout.leaves_per_ciphertext} leaves per ciphertext)")
        blobs = reply.blob_list("leaves")
        positions = reply.array("leaf", "int32", 2)
        if positions.shape != (n_rows, n_trees):
            raise ProtocolError(f"scores: leaf positions have shape {positions.shape}, "
                                f"expected {(n_rows, n_trees)}")
        n_leaves = len(blobs) * layout.leaves_per_ciphertext
        if positions.size and (positions.min() < 0 or positions.max() >= n_leaves):
            raise ProtocolError(f"scores: leaf positions must lie in [0, {n_leaves})")
        table = np.zeros((max(n_leaves, 1), layout.tau))
        for i, blob in enumerate(blobs):
            rows = slice(i * layout.leaves_per_ciphertext, (i + 1) * layout.leaves_per_ciphertext)
            table[rows] = layout.leaf_counts(
                self._decrypt_blob(blob, "scores", complex_slots=True))
        draws = reply.array("draws", "int32", 2)
        if draws.shape != (n_rows, n_trees):
            raise ProtocolError(f"scores: leaf draws have shape {draws.shape}, expected "
                                f"{(n_rows, n_trees)}")
        if self.scheme == "ckks":  # the store holds frequencies: counts / draws
            counts = _integers(table[positions] * draws[:, :, None], "leaf counts",
                               "the scores were")
        else:
            counts = self._he.centered(table[positions])
        if (counts.sum(axis=2) != draws).any():
            raise ProtocolError("scores: decrypted leaf counts do not add up to the leaves' "
                                "bootstrap draws: the scores were not made with this client's "
                                "key or are corrupted")
        return counts.astype(np.float64)

    def close(self) -> None:
        """Ask the server to forget this model's session (its ciphertexts and trees).

        The client keeps its keys and GIPE state; predictions need a new ``fit`` afterwards.
        """
        check_is_fitted(self, "session_")
        self._exchange(self._server(), Message("close", self._meta({})), "closed",
                       ProtocolStats())
        del self.session_

    def save(self, path) -> None:
        """Save the fitted client's secret material to the directory ``path`` (0600 files).

        Keys (the HE secret key included), GIPE state, classes, parameters and the server
        session (URL, session id and token; or, with the embedded server, the trained forest
        itself), so that :meth:`load` predicts tomorrow what this client predicts today.
        No pickle is written or read.
        """
        from ._client_state import save_client

        check_is_fitted(self, "session_")
        save_client(self, path)

    @classmethod
    def load(cls, path, *, server=None, server_key=None) -> PrivateForestClient:
        """A client saved by :meth:`save`, connected to its server session again.

        Parameters
        ----------
        path : str or path-like
        server : str, server object or None
            Overrides the saved server (e.g. the server's new URL).
        server_key : str or None
            Access key, only needed to :meth:`fit` again against a URL.
        """
        from ._client_state import load_client

        return load_client(cls, path, server=server, server_key=server_key)

    def predict(self, X) -> np.ndarray:
        """Most probable class of each row.

        Ties go to the first class, as the plaintext forest's ``argmax`` sends them. Row
        sums (CKKS) are approximate, so there classes within ``1e-5`` of the best count as
        tied: an exact tie between two classes (e.g. half the trees each) would otherwise
        be broken by noise.
        """
        check_is_fitted(self, "session_")
        proba = self.predict_proba(X)
        if self.predict_stats_.reply == "sums":
            best = proba.max(axis=1, keepdims=True)
            return self.classes_[np.argmax(proba >= best - _CKKS_TIE_TOLERANCE, axis=1)]
        return self.classes_[np.argmax(proba, axis=1)]


def _integers(values: np.ndarray, what: str, source: str) -> np.ndarray:
    """CKKS results that must be integers, rounded; a larger residue is not rounding error."""
    rounded = np.rint(values)
    if np.abs(values - rounded).max(initial=0.0) > _CKKS_INTEGER_TOLERANCE:
        raise ProtocolError(f"decrypted {what} are not integers: {source} not made with "
                            "this client's key or corrupted, or (large nodes) CKKS ran out of "
                            "precision: nodes of several thousand rows need scheme='bfv'")
    return rounded


def forest_seed(random_state) -> int:
    """The forest's seed, as RandomForestClassifier reads ``random_state`` (None: the OS)."""
    if random_state is None:
        return secrets.randbits(32)
    if isinstance(random_state, Integral):
        return int(random_state)
    return int(check_random_state(random_state).randint(2**32 - 1))


def forest_meta(estimator, n_samples: int, n_features: int) -> dict:
    """An estimator's forest parameters as the setup message carries them
    (RandomForestClassifier's meaning, resolved for the data)."""
    return {
        "n_estimators": int(estimator.n_estimators),
        "max_features": resolve_max_features(estimator.max_features, n_features),
        "max_depth": None if estimator.max_depth is None else int(estimator.max_depth),
        "min_samples_split": int(estimator.min_samples_split),
        "min_samples_leaf": int(estimator.min_samples_leaf),
        "bootstrap": bool(estimator.bootstrap),
        "n_draws": resolve_n_draws(estimator.max_samples, n_samples) if estimator.bootstrap
        else n_samples,
        "max_bins": None if estimator.max_bins is None else int(estimator.max_bins),
        "random_state": forest_seed(estimator.random_state),
        "split_selection": estimator.split_selection,
    }


def _node_scores(squares: np.ndarray, weight: np.ndarray, n_candidates: np.ndarray,
                 left_weight: np.ndarray, n_classes: int):
    """Per node: ``(index, W, ΣT², children)`` with ``children[c] = W_l - ΣL²/W_l + W_r -
    ΣR²/W_r`` (the weighted children impurity of candidate ``c``), after checking that the
    decrypted squares can be this node's (a wrong key or corruption cannot pass)."""
    n_nodes = weight.shape[0]
    expected_blocks = n_nodes + int(n_candidates.sum())
    if squares.shape[0] < expected_blocks:
        raise ProtocolError(f"query describes {expected_blocks} blocks, its ciphertexts "
                            f"hold {squares.shape[0]}")
    block = 0
    cand = 0
    for i in range(n_nodes):
        w = float(weight[i])
        k = int(n_candidates[i])
        sq = squares[block: block + k]
        sq_total = squares[block + k, 0]
        w_left = left_weight[cand: cand + k].astype(np.float64)
        block += k + 1
        cand += k
        # Σ over classes of squared counts lies in [W²/τ, W²] for W rows: anything else did
        # not come from this client's labels (another key, corruption).
        if (not w * w / n_classes - 0.5 <= sq_total <= w * w
                or (sq[:, 0] > w_left ** 2).any() or (sq[:, 1] > (w - w_left) ** 2).any()
                or (sq[:, 0] < w_left ** 2 / n_classes - 0.5).any()
                or (sq[:, 1] < (w - w_left) ** 2 / n_classes - 0.5).any()):
            raise ProtocolError("decrypted squared counts are out of range for the node's "
                                "weight: the query was not made with this client's key or "
                                "is corrupted")
        w_right = w - w_left
        children = (w_left - sq[:, 0] / w_left) + (w_right - sq[:, 1] / w_right)
        yield i, w, sq_total, children


def choose_splits(squares: np.ndarray, weight: np.ndarray, tree_weight: np.ndarray,
                  n_candidates: np.ndarray, left_weight: np.ndarray,
                  n_classes: int) -> np.ndarray:
    """The paper's decision per node: index of the best candidate, or -1 for a leaf.

    Parameters
    ----------
    squares : ndarray of shape (n_blocks, 2)
        Decrypted blocks in query order: per node, one ``(ΣL², ΣR²)`` block per candidate
        followed by the node's total block ``(ΣT², 0)``; exact integers.
    weight, tree_weight, n_candidates : ndarray of shape (n_nodes,)
        Node weight ``W``, its tree's root weight, number of candidates.
    left_weight : ndarray of shape (n_candidates_total,)
        Left child weight ``W_l`` of every candidate.
    n_classes : int
        τ; with the weights it bounds every squared sum (a check against wrong keys).

    Returns
    -------
    choice : ndarray of int64
        As the plaintext grower decides: a pure node (Gini ≤ eps) is a leaf; otherwise the
        candidate with the smallest weighted children impurity
        ``W_l - ΣL²/W_l + W_r - ΣR²/W_r`` (first in the server's order on ties), unless it
        does not decrease the impurity.
    """
    choice = np.full(weight.shape[0], -1, dtype=np.int64)
    for i, w, sq_total, children in _node_scores(squares, weight, n_candidates, left_weight,
                                                  n_classes):
        impurity = 1.0 - sq_total / (w * w)
        if impurity <= _EPSILON or children.shape[0] == 0:
            continue
        best = int(np.argmin(children))
        improvement = (w * impurity - children[best]) / float(tree_weight[i])
        if improvement + _EPSILON < 0.0:
            continue
        choice[i] = best
    return choice


def decide_splits(growth: ForestGrowth, plans: list[NodePlan], squares: np.ndarray,
                  n_classes: int, split_selection: str, reveal_leaves: bool,
                  label_epsilon: float | None, rng) -> np.ndarray:
    """The client's answer for the planned nodes of one round, from their decrypted squares.

    ``"gini"`` takes the paper's choice (:func:`choose_splits`); unless ``reveal_leaves``, a
    node the paper would close ("leaf") gets a uniformly random candidate instead. ``"dp"``
    draws by the exponential mechanism with ε = ``label_epsilon``. ``rng`` is a
    ``random.Random``-like source (the client uses the OS's).
    """
    weight = np.array([p.weight for p in plans], dtype=np.int64)
    n_candidates = np.array([p.n_candidates for p in plans], dtype=np.int64)
    left_weight = np.array([c.left_weight for p in plans for cs in p.candidates for c in cs],
                           dtype=np.int64)
    if split_selection == "dp":
        max_count = np.array([int(growth.weights(p.tree)[p.node.samples].max())
                              for p in plans], dtype=np.int64)
        return exponential_mechanism(squares, weight, n_candidates, left_weight, n_classes,
                                     label_epsilon, split_sensitivity(max_count), rng)
    tree_weight = np.array([growth.trees[p.tree].total_weight for p in plans],
                           dtype=np.int64)
    choice = choose_splits(squares, weight, tree_weight, n_candidates, left_weight, n_classes)
    if not reveal_leaves:
        hidden = np.flatnonzero(choice < 0)
        choice[hidden] = [rng.randrange(int(n_candidates[i])) for i in hidden]
    return choice


def split_sensitivity(max_count: np.ndarray) -> np.ndarray:
    """Sensitivity Δ of the split utility ``u = -(W_l - ΣL²/W_l + W_r - ΣR²/W_r)`` to one
    row's label, for nodes whose heaviest row is drawn ``max_count`` times.

    Relabelling a row of bootstrap count ``k`` from class ``a`` to ``b`` inside a child of
    weight ``W_c`` changes that child's ``ΣL²`` by ``2k(L_b + k - L_a)``, whose magnitude is
    at most ``2k(W_c - k)`` (``L_a >= k``, ``L_a + L_b <= W_c``); divided by ``W_c`` the
    utility moves by less than ``2k``. The other child is untouched, so ``Δ = 2·max k``.
    """
    return 2.0 * np.asarray(max_count, dtype=np.float64)


def exponential_mechanism(squares: np.ndarray, weight: np.ndarray, n_candidates: np.ndarray,
                          left_weight: np.ndarray, n_classes: int, epsilon: float,
                          sensitivity: np.ndarray, rng) -> np.ndarray:
    """Label-DP split choice: candidate ``c`` of a node with probability proportional to
    ``exp(ε·u_c / (2Δ))``, ``u_c`` the negated weighted children impurity.

    Each choice is ε-label-DP (McSherry & Talwar's exponential mechanism); ``ε = 0`` draws
    uniformly and ``ε = inf`` takes the best candidate (first on ties), as the Gini choice.
    ``rng`` is a ``random.Random``-like source (``random()``); the client uses the OS's.
    """
    choice = np.empty(weight.shape[0], dtype=np.int64)
    for i, _, _, children in _node_scores(squares, weight, n_candidates, left_weight,
                                          n_classes):
        utility = -children
        if math.isinf(epsilon):
            choice[i] = int(np.argmax(utility))
            continue
        logits = epsilon * (utility - utility.max()) / (2.0 * float(sensitivity[i]))
        cumulative = np.cumsum(np.exp(logits))
        draw = rng.random() * cumulative[-1]
        choice[i] = min(int(np.searchsorted(cumulative, draw, side="right")),
                        children.shape[0] - 1)
    return choice
