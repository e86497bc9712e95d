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

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._sklearn_compat import _fit_context
from .dp import LabelPrivacyAccountant, RandomizedResponse
from .gipe import GiniPreservingEncryptor
from .protocol.decisions import clear_squares, decide_splits, grow_levels, grow_on_labels
from .protocol.params import (
    SIMULATED_PARAMETERS,
    ForestSpec,
    check_selection_params,
    constraints,
    forest_meta,
    label_epsilon,
)
from .protocol.planner import ForestGrowth
from .protocol.selections import selection

__all__ = ["PrivateForestSimulator"]


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
        self.encryptor_ = GiniPreservingEncryptor(
            self.security_parameter, mode=self.gipe_mode, n_bins=self.gipe_bins,
        ).set_output(transform="default")
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
