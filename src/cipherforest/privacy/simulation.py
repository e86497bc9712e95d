"""The encrypted forest's decisions on clear labels: :class:`PrivateForestSimulator`.

The protocol's outcome depends on the labels only through the client's decisions, and the
client decides from exact integer squared class counts (CKKS results are rounded and checked,
BFV is exact). This module computes those counts in the clear and runs the *same* planner
(:class:`~cipherforest.privacy.protocol.planner.ForestGrowth`) and the *same* decision
function (:func:`~cipherforest.privacy.protocol.decisions.decide_splits`) as the client and
server, so its forests are distributed exactly as the encrypted ones (identical for the
deterministic choices: ``reveal_leaves=True`` Gini and label-blind) at a fraction of the
cost: no homomorphic arithmetic, no rounds. Experiments and the label-privacy curves use it
to measure accuracy and attacks across many settings; the tests check it against the real
protocol.
"""

from __future__ import annotations

import secrets
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._sklearn_compat import _fit_context
from .dp import LabelPrivacyAccountant, RandomizedResponse
from .gipe import GiniPreservingEncryptor
from .protocol.decisions import (
    clear_counts,
    clear_squares,
    decide_splits,
    grow_levels,
    grow_on_labels,
)
from .protocol.params import (
    SIMULATED_PARAMETERS,
    ForestSpec,
    check_selection_params,
    constraints,
    forest_meta,
    label_epsilon,
)
from .protocol.planner import ForestGrowth, leaves_reached
from .protocol.selections import selection
from .protocol.server.learners import SERVER_LEARNERS
from .protocol.session import new_gipe_encryptor
from .regressor import PrivateForestRegressor, RegressionSession, regression_report

__all__ = ["PrivateForestRegressorSimulator", "PrivateForestSimulator"]


class PrivateForestSimulator(ClassifierMixin, BaseEstimator):
    """:class:`~cipherforest.privacy.PrivateForestClient`'s forest without the encryption of
    labels: same GIPE ciphers, planner, split decisions and ε accountant.

    Parameters are PrivateForestClient's (those that do not concern the homomorphic layer or
    the transport); see its documentation. ``random_state`` seeds the forest; GIPE keys and
    the hidden/DP choices come from the operating system, as in the client.

    Attributes
    ----------
    classes_ : ndarray
    encryptor_ : GiniPreservingEncryptor
    trees_ : list of dict
        The server's view of every tree (``children_left``, ``children_right``, ``feature``,
        cipher ``threshold``, ``n_node_samples``), as ``PrivateForestServer.tree_arrays``.
    leaf_counts_ : list of dict
        Per tree, the weighted class counts of each leaf (what the leaf ciphertexts hold).
    epsilon_spent_ : float
    delta_spent_ : float
    randomized_labels_ : ndarray or None
        ``"rr"``: the randomized-response labels the server would grow the trees on.
    n_rounds_ : int
        Query rounds the protocol would take (one per level; 0 for ``"blind"`` and
        ``"rr"``).
    """

    _parameter_constraints = constraints(SIMULATED_PARAMETERS)

    def __init__(self, n_estimators=100, *, max_features="sqrt", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, bootstrap=True, max_samples=None,
                 max_bins=None, random_state=None, security_parameter=6.4,
                 gipe_mode="quantile", gipe_bins=32, reveal_leaves=False,
                 split_selection="rr", label_epsilon=None, label_delta=1e-6):
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.bootstrap = bootstrap
        self.max_samples = max_samples
        self.max_bins = max_bins
        self.random_state = random_state
        self.security_parameter = security_parameter
        self.gipe_mode = gipe_mode
        self.gipe_bins = gipe_bins
        self.reveal_leaves = reveal_leaves
        self.split_selection = split_selection
        self.label_epsilon = label_epsilon
        self.label_delta = label_delta

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Encrypt ``X`` with GIPE and grow the forest the protocol would grow."""
        check_selection_params(self.get_params())
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        n_classes = len(self.classes_)
        if n_classes < 2:
            raise ValueError("PrivateForestSimulator needs at least two classes")
        codes = encoder.transform(y)
        n_samples, n_features = X.shape
        self.encryptor_ = new_gipe_encryptor(self.get_params())
        X_cipher = self.encryptor_.fit_transform(X, codes).astype(np.float64)
        meta = forest_meta(self.get_params(), n_samples, n_features)
        growth = ForestGrowth(X_cipher, ForestSpec.from_meta(meta, n_samples, n_features))
        onehot = np.eye(n_classes)[codes]
        rng = secrets.SystemRandom()
        epsilon = label_epsilon(self.get_params())
        accountant = LabelPrivacyAccountant(self.split_selection, epsilon, self.label_delta)
        self.n_rounds_ = 0
        self.randomized_labels_ = None
        chosen = selection(self.split_selection)
        if chosen.asks_rounds:
            leaves = self._grow_by_choices(growth, onehot, n_classes, epsilon, accountant, rng)
        elif chosen.sends_randomized_labels:
            self.randomized_labels_ = RandomizedResponse(epsilon, n_classes).draw(codes, rng)
            # The planner's growth, node by node: the oracle of the server's compiled grower.
            leaves = grow_on_labels(growth, np.eye(n_classes)[self.randomized_labels_])
        else:
            leaves = growth.grow_label_blind()
        self.leaf_counts_ = [{} for _ in growth.trees]
        for t, node in leaves:
            weights = growth.weights(t)[node.samples]
            self.leaf_counts_[t][node.node_id] = onehot[node.samples].T @ weights
        self.trees_ = [tree.arrays() for tree in growth.trees]
        self._growth_trees = growth.trees
        self.epsilon_spent_ = accountant.epsilon_spent
        self.delta_spent_ = accountant.delta_spent
        return self

    def _grow_by_choices(self, growth, onehot, n_classes, epsilon, accountant, rng) -> list:
        """The client's choices, level by level over all trees, from counts in the clear."""
        def decide(plans):
            self.n_rounds_ += 1
            accountant.spend(len({p.tree for p in plans}))
            squares = clear_squares(plans, onehot, growth.weights)
            return decide_splits(growth, plans, squares, n_classes, self.split_selection,
                                 self.reveal_leaves, epsilon, rng)

        return grow_levels(growth, decide)

    def predict_proba(self, X) -> np.ndarray:
        """Mean over trees of the leaf class frequencies (as the client computes them)."""
        check_is_fitted(self, "trees_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        X_cipher = self.encryptor_.transform(X).astype(np.float64)
        proba = np.zeros((X.shape[0], len(self.classes_)))
        for tree, counts in zip(self._growth_trees, self.leaf_counts_, strict=True):
            leaf = tree.apply(X_cipher)
            table = np.zeros((len(tree.left), len(self.classes_)))
            for node, c in counts.items():
                table[node] = c / c.sum()
            proba += table[leaf]
        return proba / len(self._growth_trees)

    def predict(self, X) -> np.ndarray:
        """Most probable class of each row."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


class PrivateForestRegressorSimulator(RegressorMixin, BaseEstimator):
    """:class:`~cipherforest.privacy.PrivateForestRegressor`'s forest with the server's side
    run in-process: no transport, no messages.

    The client's side is the regressor's own (:class:`~.regressor.RegressionSession`: the
    GIPE ciphers and the privatised targets of the privacy ledger, charged there as a real
    fit charges them); the server's side is the server's own learner
    (:data:`~.protocol.server.learners.SERVER_LEARNERS`), so with the same ledger,
    ``random_state`` and GIPE keys (:meth:`new_encryptor`) the forest and its predictions
    are the estimator's (tested). With other keys the trees partition the bootstrap rows
    alike, but rows between two of a node's values may route otherwise: thresholds are
    midpoints of the random ciphers. Parameters
    are the regressor's, less those of the transport.

    Attributes
    ----------
    encryptor_ : GiniPreservingEncryptor
    privatised_targets_ : ndarray of shape (n_samples,) or None
        ``"rr"``: the targets the server grows the trees on (None for ``"blind"`` and
        ``"paper"``, whose trees come from the client's exact variance rule on its own
        target sums, as its rounds decide them).
    trees_ : list of dict
        The server's view of every tree (``children_left``, ``children_right``,
        ``feature``, cipher ``threshold``, ``n_node_samples``).
    leaf_means_ : LeafMeans
        The client's leaf values (bootstrap-weighted sums of the true targets per leaf, and
        the refitted values of ``leaf_refit`` ``"ridge"`` or ``"ridge_to_means"``).
    epsilon_spent_ : float
    privacy_report_ : dict
        As :class:`~cipherforest.privacy.PrivateForestRegressor`'s.
    """

    _parameter_constraints: dict = {
        name: rule for name, rule in PrivateForestRegressor._parameter_constraints.items()
        if name not in ("server", "server_key", "timeout", "verbose")}

    def __init__(self, n_estimators=100, *, max_features=1.0, max_depth=None,
                 min_samples_split=2, min_samples_leaf=None, bootstrap=True, max_samples=None,
                 max_bins=None, random_state=None, security_parameter=6.4,
                 gipe_mode="quantile", gipe_bins=32, split_selection="rr", label_epsilon=None,
                 target_mechanism="bins", target_bounds=None, target_bins=32,
                 target_outputs=None, prior_share=0.1, leaf_refit="ridge_to_means",
                 privacy_ledger=None, max_total_epsilon=None, n_jobs=None):
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.bootstrap = bootstrap
        self.max_samples = max_samples
        self.max_bins = max_bins
        self.random_state = random_state
        self.security_parameter = security_parameter
        self.gipe_mode = gipe_mode
        self.gipe_bins = gipe_bins
        self.split_selection = split_selection
        self.label_epsilon = label_epsilon
        self.target_mechanism = target_mechanism
        self.target_bounds = target_bounds
        self.target_bins = target_bins
        self.target_outputs = target_outputs
        self.prior_share = prior_share
        self.leaf_refit = leaf_refit
        self.privacy_ledger = privacy_ledger
        self.max_total_epsilon = max_total_epsilon
        self.n_jobs = n_jobs

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Encrypt ``X``, privatise ``y`` (charged in the ledger), grow the server's forest
        and compute the leaf values from the true targets."""
        PrivateForestRegressor._check_params(self)
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        if isinstance(self.max_samples, Integral) and self.max_samples > X.shape[0]:
            raise ValueError(f"max_samples={self.max_samples} exceeds the {X.shape[0]} "
                             "training rows")
        engine = RegressionSession(self.get_params())
        setup, _ = engine.encrypt(X, y, self.new_encryptor())
        X_cipher = setup.arrays["X"]
        n_samples, n_features = X_cipher.shape
        growth = ForestGrowth(X_cipher, ForestSpec.from_meta(setup.meta, n_samples, n_features))
        self.privatised_targets_ = setup.arrays.get("y_rr")
        chosen = selection(self.split_selection)
        if chosen.asks_rounds:  # "paper": the client's decisions from its own target sums
            rows, rng = engine.label_rows(), secrets.SystemRandom()

            def decide(plans):
                engine.accountant.spend(len({p.tree for p in plans}))
                return chosen.decide(growth, plans, clear_counts(plans, rows, growth.weights),
                                     engine.n_classes, False, None, rng)

            grow_levels(growth, decide)
            engine.charge_rounds()
        elif self.privatised_targets_ is None:
            chosen.grow(growth, None, self.n_jobs)
        else:
            SERVER_LEARNERS["regressor"].grow(growth, self.privatised_targets_, 0, self.n_jobs)
        self.encryptor_ = engine.encryptor
        self._growth_trees = growth.trees
        self.trees_ = [tree.arrays() for tree in growth.trees]
        self.leaf_means_ = engine.count_leaves(leaves_reached(growth.trees, X_cipher),
                                               growth.weights)
        self.privacy_report_ = regression_report(self.split_selection, engine.release,
                                                 self.gipe_mode, engine.cumulative_spent())
        self.epsilon_spent_ = self.privacy_report_["epsilon"]
        return self

    def new_encryptor(self) -> GiniPreservingEncryptor:
        """The unfitted GIPE encryptor a fit uses (keys and jitter from the OS, as the
        estimator's; an experiment that compares the two gives both the same one)."""
        return PrivateForestRegressor.new_encryptor(self)

    def predict(self, X) -> np.ndarray:
        """Mean over the trees of the client's leaf values of the leaves the rows reach."""
        check_is_fitted(self, "leaf_means_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        X_cipher = np.asarray(self.encryptor_.transform(X), dtype=np.float64)
        return self.leaf_means_.predict(leaves_reached(self._growth_trees, X_cipher))
