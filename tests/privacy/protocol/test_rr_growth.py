"""The trees the server grows without rounds, compiled, equal the planner's node for node.

``split_selection="rr"`` lets the server grow its trees on the randomized labels ỹ in one
piece (:mod:`cipherforest.privacy.protocol.server.growth`); the planner grows the same trees
node by node in Python (``decisions.grow_on_labels``, which the simulator uses). The oracle
here is that reference: same node arrays (breadth-first ids, features, cipher thresholds, row
counts) and the same rows in every leaf. The compiled walk (``routing.route_rows``) is checked
against the planner's NumPy walk and the plaintext forest's ``apply``. Label-blind trees
(``split_selection="blind"``, grown by one compiled kernel) are checked against their rule
applied node by node on the planner.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_wine

from cipherforest.core import child_seed, make_state, rand_int
from cipherforest.ensemble import RandomForestClassifier
from cipherforest.privacy import PrivateForestClient
from cipherforest.privacy.he import PublicContext
from cipherforest.privacy.protocol.decisions import grow_on_labels
from cipherforest.privacy.protocol.params import ForestSpec, forest_meta
from cipherforest.privacy.protocol.planner import ForestGrowth
from cipherforest.privacy.protocol.server.growth import (
    BLIND_CHOICE_SIDE,
    grow_rr_forest,
    leaf_rows,
)
from cipherforest.privacy.protocol.server.routing import (
    breadth_first_order,
    pack_forest,
    route_rows,
)

FIELDS = ("left", "right", "feature", "threshold", "n_node_samples")


def _cipher_like(X: np.ndarray, levels: int) -> np.ndarray:
    """Integer-valued columns with many ties, as GIPE ciphers are."""
    ranks = np.argsort(np.argsort(X, axis=0, kind="stable"), axis=0, kind="stable")
    return (ranks * levels // X.shape[0] * 1000 + 7).astype(np.float64)


def _spec(X: np.ndarray, **params) -> ForestSpec:
    defaults = {"n_estimators": 6, "max_features": "sqrt", "max_depth": None,
                "min_samples_split": 2, "min_samples_leaf": 1, "bootstrap": True,
                "max_samples": None, "max_bins": None, "random_state": 11,
                "split_selection": "rr"}
    return ForestSpec.from_meta(forest_meta({**defaults, **params}, *X.shape), *X.shape)


def _data(name: str, flip: float, seed: int = 0):
    X, y = (load_wine if name == "wine" else load_breast_cancer)(return_X_y=True)
    rng = np.random.default_rng(seed)
    noisy = np.where(rng.random(y.shape[0]) < flip, rng.integers(0, y.max() + 1, y.shape), y)
    return X, noisy


@pytest.mark.parametrize(("name", "levels", "params"), [
    ("wine", 40, {}),
    ("wine", 8, {"max_bins": 16}),
    ("breast_cancer", 60, {"min_samples_leaf": 3, "max_samples": 0.6}),
    ("breast_cancer", 25, {"bootstrap": False, "max_features": 0.5, "max_depth": 6}),
    ("breast_cancer", 1000, {"max_bins": 32, "min_samples_split": 9}),
    ("breast_cancer", 1000, {"max_features": 3}),  # > 255 distinct values: the exact finder
])
def test_compiled_rr_trees_are_the_planners(name, levels, params):
    X, y = _data(name, flip=0.3)
    C = _cipher_like(X, levels)
    spec = _spec(C, **params)
    reference = ForestGrowth(C, spec)
    expected_leaves = grow_on_labels(reference, np.eye(y.max() + 1)[y])
    compiled = ForestGrowth(C, spec)
    grow_rr_forest(compiled, y, n_jobs=2)
    leaves = leaf_rows(compiled, n_jobs=2)
    for t, (a, b) in enumerate(zip(compiled.trees, reference.trees, strict=True)):
        for field in FIELDS:
            np.testing.assert_array_equal(np.asarray(getattr(a, field)),
                                          np.asarray(getattr(b, field)),
                                          err_msg=f"tree {t}: {field}")
        assert not a.open
    assert len(leaves) == len(expected_leaves)
    rows = {(t, node.node_id): node.samples.tolist() for t, node in expected_leaves}
    assert {(t, node.node_id): node.samples.tolist() for t, node in leaves} == rows
    assert max(len(tree.left) for tree in compiled.trees) > 15  # real trees


def test_route_rows_agrees_with_both_walks():
    X, y = _data("breast_cancer", flip=0.2, seed=1)
    C = _cipher_like(X, 50)
    growth = ForestGrowth(C, _spec(C, n_estimators=5))
    grow_rr_forest(growth, y)
    unseen = C[::-1] + 500.0  # between and beyond the training values
    for rows in (C, unseen):
        reached = route_rows(pack_forest(growth.trees), rows, n_jobs=2)
        assert reached.shape == (rows.shape[0], 5) and reached.dtype == np.int32
        for t, tree in enumerate(growth.trees):
            np.testing.assert_array_equal(reached[:, t], tree.apply(rows))
    rf = RandomForestClassifier(5, random_state=11).fit(C, y)
    for t, estimator in enumerate(rf.estimators_):
        # Same partition of the rows into leaves (the forest numbers depth-first).
        order, new_id = breadth_first_order(estimator.tree_.children_left,
                                            estimator.tree_.children_right)
        np.testing.assert_array_equal(route_rows(pack_forest(growth.trees), unseen)[:, t],
                                      new_id[estimator.apply(unseen)])
        assert sorted(order.tolist()) == list(range(estimator.tree_.node_count))


def test_route_rows_of_stumps_and_empty_input():
    class Stump:
        left, right, feature, threshold = [1, -1, -1], [2, -1, -1], [1, -2, -2], [0.5, -2, -2]

    class Leaf:
        left, right, feature, threshold = [-1], [-1], [-2], [-2.0]

    forest = pack_forest([Stump(), Leaf(), Stump()])
    X = np.array([[9.0, 0.5], [9.0, 0.75], [-1.0, -3.0]])
    np.testing.assert_array_equal(route_rows(forest, X), [[1, 0, 1], [2, 0, 2], [1, 0, 1]])
    assert route_rows(forest, np.zeros((0, 2))).shape == (0, 3)


# ---------------------------------------------------------------------- label-blind trees
def _blind_reference(growth: ForestGrowth) -> list:
    """The blind rule node by node on the planner (the oracle): a node visits its first
    non-constant drawn feature and takes candidate ``rand_int(child_seed(seed, 2))``."""
    leaves = []
    for t, tree in enumerate(growth.trees):
        while tree.open:
            plans, rule_leaves = growth.plan_tree(t, max_features=1)
            leaves.extend((t, node) for node in rule_leaves)
            choices = []
            for plan in plans:
                state = make_state(int(child_seed(np.uint64(plan.node.seed),
                                                  BLIND_CHOICE_SIDE)))
                choices.append(int(rand_int(state, 0, plan.n_candidates)))
            leaves.extend((p.tree, p.node) for p in growth.apply_level(plans, choices))
    return leaves


@pytest.mark.parametrize(("name", "levels", "params"), [
    ("wine", 40, {}),
    ("breast_cancer", 60, {"min_samples_leaf": 4, "max_samples": 0.7, "max_bins": 24}),
    ("breast_cancer", 30, {"bootstrap": False, "max_depth": 5, "min_samples_split": 6}),
])
def test_compiled_blind_trees_follow_the_rule(name, levels, params):
    X, y = _data(name, flip=0.0)
    C = _cipher_like(X, levels)
    spec = _spec(C, split_selection="blind", **params)
    reference = ForestGrowth(C, spec)
    expected_leaves = _blind_reference(reference)
    compiled = ForestGrowth(C, spec)
    leaves = compiled.grow_label_blind(n_jobs=2)
    for t, (a, b) in enumerate(zip(compiled.trees, reference.trees, strict=True)):
        for field in FIELDS:
            np.testing.assert_array_equal(np.asarray(getattr(a, field)),
                                          np.asarray(getattr(b, field)),
                                          err_msg=f"tree {t}: {field}")
    rows = {(t, node.node_id): node.samples.tolist() for t, node in expected_leaves}
    assert {(t, node.node_id): node.samples.tolist() for t, node in leaves} == rows
    # Label-free and seeded: the same trees again, other trees under another seed.
    again = ForestGrowth(C, spec)
    again.grow_label_blind()
    assert all(np.array_equal(a.threshold, b.threshold)
               for a, b in zip(again.trees, compiled.trees, strict=True))
    other = ForestGrowth(C, _spec(C, split_selection="blind", **{**params, "random_state": 12}))
    other.grow_label_blind()
    assert any(len(a.left) != len(b.left) or not np.array_equal(a.threshold, b.threshold)
               for a, b in zip(other.trees, compiled.trees, strict=True))


# ---------------------------------------------------------------------- the leaf store
def test_rr_leaf_store_holds_true_label_frequencies_and_shares_masks(monkeypatch):
    """Leaves placed column by column (store_order) and masks shared per (position, T): the
    decrypted forest is still the trees on ỹ with the true labels' frequencies, with far
    fewer mask encodings than masked leaf sums."""
    calls = {"encode": 0, "multiply": 0}
    for key, name in (("encode", "encode_mask"), ("multiply", "multiply_mask")):
        original = getattr(PublicContext, name)

        def counted(self, *args, _original=original, _key=key, **kwargs):
            calls[_key] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(PublicContext, name, counted)
    X, y = load_wine(return_X_y=True)
    X_train, y_train, X_test = X[::2], y[::2], X[1::2]
    client = PrivateForestClient(12, random_state=4, label_pack_rows=8,
                                 prediction_reply="leaves").fit(X_train, y_train)
    assert calls["multiply"] > 100 and calls["encode"] * 3 < calls["multiply"]
    session = client.server_.session(client.session_)
    assert session.layout.leaves_per_ciphertext == 8 and len(session.leaf_store) > 10
    C_train = np.asarray(client.encryptor_.transform(X_train), dtype=float)
    C_test = np.asarray(client.encryptor_.transform(X_test), dtype=float)
    expected = np.zeros((X_test.shape[0], 3))
    for t, tree in enumerate(session.trees):
        counts = np.zeros((len(tree.left), 3))
        np.add.at(counts, (tree.apply(C_train), y_train), session.growth.weights(t))
        leaf = counts[tree.apply(C_test)]
        expected += leaf / leaf.sum(axis=1, keepdims=True)
    expected /= len(session.trees)
    np.testing.assert_allclose(client.predict_proba(X_test), expected, rtol=0, atol=1e-9)
    client.set_params(prediction_reply="sums")
    np.testing.assert_allclose(client.predict_proba(X_test), expected, rtol=0, atol=1e-5)
