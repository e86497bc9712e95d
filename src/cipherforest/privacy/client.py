"""The data owner's side of the encrypted random forest: :class:`PrivateForestClient`.

The client encrypts features with GIPE and labels with CKKS (or BFV, the exact mode), hands
the ciphertexts and its *public* homomorphic context to a server, then answers one query per
tree level for the whole forest: it decrypts the packed squared class counts, computes every
candidate's Gini impurity and tells the server, per node, which candidate wins or that the
node is a leaf. Secret keys never leave the client. Predictions come back as encrypted leaf
counts; the client decrypts and averages them as a random forest does.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from ..ensemble._base import resolve_n_draws
from ..tree._classes import resolve_max_features
from ._blocks import BlockLayout
from .gipe import GiniPreservingEncryptor
from .he import SCHEMES, HEError, SecretContext
from .protocol import Message, ProtocolError, decode_message, encode_message

__all__ = ["PrivateForestClient", "ProtocolStats", "choose_splits"]

_EPSILON = np.finfo(np.float64).eps
# CKKS returns squared counts with an error far below this; more means a wrong key or a
# corrupted ciphertext, not rounding.
_CKKS_INTEGER_TOLERANCE = 0.25


@dataclass
class ProtocolStats:
    """Costs of one fit or predict as seen by the client."""

    client_seconds: float = 0.0
    server_seconds: float = 0.0
    rounds: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    bytes_per_round: list[int] = field(default_factory=list)


class PrivateForestClient(ClassifierMixin, BaseEstimator):
    """Random forest trained by a server on encrypted data (GIPE features, CKKS labels).

    Parameters mirror :class:`~cipherforest.ensemble.RandomForestClassifier` (Gini criterion);
    with the same ``random_state`` the server grows the trees that random forest grows on the
    GIPE ciphertexts with clear labels.

    Parameters
    ----------
    n_estimators : int, default=100
    max_features : {"sqrt", "log2"}, int, float or None, default="sqrt"
    max_depth : int or None, default=None
    min_samples_split : int, default=2
        The paper's α: nodes with fewer samples become leaves.
    min_samples_leaf : int, default=1
    bootstrap : bool, default=True
    max_samples : int, float or None, default=None
    max_bins : int or None, default=None
        Candidate thresholds at most ``max_bins - 1`` bin edges per feature (histogram
        forest) instead of every midpoint: fewer blocks per round.
    random_state : int or None, default=None
        Seeds the forest (sent to the server) and, independently, GIPE.
    scheme : {"ckks", "bfv"}, default="ckks"
        Label encryption. "bfv" is the exact mode: integer counts, decisions identical to the
        plaintext forest's by construction.
    security_parameter : float, default=6.4
        GIPE's λ.
    max_round_bytes : int or None, default=None
        None: one round per tree level for all trees (the paper's O(depth) rounds). An int
        (at least 256 KiB) caps each query: a round then covers the current levels of as many
        trees as fit (at least one tree, which alone may exceed the cap), so rounds grow to
        about total bytes / cap.
    server : PrivateForestServer-like or None, default=None
        Anything with ``handle(bytes) -> bytes``; None runs a server in this process.
    n_jobs : int or None, default=None
        Worker processes of the embedded server (None: 1, -1: all cores).
    label_chunk : int, default=2
        Label packs per upload message (each pack is one ciphertext holding the labels of up
        to ``4096 / τ`` rows, τ rounded up to a power of two; at most 64 per message).
    label_pack_rows : int or None, default=None
        At most this many rows' labels per label ciphertext (None: as many as the slots
        hold). Fewer rows per pack mean fewer candidate lanes per query ciphertext.
    verbose : int, default=0
        1: print upload progress and one line per round (round, open nodes, bytes, seconds).

    Attributes
    ----------
    classes_ : ndarray
    encryptor_ : GiniPreservingEncryptor
        The GIPE state (secret).
    session_ : str
        Server session id.
    fit_stats_ : ProtocolStats
    predict_stats_ : ProtocolStats
        Of the last ``predict_proba`` call.
    """

    def __init__(self, n_estimators=100, *, max_features="sqrt", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, bootstrap=True, max_samples=None,
                 max_bins=None, random_state=None, scheme="ckks", security_parameter=6.4,
                 max_round_bytes=None, server=None, n_jobs=None, label_chunk=2,
                 label_pack_rows=None, verbose=0):
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
        self.max_round_bytes = max_round_bytes
        self.server = server
        self.n_jobs = n_jobs
        self.label_chunk = label_chunk
        self.label_pack_rows = label_pack_rows
        self.verbose = verbose

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Encrypt ``X`` and ``y``, let the server grow the forest, answer its queries."""
        stats = ProtocolStats()
        started = time.perf_counter()
        self._validate_params_simple()
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        n_classes = len(self.classes_)
        if n_classes < 2:
            raise ValueError("PrivateForestClient needs at least two classes")
        y_encoded = encoder.transform(y)
        forest_seed, gipe_seed = self._seeds()
        self.encryptor_ = GiniPreservingEncryptor(self.security_parameter,
                                                  random_state=gipe_seed)
        X_cipher = self.encryptor_.fit_transform(X, y_encoded).astype(np.float64)
        layout = BlockLayout(self.scheme, SecretContext.slot_count(self.scheme), n_classes,
                             X.shape[0], self.label_pack_rows)
        self._he = SecretContext(self.scheme, rotation_step=layout.stride)
        self._layout = layout
        server = self._fresh_server()
        self._n_classes = n_classes

        n_samples, n_features = X.shape
        meta = {
            "n_classes": n_classes,
            "n_estimators": int(self.n_estimators),
            "max_features": resolve_max_features(self.max_features, n_features),
            "max_depth": None if self.max_depth is None else int(self.max_depth),
            "min_samples_split": int(self.min_samples_split),
            "min_samples_leaf": int(self.min_samples_leaf),
            "bootstrap": bool(self.bootstrap),
            "n_draws": resolve_n_draws(self.max_samples, n_samples) if self.bootstrap
            else n_samples,
            "max_bins": None if self.max_bins is None else int(self.max_bins),
            "random_state": forest_seed,
            "max_round_bytes": None if self.max_round_bytes is None
            else int(self.max_round_bytes),
            "label_pack_rows": None if self.label_pack_rows is None
            else int(self.label_pack_rows),
        }
        self._n_draws = meta["n_draws"]
        setup = Message("setup", meta, {"X": X_cipher},
                        {"context": [self._he.public_bytes()]})
        reply = self._exchange(server, setup, "session", stats)
        self.session_ = reply.value("session", str)
        if reply.value("rows_per_pack", int) != layout.rows_per_pack:
            raise ProtocolError(f"session: the server packs {reply.meta['rows_per_pack']} "
                                f"label rows per ciphertext, this client {layout.rows_per_pack}")
        self._upload_labels(server, y_encoded, layout, stats, started)
        reply = self._exchange(server, Message("train", self._meta({})), ("query", "trained"),
                               stats)
        while reply.kind == "query":
            stats.rounds += 1
            round_started = time.perf_counter()
            answer = self._answer(reply)
            reply_bytes = stats.bytes_per_round[-1]
            reply = self._exchange(server, answer, ("query", "trained"), stats)
            if self.verbose:
                print(f"[PrivateForestClient] round {stats.rounds}: "
                      f"{answer.arrays['node'].shape[0]} open nodes, "
                      f"{reply_bytes / 1e6:.1f} MB query, "
                      f"{time.perf_counter() - round_started:.1f} s", flush=True)
        stats.client_seconds = time.perf_counter() - started - stats.server_seconds
        self.fit_stats_ = stats
        return self

    def _upload_labels(self, server, y_encoded: np.ndarray, layout: BlockLayout,
                       stats: ProtocolStats, started: float) -> None:
        """Send the labels as packs of ``rows_per_pack`` rows, ``label_chunk`` packs per
        message."""
        n_samples = y_encoded.shape[0]
        rows_per_message = layout.rows_per_pack * self.label_chunk
        for start in range(0, n_samples, rows_per_message):
            packs = self._he.encrypt_packed_labels(y_encoded[start: start + rows_per_message],
                                                   layout)
            chunk = Message("labels", self._meta({"start": start}), blobs={"labels": packs})
            self._exchange(server, chunk, "ack", stats)
            if self.verbose:
                done = min(n_samples, start + rows_per_message)
                print(f"[PrivateForestClient] labels {done}/{n_samples} rows, "
                      f"{stats.bytes_sent / 1e6:.1f} MB sent, "
                      f"{time.perf_counter() - started:.1f} s", flush=True)

    def _validate_params_simple(self) -> None:
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {self.scheme!r}")
        if not isinstance(self.verbose, Integral) or isinstance(self.verbose, bool) \
                or self.verbose < 0:
            raise ValueError(f"verbose must be a non-negative integer, got {self.verbose!r}")
        if self.label_pack_rows is not None and not (
                isinstance(self.label_pack_rows, Integral)
                and not isinstance(self.label_pack_rows, bool) and self.label_pack_rows >= 1):
            raise ValueError(f"label_pack_rows must be None or a positive integer, "
                             f"got {self.label_pack_rows!r}")
        if isinstance(self.label_chunk, Integral) and not isinstance(self.label_chunk, bool) \
                and self.label_chunk > 64:
            raise ValueError(f"label_chunk must be at most 64 packs, got {self.label_chunk}")
        for name in ("n_estimators", "min_samples_split", "min_samples_leaf", "label_chunk"):
            value = getattr(self, name)
            if not isinstance(value, Integral) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.min_samples_split < 2:
            raise ValueError(f"min_samples_split must be >= 2, got {self.min_samples_split}")
        if self.max_bins is not None and not (isinstance(self.max_bins, Integral)
                                              and 2 <= self.max_bins <= 255):
            raise ValueError(f"max_bins must be None or an integer in [2, 255], "
                             f"got {self.max_bins!r}")
        if self.max_round_bytes is not None and not (
                isinstance(self.max_round_bytes, Integral) and self.max_round_bytes >= 1 << 18):
            raise ValueError("max_round_bytes must be None or an integer >= 256 KiB (262144), "
                             f"got {self.max_round_bytes!r}")
        if self.max_depth is not None and not (isinstance(self.max_depth, Integral)
                                               and self.max_depth >= 1):
            raise ValueError(f"max_depth must be None or a positive integer, "
                             f"got {self.max_depth!r}")

    def _seeds(self) -> tuple[int, int]:
        """The forest's seed (as RandomForestClassifier reads random_state) and GIPE's."""
        if self.random_state is None:
            forest = secrets.randbits(32)
        elif isinstance(self.random_state, Integral):
            forest = int(self.random_state)
        else:
            forest = int(check_random_state(self.random_state).randint(2**32 - 1))
        gipe = int(np.random.SeedSequence([forest, 0x61FE]).generate_state(1)[0])
        return forest, gipe

    def _server(self):
        if self.server is not None:
            return self.server
        if getattr(self, "server_", None) is None:
            from .server import PrivateForestServer

            self.server_ = PrivateForestServer(n_jobs=self.n_jobs)
        return self.server_

    def _fresh_server(self):
        """The server for a new fit; an embedded one is replaced, dropping old sessions."""
        if self.server is None:
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
        squares = self._decrypt_blocks(query)
        choice = choose_splits(
            squares, query.array("weight", "int64", 1), query.array("tree_weight", "int64", 1),
            query.array("n_candidates", "int64", 1), query.array("left_weight", "int64", 1),
            self._n_classes)
        arrays = {"tree": query.array("tree", "int64", 1),
                  "node": query.array("node", "int64", 1), "choice": choice}
        return Message("answer", self._meta({"round": round_, "token": token}), arrays)

    def _decrypt_blocks(self, query: Message) -> np.ndarray:
        """Per block in query order: ``(ΣL², ΣR²)`` as exact integers, each node's
        candidates followed by its total block ``(ΣT², 0)`` (``T = L + R`` per class, the
        same for every candidate of the node: checked)."""
        layout = self._layout
        shift = query.value("shift", int)
        if (query.value("block_size", int), query.value("blocks_per_ciphertext", int)) != (
                layout.block_size, layout.per_ciphertext):
            raise ProtocolError("query: block layout differs from this client's "
                                f"({layout.block_size} slots × {layout.per_ciphertext})")
        if not 0 <= shift <= 60:
            raise ProtocolError(f"query: shift {shift} out of range")
        ciphertexts = query.blob_list("squares")
        positions = query.array("block_position", "int64", 1)
        n_candidates = query.array("n_candidates", "int64", 1)
        if (n_candidates < 1).any() or positions.shape[0] != int(n_candidates.sum()):
            raise ProtocolError(f"query: {positions.shape[0]} block positions for "
                                f"{int(n_candidates.sum())} candidates (each node needs >= 1)")
        n_lanes = len(ciphertexts) * layout.per_ciphertext
        if positions.size and (positions.min() < 0 or positions.max() >= n_lanes
                               or np.unique(positions).shape[0] != positions.shape[0]):
            raise ProtocolError(f"query: block positions must be distinct lanes of the "
                                f"{len(ciphertexts)} ciphertexts")
        squares = np.zeros((max(n_lanes, 1), 2, layout.tau))
        for i, blob in enumerate(ciphertexts):
            slots = self._decrypt_blob(blob, "query", complex_slots=True)
            squares[i * layout.per_ciphertext: (i + 1) * layout.per_ciphertext] = \
                layout.class_squares(slots)
        squares = squares[positions]  # (candidates, 2, τ) in query order
        if self.scheme == "ckks":
            squares = _integers(squares * 4.0 ** shift, "squared counts", "the query was")
        else:
            squares = self._he.centered(squares.astype(np.int64)).astype(np.float64)
        counts = np.sqrt(np.maximum(squares, 0.0))
        if (squares < 0).any() or (np.rint(counts) ** 2 != squares).any():
            raise ProtocolError("decrypted squared counts are not squares of counts: the "
                                "query was not made with this client's key or is corrupted")
        counts = np.rint(counts)
        totals = counts.sum(axis=1)  # (candidates, τ): T of each candidate's node
        blocks, start = [], 0
        for k in n_candidates.tolist():
            node_totals = totals[start: start + k]
            if (node_totals != node_totals[0]).any():
                raise ProtocolError("query: a node's candidates disagree on its class totals: "
                                    "not made with this client's key or corrupted")
            blocks.append(squares[start: start + k].sum(axis=2))
            blocks.append([[float((node_totals[0] ** 2).sum()), 0.0]])
            start += k
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
        stats = ProtocolStats()
        started = time.perf_counter()
        X = validate_data(self, X, dtype=np.float64, reset=False)
        X_cipher = self.encryptor_.transform(X).astype(np.float64)
        request = Message("predict", self._meta({}), {"X": X_cipher})
        reply = self._exchange(self._server(), request, "scores", stats)
        counts = self._leaf_counts(reply, X.shape[0])
        totals = counts.sum(axis=2, keepdims=True)
        if (counts < 0).any() or (totals <= 0).any() or (totals > self._n_draws).any():
            raise ProtocolError("decrypted leaf counts are not counts of at most "
                                f"{self._n_draws} bootstrap draws: the scores were not made "
                                "with this client's key or are corrupted")
        proba = (counts / totals).mean(axis=1)
        stats.client_seconds = time.perf_counter() - started - stats.server_seconds
        self.predict_stats_ = stats
        return proba

    def _leaf_counts(self, reply: Message, n_rows: int) -> np.ndarray:
        """``(rows, trees, τ)`` leaf class counts from a scores reply: the leaf-store
        ciphertexts decrypted once, each (row, tree) reading its leaf's position."""
        layout = self._layout
        n_trees = reply.value("n_trees", int)
        if reply.value("n_rows", int) != n_rows or n_trees != self.n_estimators:
            raise ProtocolError(f"scores: expected {n_rows} rows × {self.n_estimators} trees")
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
        counts = table[positions]
        if self.scheme == "ckks":
            counts = _integers(counts, "leaf counts", "the scores were")
        return self._he.centered(counts).astype(np.float64)

    def close(self) -> None:
        """Ask the server to forget this model's session (its ciphertexts and trees).

        The client keeps its keys and GIPE state; predictions need a new ``fit`` afterwards.
        """
        check_is_fitted(self, "session_")
        self._exchange(self._server(), Message("close", self._meta({})), "closed",
                       ProtocolStats())
        del self.session_

    def predict(self, X) -> np.ndarray:
        """Most probable class of each row."""
        check_is_fitted(self, "session_")
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


def _integers(values: np.ndarray, what: str, source: str) -> np.ndarray:
    """CKKS results that must be integers, rounded; a larger residue is not rounding error."""
    rounded = np.rint(values)
    if np.abs(values - rounded).max(initial=0.0) > _CKKS_INTEGER_TOLERANCE:
        raise ProtocolError(f"decrypted {what} are not integers: {source} not made with "
                            "this client's key or corrupted")
    return rounded


def choose_splits(squares: np.ndarray, weight: np.ndarray, tree_weight: np.ndarray,
                  n_candidates: np.ndarray, left_weight: np.ndarray,
                  n_classes: int) -> np.ndarray:
    """The client's decision per node: index of the best candidate, or -1 for a leaf.

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
    n_nodes = weight.shape[0]
    expected_blocks = n_nodes + int(n_candidates.sum())
    if squares.shape[0] < expected_blocks:
        raise ProtocolError(f"query describes {expected_blocks} blocks, its ciphertexts "
                            f"hold {squares.shape[0]}")
    choice = np.full(n_nodes, -1, dtype=np.int64)
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
        impurity = 1.0 - sq_total / (w * w)
        if impurity <= _EPSILON or k == 0:
            continue
        w_right = w - w_left
        children = (w_left - sq[:, 0] / w_left) + (w_right - sq[:, 1] / w_right)
        best = int(np.argmin(children))
        improvement = (w * impurity - children[best]) / float(tree_weight[i])
        if improvement + _EPSILON < 0.0:
            continue
        choice[i] = best
    return choice
