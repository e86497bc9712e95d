"""The data owner's estimator for the encrypted random forest: :class:`PrivateForestClient`.

The client encrypts features with GIPE and labels with CKKS (or BFV, the exact mode), hands
the ciphertexts and its *public* homomorphic context to a server, then answers one query per
tree level for the whole forest; secret keys never leave it. This module is the
scikit-learn face of it — parameters, validation, fitted attributes; the protocol itself runs
in :class:`~cipherforest.privacy.protocol.ClientSession`, which the staged CLI and the
experiments use too.
"""

from __future__ import annotations

import sys
import time
import warnings
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._sklearn_compat import _fit_context
from .dp import deviation_warning, format_privacy_report, privacy_report
from .gipe import GiniPreservingEncryptor
from .progress import fit_progress
from .protocol import (
    ClientSession,
    InProcessTransport,
    Message,
    ProtocolStats,
    Transport,
    check_selection_params,
    constraints,
)
from .protocol.replies import CKKS_TIE_TOLERANCE
from .protocol.session import new_gipe_encryptor

__all__ = ["PrivateForestClient", "ServerDeviationWarning", "new_transport"]


def new_transport(server, n_jobs, server_key, timeout) -> tuple[Transport, object]:
    """``(transport, server_)`` of a private estimator's ``server`` parameter: None makes an
    embedded server (``server_`` is that server), a URL a new HTTP session, and a
    :class:`Transport` is used as it is."""
    if server is None:
        transport = InProcessTransport(n_jobs=n_jobs)
        return transport, transport.server
    if isinstance(server, str):
        from .protocol.http import HTTPTransport

        transport = HTTPTransport(server, server_key, timeout=timeout)
    elif isinstance(server, Transport):
        transport = server
    else:
        raise TypeError("server must be None, a URL or a transport with "
                        f"handle(bytes) -> bytes, not {type(server).__name__}")
    return transport, transport


class ServerDeviationWarning(UserWarning):
    """A fit's server sent class counts that are not the client's own (a malicious or
    broken server); ``privacy_report_["server_deviations"]`` says where."""


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
    * ``split_selection`` — what the split choices may learn from the labels:

      - ``"rr"`` (default, ε = 2 per row for the whole fit): the client randomizes every
        label once (k-ary randomized response at ``label_epsilon``) and hands the
        randomized labels to the server, which grows the trees by Gini on them with no
        query round; the true labels stay encrypted and only give the leaf values.
        ε-label-DP against the server by post-processing.
      - ``"dp"``: the exponential mechanism on the candidates' Gini scores, ``label_epsilon``
        per (tree, level), composed in zCDP and reported as ``(ε, δ)`` at ``label_delta``.
      - ``"blind"``: the server draws feature and threshold at random and only sums leaf
        label ciphertexts: no query rounds, nothing in its view depends on the labels (ε = 0).
      - ``"gini"``: the paper's selection, the best candidate from decrypted class counts.
        As accurate as a plaintext forest, but the trees' structure gives the labels away
        (no finite ε): a proximity attack on the server's trees recovered 94.7 % of breast
        cancer's labels against a 76–78 % floor (docs/threat_model.md).

    The client replays the server's deterministic plan (bootstrap counts, feature draws,
    candidates, node weights) and refuses a query that differs from it; in the modes that
    decrypt counts (``"gini"``, ``"dp"``) it also recomputes every candidate's class counts
    from its own labels and refuses a round on any difference, so a server that substitutes
    ciphertext contents learns nothing from the answers.


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
    split_selection : {"rr", "dp", "blind", "gini"}, default="rr"
    decide_from : {"own", "server"}, default="own"
        ``"gini"`` and ``"dp"`` only: where the split choices' class counts come from.
        ``"own"``: the client's own labels on its replay of the plan (the server's
        encrypted counts are an audit: decrypted, compared, a difference reported after the
        fit). ``"server"``: the paper's flow, kept for the evaluation — the decrypted counts,
        and a round whose counts differ from the client's own is refused at once, which a
        malicious server reads as a label bit (selective failure).
    label_epsilon : float or None, default=None
        ``"rr"``: ε of the randomized response (None: 2); ``"dp"``: ε of each
        exponential-mechanism choice (required). A finite number > 0; unused by the other
        selections.
    label_delta : float, default=1e-6
        δ of the ``(ε, δ)`` guarantee reported for ``"dp"``.
    privacy_ledger : str or None, default=None
        Directory of the client's privacy ledger (:class:`~cipherforest.privacy.ledger.
        PrivacyLedger`; None: ``$CIPHERFOREST_PRIVACY_LEDGER``, else
        ``~/.cipherforest/privacy-ledger``). It holds the secret that fixes each row's
        randomized label (``"rr"``: the same data gives the same randomized labels on every
        fit, retry and refit — RAPPOR's permanent randomized response) and the ε every
        release spent on each row (keyed fingerprints of the rows, never the data). A
        missing, corrupted or foreign ledger is an error, never a silent reset.
    max_total_epsilon : float or None, default=None
        Refuse a fit (before anything is sent) that would bring any row's cumulative ε in
        the ledger above this: a repeat of a recorded ``"rr"`` release adds nothing, a new
        ε or new rows add theirs, ``"dp"`` is checked with its worst case (one choice per
        level, ``max_depth`` levels) and charged with what it spent, ``"gini"`` spends an
        infinite ε.
    max_round_bytes : int or None, default=None
        None: one round per tree level for all trees (the paper's O(depth) rounds). An int
        (at least 256 KiB) caps each query: a round then covers the current levels of as many
        trees as fit (at least one tree, which alone may exceed the cap), so rounds grow to
        about total bytes / cap.
    server : str, Transport or None, default=None
        ``"http://host:port"`` of a ``cipherforest serve`` process; or a
        :class:`~cipherforest.privacy.protocol.Transport` (anything with
        ``handle(bytes) -> bytes``, e.g. a :class:`PrivateForestServer`); None runs a server
        in this process.
    n_jobs : int or None, default=None
        Worker processes of the embedded server (None: 1, -1: all cores).
    label_chunk : int, default=2
        Label packs per upload message (each pack is one ciphertext holding the labels of up
        to ``4096 / τ`` rows, τ rounded up to a power of two; at most 64 per message).
    label_pack_rows : int or None, default=None
        At most this many rows' labels per label ciphertext (None: as many as the slots
        hold). Fewer rows per pack mean fewer candidate lanes per query ciphertext.
    prediction_reply : {"ids", "sums", "leaves"}, default="ids"
        What :meth:`predict_proba` asks the server for. ``"ids"``: the leaf each test row
        reaches in each tree; the client reads the leaves' class counts from the table it
        computed from its own labels when the fit ended (``client_session_.leaf_table``),
        so prediction needs no homomorphic work and nothing the client uses comes from
        label ciphertexts (a server cannot turn it into an oracle on training labels).
        The paper's encrypted replies, kept for the evaluation: ``"sums"``, each test
        row's leaf class frequencies summed over the trees on the server (CKKS only; BFV
        sessions answer with leaves), and ``"leaves"``, the leaf-store ciphertexts the rows
        reach and a position per (row, tree). Their checks raise on a reply that is not
        the client's own counts, which a server that doctors the leaves with two training
        rows' label ciphertexts reads as a label bit per call (docs/threat_model.md).
    verbose : int, default=0
        1: print upload progress and one line per round (round, open nodes, bytes, seconds)
        on stderr, as the plaintext ensembles draw their progress.
    progress : bool or None, default=None
        Draw a one-line progress bar per stage of :meth:`fit` on stderr: label rows
        uploaded, then rounds answered (``"gini"``, ``"dp"``) or trees grown on the server.
        None: only when stderr is a terminal, ``verbose`` is 0 and the fit is expected to
        take more than about 10 s (estimated from the rows, trees and rounds planned:
        :func:`cipherforest.privacy.progress.expected_fit_seconds`). The bar reads the
        protocol's progress and changes nothing in the fit.
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
    server_ : PrivateForestServer or Transport
        What the client talks to: the embedded server (``server=None``; its
        :meth:`~PrivateForestServer.tree_arrays` is the server's view of the trees), the
        HTTP transport of a URL, or the given server.
    client_session_ : ClientSession
        The protocol engine holding the keys, the layout and the transport
        (:class:`~cipherforest.privacy.protocol.ClientSession`).
    epsilon_spent_ : float
        ε of the label-DP guarantee against the server: 0 for ``"blind"``, ``inf`` for
        ``"gini"``, ``label_epsilon`` for ``"rr"``; for ``"dp"`` the zCDP composition of one
        choice per (tree, level) (parallel over a level's disjoint nodes), at δ
        ``delta_spent_``.
    delta_spent_ : float
        δ of that guarantee (``label_delta`` for ``"dp"``, else 0).
    privacy_report_ : dict
        The guarantee in words and numbers: split selection, ε, δ, what the server saw and
        what it did not (:func:`cipherforest.privacy.dp.format_privacy_report` turns it into
        text; ``verbose`` and the CLI print it after training); ``server_honest`` and
        ``server_deviations`` (round, tree, node, what) say whether the server's counts were
        the client's own (the CLI's ``train`` exits with status 3 when they were not);
        ``cumulative_epsilon`` (and ``cumulative_delta``) what the privacy ledger holds for
        the most charged training row after this fit, over every release recorded.
    fit_stats_ : ProtocolStats
    predict_stats_ : ProtocolStats
        Of the last ``predict_proba`` call.
    """

    _parameter_constraints: dict = constraints()

    def __init__(self, n_estimators=100, *, max_features="sqrt", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, bootstrap=True, max_samples=None,
                 max_bins=None, random_state=None, scheme="ckks", security_parameter=6.4,
                 gipe_mode="quantile", gipe_bins=32, reveal_leaves=False,
                 split_selection="rr", decide_from="own", label_epsilon=None,
                 label_delta=1e-6, privacy_ledger=None, max_total_epsilon=None,
                 max_round_bytes=None,
                 server=None, n_jobs=None, label_chunk=2, label_pack_rows=None,
                 prediction_reply="ids", verbose=0, progress=None, server_key=None,
                 timeout=120.0):
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
        self.decide_from = decide_from
        self.label_epsilon = label_epsilon
        self.label_delta = label_delta
        self.privacy_ledger = privacy_ledger
        self.max_total_epsilon = max_total_epsilon
        self.max_round_bytes = max_round_bytes
        self.server = server
        self.n_jobs = n_jobs
        self.label_chunk = label_chunk
        self.label_pack_rows = label_pack_rows
        self.prediction_reply = prediction_reply
        self.verbose = verbose
        self.progress = progress
        self.server_key = server_key
        self.timeout = timeout

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Encrypt ``X`` and ``y``, let the server grow the forest, answer its queries."""
        stats = ProtocolStats()
        started = time.perf_counter()
        setup, labels = self.encrypt(X, y)
        engine = self.client_session_
        engine.transport = self._new_transport()
        bar = fit_progress(self.progress, self.verbose, setup)
        try:
            engine.upload(setup, bar.uploads(labels, engine.rows_per_message), stats, started)
            self.session_ = engine.session_id
            bar.training()
            engine.train(setup, stats, started, on_answer=bar.answered)
            bar.trained()
        finally:
            bar.close()
        return self._fitted(stats)

    def encrypt(self, X, y) -> tuple[Message, object]:
        """The offline stage of :meth:`fit`: validate, fit GIPE, make the keys, and return
        the ``setup`` message and an iterator of ``labels`` messages (nothing is sent).

        Sets ``classes_``, ``encryptor_`` and ``client_session_``; the staged CLI
        (``cipherforest client encrypt``) saves what this returns.
        """
        self._validate_params()
        check_selection_params(self.get_params())
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        if len(encoder.classes_) < 2:
            raise ValueError("PrivateForestClient needs at least two classes")
        n_samples = X.shape[0]
        if isinstance(self.max_samples, Integral) and self.max_samples > n_samples:
            raise ValueError(f"max_samples={self.max_samples} exceeds the {n_samples} "
                             "training rows")
        engine = ClientSession(self.get_params())
        setup, labels = engine.encrypt(X, encoder.transform(y), encoder.classes_,
                                       self.new_encryptor())
        self.classes_ = engine.classes
        self.encryptor_ = engine.encryptor
        self.client_session_ = engine
        return setup, labels

    def new_encryptor(self) -> GiniPreservingEncryptor:
        """The unfitted GIPE encryptor a fit uses: keys and jitter from the OS.

        Nothing the server receives seeds it. A subclass may override it (tests fix the keys
        with a seeded encryptor so that two fits send the same ciphers).
        """
        return new_gipe_encryptor(self.get_params())

    def _fitted(self, stats: ProtocolStats):
        """Fitted attributes after :meth:`ClientSession.train`."""
        engine = self.client_session_
        self.session_ = engine.session_id
        self.privacy_report_ = privacy_report(self.split_selection, engine.accountant,
                                              self.gipe_mode, self.reveal_leaves,
                                              engine.deviations, engine.cumulative_spent(),
                                              engine.sends_labels)
        self.epsilon_spent_ = self.privacy_report_["epsilon"]
        self.delta_spent_ = self.privacy_report_["delta"]
        self.fit_stats_ = stats
        if self.verbose:
            print(format_privacy_report(self.privacy_report_), file=sys.stderr, flush=True)
        if engine.deviations:
            # After the fit, never during it: the server may see the client walk away now,
            # one bit per model, but no answer depended on its counts.
            warnings.warn(deviation_warning(engine.deviations), ServerDeviationWarning,
                          stacklevel=3)
        return self

    def _new_transport(self) -> Transport:
        """The transport for a new fit (and ``server_``): a server given as an object is used
        as it is; an embedded server or an HTTP session is made anew (old sessions are
        dropped)."""
        transport, self.server_ = new_transport(self.server, self.n_jobs, self.server_key,
                                                self.timeout)
        return transport

    def train(self, setup: Message, transport: Transport, *, answered=(), on_answer=None):
        """The rounds stage of :meth:`fit` for an uploaded session (the staged CLI):
        answer the server's queries through ``transport`` until the forest is trained.

        ``answered`` and ``on_answer`` resume a session whose client stopped during the
        rounds (:meth:`ClientSession.train`).
        """
        check_is_fitted(self, "client_session_")
        stats = ProtocolStats()
        engine = self.client_session_
        engine.transport = transport
        engine.verbose = self.verbose  # set_params after encrypt (the CLI's -v)
        engine.train(setup, stats, answered=answered, on_answer=on_answer)
        return self._fitted(stats)

    # ------------------------------------------------------------------ predict
    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities: mean over trees of the leaf class frequencies (decrypted)."""
        check_is_fitted(self, "session_")
        self._validate_params()
        X = validate_data(self, X, dtype=np.float64, reset=False)
        engine = self.client_session_
        stats = ProtocolStats()
        proba = engine.predict_proba(X, stats, self.prediction_reply)
        self.predict_stats_ = stats
        return proba

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
            return self.classes_[np.argmax(proba >= best - CKKS_TIE_TOLERANCE, axis=1)]
        return self.classes_[np.argmax(proba, axis=1)]

    # ------------------------------------------------------------------ session
    def close(self) -> None:
        """Ask the server to forget this model's session (its ciphertexts and trees).

        The client keeps its keys and GIPE state; predictions need a new ``fit`` afterwards.
        """
        check_is_fitted(self, "session_")
        self.client_session_.close()
        del self.session_

    def save(self, path) -> None:
        """Save the fitted client's secret material to the directory ``path`` (0600 files).

        Keys (the HE secret key included), GIPE state, classes, parameters, the server
        session (URL, session id and token; or, with the embedded server, the trained forest
        itself) and ``privacy_report_``, so that :meth:`load` predicts tomorrow what this
        client predicts today and says what the fit guaranteed. No pickle is written or read.
        """
        from .package import save_client

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
        from .package import load_client

        return load_client(cls, path, server=server, server_key=server_key)
