"""Private gradient boosting through the protocol: :class:`PrivateGradientBoostingClassifier`.

The split of work is :class:`~cipherforest.privacy.PrivateGradientBoostingSimulator`'s, with
the server behind a transport: the client sends GIPE ciphers and the randomized-response
labels ``ỹ`` (the privacy ledger's memoized release at ``label_epsilon``, shared with the
private forest's ``"rr"`` fits of the same rows) in ``setup`` with ``learner``
``"gradient_boosting"``; the server boosts on ``ỹ`` alone
(:mod:`.protocol.server.learners`, the simulator's loop: the same trees for the same seed)
and answers ``trained`` with the leaf every training row reaches in every tree. The client
refits every leaf value from the true labels, tree by tree in the order grown
(:func:`~.boosting_kernels.refit_leaf_values`), and keeps them. A prediction asks the server
for the leaves the test rows reach (nothing homomorphic, nothing decrypted) and sums the
client's own leaf values: the server never sees a leaf value, a label or a prediction.

:class:`BoostingSession` is the protocol engine (a :class:`~.protocol.ClientSession`), so
embedded and remote servers, sessions, quotas and ``save``/``load`` are the classifier's.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from numbers import Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._sklearn_compat import Interval, StrOptions, _fit_context
from .boosting import boosting_report
from .boosting_kernels import n_trees, probabilities, refit_leaf_values
from .dp import DEFAULT_LABEL_DELTA, format_privacy_report
from .gipe import GiniPreservingEncryptor
from .leaf_refit import BOOSTING_PENALTIES, ridge_refit
from .protocol import ClientSession, Message, ProtocolError, ProtocolStats, constraints
from .protocol.params import NOISE_CORRECTIONS, label_epsilon
from .regressor import (
    LEAF_REFITS,
    PrivateForestRegressor,
    RegressionModelMixin,
    RegressionSession,
    SessionModelMixin,
    check_target_bounds,
    regression_report,
)

__all__ = ["BoostingLeaves", "BoostingSession", "PrivateGradientBoostingClassifier",
           "PrivateGradientBoostingRegressor", "RegressionBoostingSession"]

# What the classifier's engine needs, fixed for boosting: the "rr" release, every row in
# every tree, no label ciphertexts, prediction by leaf ids.
_ENGINE_DEFAULTS = {"scheme": "ckks", "label_chunk": 2, "label_pack_rows": None,
                    "prediction_reply": "ids", "reveal_leaves": False, "decide_from": "own",
                    "label_delta": DEFAULT_LABEL_DELTA, "max_round_bytes": None,
                    "split_selection": "rr", "bootstrap": False, "max_samples": None}


@dataclass(frozen=True)
class BoostingLeaves:
    """The client's boosted model: initial raw scores and every tree's leaf contributions.

    Attributes
    ----------
    init_raw : ndarray of shape (width,)
        Initial raw scores (from the true class priors); ``width`` trees per round.
    values : ndarray
        Every tree's ``learning_rate`` × Newton step per node id, trees concatenated.
    offsets : ndarray of shape (n_trees + 1,)
        Where each tree's node ids start in :attr:`values`.
    known : ndarray of bool, like :attr:`values`
        The node ids some training row reaches (the leaves the server named): a prediction
        reply naming another is refused.
    """

    init_raw: np.ndarray
    values: np.ndarray
    offsets: np.ndarray
    known: np.ndarray

    @classmethod
    def refit(cls, reached: np.ndarray, targets: np.ndarray, learning_rate: float,
              loss: str = "log_loss") -> BoostingLeaves:
        """The leaf values of the trees whose training leaves are ``reached`` (n, n_trees),
        refitted from the true ``targets`` (:func:`~.boosting_kernels.refit_leaf_values`)."""
        reached = np.asarray(reached, dtype=np.int64)
        init_raw, steps = refit_leaf_values(reached, targets, learning_rate, loss)
        known = [np.bincount(reached[:, t], minlength=s.shape[0]) > 0
                 for t, s in enumerate(steps)]
        return cls(init_raw, learning_rate * np.concatenate(steps),
                   np.cumsum([0, *(s.shape[0] for s in steps)]).astype(np.int64),
                   np.concatenate(known))

    def ridge_refit(self, reached: np.ndarray, targets: np.ndarray) -> BoostingLeaves:
        """This model with its intercept and every leaf value replaced by the ridge refit
        of the targets on the leaf indicators of all trees (one output, the regressor's;
        :func:`~.leaf_refit.ridge_refit`)."""
        rows = np.asarray(reached, dtype=np.int64) + self.offsets[:-1]
        intercept, weights = ridge_refit(rows, self.values.shape[0], targets,
                                         BOOSTING_PENALTIES)
        return replace(self, init_raw=np.array([intercept]), values=weights)

    @property
    def n_trees(self) -> int:
        return self.offsets.shape[0] - 1

    def raw(self, reached: np.ndarray) -> np.ndarray:
        """Raw scores (n, width) of rows reaching the leaves ``reached`` (n, n_trees)."""
        reached = np.asarray(reached, dtype=np.int64)
        if reached.ndim != 2 or reached.shape[1] != self.n_trees:
            raise ProtocolError(f"scores: expected a leaf id per row and tree ({self.n_trees} "
                                "trees)")
        sizes = np.diff(self.offsets)
        flat = reached + self.offsets[:-1]
        if ((reached < 0) | (reached >= sizes)).any() or not self.known[flat].all():
            raise ProtocolError("scores: the server names a leaf no training row reaches")
        width = self.init_raw.shape[0]
        raw = np.tile(self.init_raw, (reached.shape[0], 1))
        for k in range(width):
            raw[:, k] += self.values[flat[:, k::width]].sum(axis=1)
        return raw

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"boost_init_raw": self.init_raw, "boost_leaf_values": self.values,
                "boost_leaf_offsets": self.offsets, "boost_leaf_known": self.known}

    @classmethod
    def from_arrays(cls, arrays) -> BoostingLeaves | None:
        """The model saved by :meth:`to_arrays`, or None if ``arrays`` holds none."""
        if "boost_leaf_values" not in arrays:
            return None
        leaves = cls(np.asarray(arrays["boost_init_raw"], dtype=np.float64),
                     np.asarray(arrays["boost_leaf_values"], dtype=np.float64),
                     np.asarray(arrays["boost_leaf_offsets"], dtype=np.int64),
                     np.asarray(arrays["boost_leaf_known"], dtype=bool))
        offsets = leaves.offsets
        if (leaves.init_raw.ndim != 1 or offsets.ndim != 1 or offsets.shape[0] < 2
                or offsets[0] != 0 or (np.diff(offsets) < 1).any()
                or offsets[-1] != leaves.values.shape[0]
                or leaves.known.shape != leaves.values.shape
                or leaves.n_trees % leaves.init_raw.shape[0]
                or not np.all(np.isfinite(leaves.values))):
            raise ValueError("the saved boosting leaf values are inconsistent")
        return leaves


class _BoostedScores:
    """Prediction of a boosting engine (a :class:`~.protocol.ClientSession` whose
    ``leaf_table`` is a :class:`BoostingLeaves`)."""

    def boosted_scores(self, X: np.ndarray, n_trees: int, stats: ProtocolStats) -> np.ndarray:
        """Raw scores (n, width) of the rows ``X`` (validated float64): the server is asked
        for the leaves the rows reach in its ``n_trees`` trees (nothing homomorphic), the
        client sums its own leaf values."""
        started = time.perf_counter()
        if self.leaf_table is None:
            raise ValueError("this client holds no leaf values: fit it again")
        X_cipher = np.asarray(self.encryptor.transform(X), dtype=np.float64)
        reply = self.exchange(Message("predict", self._meta({"reply": "ids"}),
                                      {"X": X_cipher}), "scores", stats)
        if (reply.value("n_rows", int) != X.shape[0]
                or reply.value("n_trees", int) != n_trees
                or reply.value("reply", str) != "ids"):
            raise ProtocolError(f"scores: expected the leaf ids of {X.shape[0]} rows × "
                                f"{n_trees} trees")
        raw = self.leaf_table.raw(reply.array("leaf", "int32", 2))
        stats.client_seconds = time.perf_counter() - started - stats.server_seconds
        stats.reply = "ids"
        return raw


class BoostingSession(_BoostedScores, ClientSession):
    """The boosting classifier's protocol engine (see the module docstring).

    Parameters
    ----------
    params : mapping
        :class:`PrivateGradientBoostingClassifier`'s parameters (its ``get_params()``).
    transport : Transport or None
    """

    leaf_table_type = BoostingLeaves

    def __init__(self, params: Mapping[str, Any], transport=None):
        super().__init__({**_ENGINE_DEFAULTS, **params}, transport)

    @property
    def n_trees(self) -> int:
        """The server's trees: ``n_estimators`` rounds of one tree per modelled class."""
        return int(self.params["n_estimators"]) * n_trees(self.n_classes)

    def encrypt(self, X: np.ndarray, y_codes: np.ndarray, classes: np.ndarray,
                encryptor: GiniPreservingEncryptor | None = None) -> tuple[Message, Any]:
        """Offline: the classifier's ``"rr"`` release and ``setup`` (charged in the ledger),
        for the ``"gradient_boosting"`` learner."""
        setup, labels = super().encrypt(X, y_codes, classes, encryptor)
        params = self.params
        setup.meta.update(n_estimators=self.n_trees, learner="gradient_boosting",
                          learning_rate=float(params["learning_rate"]),
                          noise_correction=params["noise_correction"],
                          rr_epsilon=float(label_epsilon(params)))
        return setup, labels

    def count_leaves(self, reached: np.ndarray, weights_of) -> BoostingLeaves:
        """The client's leaf values: refitted from the true labels, in tree order."""
        return BoostingLeaves.refit(reached, np.eye(self.n_classes)[self.labels],
                                    float(self.params["learning_rate"]))

    def decision_function(self, X: np.ndarray, stats: ProtocolStats) -> np.ndarray:
        """Raw scores (n, width) of the rows ``X`` (validated float64): the server names the
        leaves they reach, the client sums its own leaf values."""
        return self.boosted_scores(X, self.n_trees, stats)


class PrivateGradientBoostingClassifier(SessionModelMixin, ClassifierMixin, BaseEstimator):
    """Gradient boosting trained by a server on GIPE ciphers and randomized-response labels;
    leaf values refitted from the true labels by the client only.

    The server boosts log-loss regression trees on the ciphers and ``ỹ`` (one tree per round
    for two classes, one per class for more), everything it computes a function of the
    ciphers and ``ỹ``: the fit is ``label_epsilon``-label-DP per row. The client sets every
    leaf to the Newton step of the log loss at its own running scores from the true labels,
    tree by tree in order, and keeps those values; :meth:`predict_proba` asks the server for
    the leaves the test rows reach. For the same ``random_state`` (an int) and ciphers the
    server grows :class:`PrivateGradientBoostingSimulator`'s trees.

    Parameters
    ----------
    n_estimators : int, default=100
        Boosting rounds.
    learning_rate : float, default=0.2
        Shrinkage of every tree's contribution (the server's and the client's); the
        simulator's default, not the plaintext boosting's 0.1 (see the simulator's).
    max_depth : int or None, default=3
    min_samples_split : int, default=2
    min_samples_leaf : int, default=1
    max_features : {"sqrt", "log2"}, int, float or None, default="sqrt"
        Features drawn per node of the server's trees (the simulator's default, not the
        plaintext boosting's None: see its parameter).
    max_bins : int or None, default=None
        Histogram bins per cipher column (None: exact splits on the ciphers).
    noise_correction : {"none", "unbiased"}, default="none"
        What the server boosts on (the simulator's parameter).
    label_epsilon : float or None, default=None
        ε of the randomized response, the fit's label-DP guarantee per row (None: 2).
    random_state : int, RandomState instance or None, default=None
        Seeds the trees' feature draws (sent to the server); keys and ``ỹ`` never come
        from it.
    security_parameter, gipe_mode, gipe_bins
        GIPE's, as :class:`~cipherforest.privacy.PrivateForestClient`'s.
    privacy_ledger : str or None, default=None
        The privacy ledger's directory (``ỹ`` is its memoized release).
    max_total_epsilon : float or None, default=None
        Refuse a fit (before anything is sent) that would bring a row's cumulative ε above
        this.
    server : str, Transport or None, default=None
        None: an embedded server; ``"http://host:port"``: a ``cipherforest serve`` process;
        or a transport/server object.
    n_jobs : int or None, default=None
        Threads of the embedded server.
    verbose : int, default=0
        1: print the privacy report after the fit on stderr.
    server_key : str or None, default=None
    timeout : float, default=120

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    encryptor_ : GiniPreservingEncryptor
    session_ : str
    server_ : PrivateForestServer or Transport
    client_session_ : BoostingSession
    epsilon_spent_ : float
    privacy_report_ : dict
        As the simulator's, with the ledger's ``cumulative_epsilon``.
    fit_stats_, predict_stats_ : ProtocolStats
    """

    engine_type = BoostingSession

    _parameter_constraints: dict = {
        **constraints(["n_estimators", "max_depth", "min_samples_split", "min_samples_leaf",
                       "max_features", "max_bins", "random_state", "security_parameter",
                       "gipe_mode", "gipe_bins", "privacy_ledger", "max_total_epsilon",
                       "server", "n_jobs", "verbose", "server_key", "timeout"]),
        "learning_rate": [Interval(Real, 0.0, None, closed="neither")],
        "noise_correction": [StrOptions(set(NOISE_CORRECTIONS))],
        "label_epsilon": [Interval(Real, 0.0, None, closed="neither"), None],
    }

    def __init__(self, n_estimators=100, *, learning_rate=0.2, max_depth=3,
                 min_samples_split=2, min_samples_leaf=1, max_features="sqrt", max_bins=None,
                 noise_correction="none", label_epsilon=None, random_state=None,
                 security_parameter=6.4, gipe_mode="quantile", gipe_bins=32,
                 privacy_ledger=None, max_total_epsilon=None, server=None, n_jobs=None,
                 verbose=0, server_key=None, timeout=120.0):
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_bins = max_bins
        self.noise_correction = noise_correction
        self.label_epsilon = label_epsilon
        self.random_state = random_state
        self.security_parameter = security_parameter
        self.gipe_mode = gipe_mode
        self.gipe_bins = gipe_bins
        self.privacy_ledger = privacy_ledger
        self.max_total_epsilon = max_total_epsilon
        self.server = server
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.server_key = server_key
        self.timeout = timeout

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Encrypt ``X``, randomize ``y``, let the server boost, refit the leaf values.

        Raises
        ------
        ValueError
            ``y`` holds a single class, or ``label_epsilon`` is not a finite number > 0
            (``inf`` would be boosting on the labels themselves: the plaintext model's job).
        """
        return self._fit_through_server(X, y)

    def encrypt(self, X, y) -> tuple[Message, Any]:
        """The offline stage of :meth:`fit`: validate, fit GIPE, randomize the labels (the
        ledger's release, charged now), and return the ``setup`` message and an empty
        iterator of ``labels`` messages (nothing is sent). The staged CLI
        (``cipherforest client encrypt --learner boosting``) saves what this returns."""
        self._validate_params()
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        if self.classes_.shape[0] < 2:
            raise ValueError(f"{type(self).__name__} needs at least two classes in y, got "
                             f"only {self.classes_[0]!r}")
        engine = BoostingSession(self.get_params())
        setup, labels = engine.encrypt(X, codes, self.classes_, self.new_encryptor())
        self.encryptor_ = engine.encryptor
        self.client_session_ = engine
        return setup, labels

    def train(self, setup: Message, transport, *, answered=(), on_answer=None):
        """The training stage of :meth:`fit` for an uploaded session (the staged CLI): ask
        the server to boost through ``transport`` and refit the leaf values. ``answered``
        and ``on_answer`` are the classifier's (a boosting session has no rounds)."""
        check_is_fitted(self, "client_session_")
        stats = ProtocolStats()
        engine = self.client_session_
        engine.transport = transport
        engine.train(setup, stats, answered=answered, on_answer=on_answer)
        return self._fitted(stats)

    def _fitted(self, stats: ProtocolStats):
        """Fitted attributes after :meth:`BoostingSession.train`."""
        engine = self.client_session_
        engine.labels = None  # the leaf values hold what predictions need
        self.session_ = engine.session_id
        self.privacy_report_ = boosting_report(float(label_epsilon(engine.params)),
                                               self.gipe_mode, engine.cumulative_spent(),
                                               label_ciphertexts=False)
        self.epsilon_spent_ = self.privacy_report_["epsilon"]
        self.fit_stats_ = stats
        if self.verbose:
            print(format_privacy_report(self.privacy_report_), file=sys.stderr, flush=True)
        return self

    # ------------------------------------------------------------------ predict
    def decision_function(self, X) -> np.ndarray:
        """The client's raw scores: shape (n,) for two classes, (n, n_classes) for more."""
        check_is_fitted(self, "session_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        stats = ProtocolStats()
        raw = self.client_session_.decision_function(X, stats)
        self.predict_stats_ = stats
        return raw[:, 0] if raw.shape[1] == 1 else raw

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities from the client's model."""
        raw = self.decision_function(X)
        if raw.ndim == 1:
            p1 = probabilities(raw[:, None])[:, 0]
            return np.column_stack([1.0 - p1, p1])
        return probabilities(raw)

    def predict(self, X) -> np.ndarray:
        """Most probable class of each row."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


class RegressionBoostingSession(_BoostedScores, RegressionSession):
    """The boosting regressor's protocol engine: the regressor's release (privatised
    targets, charged in the ledger) for the ``"gradient_boosting_regressor"`` learner, leaf
    values refitted from the true targets (squared error)."""

    leaf_table_type = BoostingLeaves

    def __init__(self, params: Mapping[str, Any], transport=None):
        super().__init__({"split_selection": "rr", "bootstrap": False, "max_samples": None,
                          **params}, transport)

    def encrypt(self, X: np.ndarray, y: np.ndarray,
                encryptor: GiniPreservingEncryptor | None = None) -> tuple[Message, Any]:
        setup, labels = super().encrypt(X, y, encryptor)
        setup.meta.update(learner="gradient_boosting_regressor",
                          learning_rate=float(self.params["learning_rate"]))
        return setup, labels

    def count_leaves(self, reached: np.ndarray, weights_of) -> BoostingLeaves:
        """The client's leaf values: mean residuals of the true targets, in tree order, or
        (``leaf_refit="ridge"``) the global ridge refit of all rounds' leaves."""
        leaves = BoostingLeaves.refit(reached, self.labels[:, None],
                                      float(self.params["learning_rate"]), "squared_error")
        if self.params.get("leaf_refit", "mean") == "ridge":
            leaves = leaves.ridge_refit(reached, self.labels)
        return leaves

    def predict(self, X: np.ndarray, stats: ProtocolStats) -> np.ndarray:
        """The boosted prediction of the rows ``X`` (validated float64)."""
        return self.boosted_scores(X, int(self.params["n_estimators"]), stats)[:, 0]


_TARGET_PARAMETERS = ("target_mechanism", "target_bounds", "target_bins", "target_outputs",
                      "prior_share")


class PrivateGradientBoostingRegressor(RegressionModelMixin, RegressorMixin, BaseEstimator):
    """Gradient boosting (squared error) trained by a server on GIPE ciphers and privatised
    targets; leaf values refitted from the true targets by the client only.

    The client releases the targets as :class:`~cipherforest.privacy.PrivateForestRegressor`
    does (randomized response on bins at ``label_epsilon`` by default, Laplace noise with
    ``target_mechanism="laplace"``; permanent, charged in the privacy ledger, the same
    release as that regressor's for the same data and parameters). The server boosts
    squared-error regression trees on the ciphers and those targets (its own leaf values,
    the mean privatised residuals, only steer its next round) and names the leaf every
    training row reaches; the client sets every leaf to the mean residual of the TRUE
    targets of its rows at its own running predictions, tree by tree in order, then (by
    default, ``leaf_refit``) refits all of them at once by ridge regression, and keeps
    them. :meth:`predict` asks the server for the leaves the test rows reach.

    Parameters
    ----------
    n_estimators : int, default=100
        Boosting rounds (one tree each).
    learning_rate : float, default=0.1
    max_depth : int or None, default=3
    min_samples_split : int, default=2
    min_samples_leaf : int, default=1
    max_features : {"sqrt", "log2"}, int, float or None, default=None
    max_bins : int or None, default=None
    random_state : int, RandomState instance or None, default=None
        Seeds the trees' feature draws (sent to the server).
    security_parameter, gipe_mode, gipe_bins
        GIPE's (``gipe_mode`` ``"quantile"`` or ``"order"``).
    label_epsilon : float or None, default=None
        ε of the whole release, prior included (None: 2).
    target_mechanism, target_bounds, target_bins, target_outputs, prior_share
        The release's, as :class:`~cipherforest.privacy.PrivateForestRegressor`'s.
    leaf_refit : {"ridge", "mean"}, default="ridge"
        ``"mean"``: every leaf the mean residual of the true targets at the client's
        running predictions, round by round; ``"ridge"``: after those, one ridge
        regression of the targets on the leaf indicators of all rounds' trees replaces the
        initial mean and every leaf value (penalty by the client's 5-fold
        cross-validation; :mod:`~cipherforest.privacy.leaf_refit`). Computed on the client
        and never sent: ε is the same. ``"ridge"`` scored higher on 4 of 5 benchmark sets
        at ε = 2 and on 5 of 5 at ε = 1 (docs/label_privacy_boosting.md).
    privacy_ledger : str or None, default=None
    max_total_epsilon : float or None, default=None
    server : str, Transport or None, default=None
    n_jobs : int or None, default=None
    verbose : int, default=0
    server_key : str or None, default=None
    timeout : float, default=120

    Attributes
    ----------
    encryptor_ : GiniPreservingEncryptor
    session_ : str
    server_ : PrivateForestServer or Transport
    client_session_ : RegressionBoostingSession
    epsilon_spent_ : float
    privacy_report_ : dict
        :class:`~cipherforest.privacy.PrivateForestRegressor`'s, with
        ``learner="gradient_boosting_regressor"``.
    fit_stats_, predict_stats_ : ProtocolStats
    """

    engine_type = RegressionBoostingSession

    _parameter_constraints: dict = {
        **constraints(["n_estimators", "max_depth", "min_samples_split", "min_samples_leaf",
                       "max_features", "max_bins", "random_state", "security_parameter",
                       "gipe_bins", "privacy_ledger", "max_total_epsilon", "server", "n_jobs",
                       "verbose", "server_key", "timeout"]),
        **{name: PrivateForestRegressor._parameter_constraints[name]
           for name in ("gipe_mode", "label_epsilon", *_TARGET_PARAMETERS)},
        "learning_rate": [Interval(Real, 0.0, None, closed="neither")],
        "leaf_refit": [StrOptions(set(LEAF_REFITS))],
    }

    def __init__(self, n_estimators=100, *, learning_rate=0.1, max_depth=3,
                 min_samples_split=2, min_samples_leaf=1, max_features=None, max_bins=None,
                 random_state=None, security_parameter=6.4, gipe_mode="quantile", gipe_bins=32,
                 label_epsilon=None, target_mechanism="bins", target_bounds=None,
                 target_bins=32, target_outputs=None, prior_share=0.1, leaf_refit="ridge",
                 privacy_ledger=None, max_total_epsilon=None, server=None, n_jobs=None,
                 verbose=0, server_key=None, timeout=120.0):
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_bins = max_bins
        self.random_state = random_state
        self.security_parameter = security_parameter
        self.gipe_mode = gipe_mode
        self.gipe_bins = gipe_bins
        self.label_epsilon = label_epsilon
        self.target_mechanism = target_mechanism
        self.target_bounds = target_bounds
        self.target_bins = target_bins
        self.target_outputs = target_outputs
        self.prior_share = prior_share
        self.leaf_refit = leaf_refit
        self.privacy_ledger = privacy_ledger
        self.max_total_epsilon = max_total_epsilon
        self.server = server
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.server_key = server_key
        self.timeout = timeout

    def _check_params(self) -> None:
        check_target_bounds(self.target_bounds)

    def _report(self, engine: RegressionBoostingSession) -> dict:
        report = regression_report("rr", engine.release, self.gipe_mode,
                                   engine.cumulative_spent())
        report["learner"] = "gradient_boosting_regressor"
        report["server_saw"] = [*report["server_saw"],
                                "regression trees it boosted on the privatised targets (and "
                                "its own leaf values, fitted to them)"]
        return report

    def predict(self, X) -> np.ndarray:
        """The initial mean plus every tree's client-side leaf value for the leaves the rows
        reach."""
        check_is_fitted(self, "session_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        stats = ProtocolStats()
        values = self.client_session_.predict(X, stats)
        self.predict_stats_ = stats
        return values
