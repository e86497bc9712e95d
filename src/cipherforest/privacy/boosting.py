"""Private gradient boosting on GIPE ciphers: :class:`PrivateGradientBoostingSimulator`.

The split of work is the randomized-response forest's (``split_selection="rr"``): the client
encrypts the features with GIPE (order-preserving per feature, so a tree on the ciphers splits
the rows as one on the plaintext would) and reports each label through k-ary randomized
response ``ỹ`` at ``label_epsilon``. The server boosts on ``ỹ`` alone: each round it grows
one regression tree per class on the log-loss gradients of its own running model at ``ỹ``
(or at the unbiased estimates of the labels from ``ỹ``:
:func:`~.boosting_kernels.corrected_targets`), and updates that model with its own leaf
steps. Everything it computes is a function of the ciphers and ``ỹ``,
so the fit is ``label_epsilon``-label-DP per row by post-processing.

The client then refits every leaf value from the true labels, tree by tree in the order the
trees were grown: a Newton step of the log loss at its own running raw predictions, which
start from the true class priors. Those values (and the priors) never leave the client, so
the guarantee does not change, and the server's trees, whose leaves were fitted to noise,
predict with the leaf values a clean boosting would have given the same partitions.

The server's side runs in-process here (no transport, no rounds: the server needs none,
knowing ``ỹ``), so the accuracy of the design is measurable without the protocol
(``benchmarks/label_privacy_boosting.py``).
"""

from __future__ import annotations

import hashlib
import os
import secrets
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._sklearn_compat import Interval, RealNotInt, StrOptions, _fit_context
from ..core import DecisionTreeRegressor
from .boosting_kernels import (
    boost_on_targets,
    boosting_seeds,
    corrected_targets,
    n_trees,
    probabilities,
    refit_leaf_values,
)
from .dp import LabelPrivacyAccountant, RandomizedResponse, privacy_report
from .gipe import GiniPreservingEncryptor
from .ledger import PrivacyLedger
from .protocol.params import DEFAULT_RR_EPSILON, MAX_BINS
from .protocol.session import new_gipe_encryptor

__all__ = ["PrivateGradientBoostingSimulator", "boosting_report"]


def boosting_report(epsilon: float, gipe_mode: str, cumulative: tuple[float, float] | None,
                    label_ciphertexts: bool = True) -> dict:
    """The ``privacy_report_`` of a private boosting fit: the randomized response's at
    ``epsilon`` (:func:`~cipherforest.privacy.dp.privacy_report`), with what the server
    boosted and what it never saw."""
    report = privacy_report("rr", LabelPrivacyAccountant("rr", epsilon), gipe_mode,
                            cumulative=cumulative, label_ciphertexts=label_ciphertexts)
    report["learner"] = "gradient_boosting"
    report["server_saw"] = [*report["server_saw"][:-1],
                            "regression trees it boosted on them (and its own leaf values, "
                            "fitted to them)"]
    report["server_did_not_see"] = [*report["server_did_not_see"],
                                    "the client's leaf values (refitted from the labels)"]
    return report


class PrivateGradientBoostingSimulator(ClassifierMixin, BaseEstimator):
    """Gradient boosting on GIPE ciphers and randomized-response labels, the server's side
    in-process; leaf values refitted by the client from the true labels.

    Parameters
    ----------
    n_estimators : int, default=100
        Boosting rounds (each grows one tree, or one per class for more than two classes).
    learning_rate : float, default=0.2
        Shrinkage of every tree's contribution (the server's and the client's). Twice the
        plaintext boosting's 0.1: on noisy ``ỹ`` it was the more accurate at 100 rounds on
        most sets of ``benchmarks/label_privacy_boosting.py settings``
        (docs/label_privacy_boosting.md).
    max_depth : int or None, default=3
    max_leaf_nodes : int or None, default=None
    min_samples_split : int or float, default=2
    min_samples_leaf : int or float, default=1
    max_features : int, float, {"sqrt", "log2"} or None, default="sqrt"
        As :class:`~cipherforest.ensemble.GradientBoostingClassifier`'s, for the server's
        regression trees on the cipher matrix. The default differs from the plaintext
        boosting's (None, every feature): on noisy ``ỹ`` a draw of √d features per node was
        as accurate or more on most sets of ``benchmarks/label_privacy_boosting.py
        settings`` (docs/label_privacy_boosting.md).
    max_bins : int or None, default=None
        Histogram bins per cipher column (None: exact splits; GIPE's quantile mode leaves
        ``gipe_bins`` distinct ciphers per column anyway).
    noise_correction : {"none", "unbiased"}, default="none"
        What the server boosts on: ``"none"`` the log-loss gradients at ``ỹ`` as if it were
        clean, ``"unbiased"`` those at the unbiased estimate of each one-hot label from
        ``ỹ`` (Natarajan et al. 2013). The client's refit is the same for both. The unbiased
        gradients have the clean expectation but a variance ``1 / (p - q)^2`` times larger
        (``p``, ``q`` the keep and flip probabilities), and ``ỹ``'s own gradients only shrink
        the target probabilities toward uniform (``E[onehot(ỹ) | x] = q + (p - q) P(y | x)``),
        which ranks the splits alike; the refit removes the shrinkage from the leaf values.
        ``"none"`` was the more accurate in ``benchmarks/label_privacy_boosting.py``
        (docs/private_forest.md).
    label_epsilon : float, default=2.0
        ε of the randomized response: the fit's label-DP guarantee per row.
    privacy_ledger : str or None, default=None
        Directory of a :class:`~cipherforest.privacy.PrivacyLedger`: ``ỹ`` is then the
        ledger's memoized draw (the same rows and labels give the same ``ỹ`` on every fit, as
        the private forest's, with which the release is shared) and the fit is charged
        there. None draws ``ỹ`` afresh from the operating system and records nothing.
    random_state : int, RandomState or None, default=None
        Seeds the trees' feature draws (``max_features``); GIPE keys and ``ỹ`` come from the
        operating system (or the ledger), as in the client.
    security_parameter, gipe_mode, gipe_bins
        GIPE's, as :class:`~cipherforest.privacy.PrivateForestClient`'s.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    encryptor_ : GiniPreservingEncryptor
        The GIPE state (the client's secret).
    randomized_labels_ : ndarray of shape (n_samples,)
        ``ỹ`` as class indices: what the server saw of the labels.
    trees_ : list of list of DecisionTreeRegressor
        The server's trees, one list per round, fitted on the cipher matrix.
    server_init_raw_ : ndarray
        The server's initial raw scores (from ``ỹ``).
    init_raw_ : ndarray
        The client's initial raw scores (from the true class priors).
    leaf_values_ : list of list of ndarray
        The client's refitted value of every node id of every tree (0 off the leaves).
    epsilon_spent_ : float
        ``label_epsilon``.
    privacy_report_ : dict
        As :class:`~cipherforest.privacy.PrivateForestClient`'s ``privacy_report_``, with
        ``learner="gradient_boosting"``.
    """

    _parameter_constraints: dict = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0.0, None, closed="neither")],
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "max_leaf_nodes": [Interval(Integral, 2, None, closed="left"), None],
        "min_samples_split": [Interval(Integral, 2, None, closed="left"),
                              Interval(RealNotInt, 0.0, 1.0, closed="right")],
        "min_samples_leaf": [Interval(Integral, 1, None, closed="left"),
                             Interval(RealNotInt, 0.0, 1.0, closed="neither")],
        "max_features": [Interval(Integral, 1, None, closed="left"),
                         Interval(RealNotInt, 0.0, 1.0, closed="right"),
                         StrOptions({"sqrt", "log2"}), None],
        "max_bins": [Interval(Integral, 2, MAX_BINS, closed="both"), None],
        "noise_correction": [StrOptions({"unbiased", "none"})],
        "label_epsilon": [Interval(Real, 0.0, None, closed="neither")],
        "privacy_ledger": [str, os.PathLike, None],
        "random_state": ["random_state"],
        "security_parameter": [Interval(Real, 1.0, None, closed="left")],
        "gipe_mode": [StrOptions({"quantile", "order", "paper"})],
        "gipe_bins": [Interval(Integral, 2, None, closed="left")],
    }

    def __init__(self, n_estimators=100, *, learning_rate=0.2, max_depth=3,
                 max_leaf_nodes=None, min_samples_split=2, min_samples_leaf=1,
                 max_features="sqrt", max_bins=None, noise_correction="none",
                 label_epsilon=DEFAULT_RR_EPSILON, privacy_ledger=None, random_state=None,
                 security_parameter=6.4, gipe_mode="quantile", gipe_bins=32):
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_bins = max_bins
        self.noise_correction = noise_correction
        self.label_epsilon = label_epsilon
        self.privacy_ledger = privacy_ledger
        self.random_state = random_state
        self.security_parameter = security_parameter
        self.gipe_mode = gipe_mode
        self.gipe_bins = gipe_bins

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Encrypt ``X``, randomize ``y``, boost on the server's side, refit on the client's.

        Raises
        ------
        ValueError
            ``y`` holds a single class, or ``label_epsilon`` is not a finite positive number
            (``inf`` would be boosting on the labels themselves: the plaintext model's job).
        """
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        n_classes = self.classes_.shape[0]
        if n_classes < 2:
            raise ValueError(f"{type(self).__name__} needs at least two classes in y, got "
                             f"only {self.classes_[0]!r}")
        epsilon = float(self.label_epsilon)  # finite and > 0 (the constraint)
        self.encryptor_ = self.new_encryptor()
        X_cipher = self.encryptor_.fit_transform(X, codes).astype(np.float64)
        self.randomized_labels_ = self._randomize(X, codes, n_classes, epsilon)

        targets = corrected_targets(self.randomized_labels_, n_classes, epsilon,
                                    correct=self.noise_correction == "unbiased")
        self.trees_ = self._boost_on_server(X_cipher, targets)
        self.init_raw_, self.leaf_values_ = self._refit_on_client(X_cipher, codes, n_classes)

        self.privacy_report_ = boosting_report(epsilon, self.gipe_mode, self._cumulative)
        self.epsilon_spent_ = self.privacy_report_["epsilon"]
        return self

    def new_encryptor(self) -> GiniPreservingEncryptor:
        """The unfitted GIPE encryptor a fit uses (keys and jitter from the OS; tests may
        override it)."""
        return new_gipe_encryptor(self.get_params())

    def _randomize(self, X, codes, n_classes, epsilon) -> np.ndarray:
        """``ỹ``: the ledger's memoized draw (charged) or a fresh one from the OS."""
        self._cumulative = None
        if self.privacy_ledger is None:
            return RandomizedResponse(epsilon, n_classes).draw(codes, secrets.SystemRandom())
        ledger = PrivacyLedger(self.privacy_ledger)
        row_keys = ledger.row_keys(X)
        noisy = ledger.randomized_labels(X, codes, epsilon, n_classes)
        # The private forest's digest of an "rr" release: the same ỹ is one release.
        digest = hashlib.sha256(b"rr" + np.float64(epsilon).tobytes() + row_keys.tobytes()
                                + noisy.tobytes()).hexdigest()
        ledger.charge("rr", epsilon, 0.0, row_keys, digest)
        self._cumulative = ledger.spent(row_keys)
        return noisy

    def _tree(self) -> DecisionTreeRegressor:
        return DecisionTreeRegressor(
            criterion="squared_error", max_depth=self.max_depth,
            min_samples_split=self.min_samples_split, min_samples_leaf=self.min_samples_leaf,
            max_features=self.max_features, max_leaf_nodes=self.max_leaf_nodes,
            max_bins=self.max_bins)

    def _boost_on_server(self, X_cipher: np.ndarray, targets: np.ndarray) -> list:
        """The server's boosting: it sees the ciphers and ``targets`` (a function of ``ỹ``)."""
        seeds = boosting_seeds(self.random_state, self.n_estimators,
                               n_trees(targets.shape[1]))
        self.server_init_raw_, rounds = boost_on_targets(
            X_cipher, targets, self._tree, self.learning_rate, seeds, self.max_bins)
        return rounds

    def _refit_on_client(self, X_cipher: np.ndarray, codes: np.ndarray, n_classes: int):
        """Leaf values from the true labels, tree by tree in order: the Newton step at the
        client's own running raw predictions."""
        reached = np.column_stack([tree.tree_.apply(X_cipher)
                                   for trees in self.trees_ for tree in trees])
        init, steps = refit_leaf_values(reached, np.eye(n_classes)[codes],
                                        self.learning_rate)
        width = n_trees(n_classes)
        return init, [steps[r * width: (r + 1) * width] for r in range(len(self.trees_))]

    # ------------------------------------------------------------------ predict
    def decision_function(self, X) -> np.ndarray:
        """The client's raw scores: shape (n,) for two classes, (n, n_classes) for more."""
        check_is_fitted(self, "leaf_values_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        X_cipher = self.encryptor_.transform(X).astype(np.float64)
        raw = np.tile(self.init_raw_, (X.shape[0], 1))
        for trees, values in zip(self.trees_, self.leaf_values_, strict=True):
            for k, (tree, steps) in enumerate(zip(trees, values, strict=True)):
                raw[:, k] += self.learning_rate * steps[tree.tree_.apply(X_cipher)]
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
