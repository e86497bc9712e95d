"""Cost-complexity pruning must reproduce scikit-learn's path and pruned trees exactly."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from cipherforest.tree._common import TREE_LEAF, TREE_UNDEFINED
from cipherforest.tree._pruning import cost_complexity_pruning_path, prune_tree
from cipherforest.tree._tree import NODE_FIELDS, Tree

FIELDS = [*NODE_FIELDS, "value"]


def tree_from_sklearn(sk_tree) -> Tree:
    arrays = {name: getattr(sk_tree, name) for name in FIELDS}
    return Tree(sk_tree.n_features, sk_tree.n_classes, arrays)


def assert_same_tree(ours: Tree, sk_tree) -> None:
    assert ours.node_count == sk_tree.node_count
    for name in FIELDS:
        expected = getattr(sk_tree, name)
        actual = getattr(ours, name)
        np.testing.assert_array_equal(actual, expected.astype(actual.dtype), err_msg=name)


def make_data(seed: int, task: str, n: int = 400, with_nan: bool = False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    if with_nan:
        X[rng.random(X.shape) < 0.1] = np.nan
    signal = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) + rng.normal(size=n)
    y = signal if task == "regression" else np.digitize(signal, [-1.0, 0.0, 1.0])
    sample_weight = rng.uniform(0.1, 3.0, size=n)
    return X, y, sample_weight


CASES = [
    (DecisionTreeClassifier, {"criterion": "gini"}),
    (DecisionTreeClassifier, {"criterion": "entropy", "max_features": 3}),
    (DecisionTreeClassifier, {"max_leaf_nodes": 40}),  # best-first: ids are not preorder
    (DecisionTreeRegressor, {"criterion": "squared_error"}),
    (DecisionTreeRegressor, {"criterion": "absolute_error", "min_samples_leaf": 2}),
    (DecisionTreeRegressor, {"max_leaf_nodes": 40, "splitter": "random"}),
]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize(("cls", "params"), CASES)
def test_path_and_pruned_trees_match_sklearn(cls, params, weighted, seed):
    task = "classification" if cls is DecisionTreeClassifier else "regression"
    X, y, sample_weight = make_data(seed, task, with_nan=seed == 2)
    sample_weight = sample_weight if weighted else None
    est = cls(random_state=seed, **params)
    expected_path = est.cost_complexity_pruning_path(X, y, sample_weight=sample_weight)
    est.fit(X, y, sample_weight=sample_weight)
    tree = tree_from_sklearn(est.tree_)

    path = cost_complexity_pruning_path(tree)
    assert set(path) == {"ccp_alphas", "impurities"}
    np.testing.assert_array_equal(path["ccp_alphas"], expected_path.ccp_alphas)
    np.testing.assert_array_equal(path["impurities"], expected_path.impurities)

    alphas = path["ccp_alphas"]
    picks = {0.0, alphas[1], alphas[len(alphas) // 2], alphas[-2], alphas[-1], alphas[-1] * 2}
    picks |= {(alphas[i] + alphas[i + 1]) / 2 for i in (1, len(alphas) // 3)}
    for alpha in sorted(picks):
        alpha = max(float(alpha), 0.0)
        pruned_sk = cls(random_state=seed, ccp_alpha=alpha, **params)
        pruned_sk.fit(X, y, sample_weight=sample_weight)
        assert_same_tree(prune_tree(tree, alpha), pruned_sk.tree_)


def test_multi_output():
    X, y, w = make_data(3, "regression")
    Y = np.column_stack([y, -2 * y + X[:, 2]])
    est = DecisionTreeRegressor(random_state=0).fit(X, Y, sample_weight=w)
    tree = tree_from_sklearn(est.tree_)
    expected = est.cost_complexity_pruning_path(X, Y, sample_weight=w)
    path = cost_complexity_pruning_path(tree)
    np.testing.assert_array_equal(path["ccp_alphas"], expected.ccp_alphas)
    alpha = float(path["ccp_alphas"][len(path["ccp_alphas"]) // 2])
    pruned_sk = DecisionTreeRegressor(random_state=0, ccp_alpha=alpha).fit(X, Y, sample_weight=w)
    assert_same_tree(prune_tree(tree, alpha), pruned_sk.tree_)


def _stump() -> Tree:
    arrays = {
        "children_left": [1, TREE_LEAF, TREE_LEAF],
        "children_right": [2, TREE_LEAF, TREE_LEAF],
        "feature": [0, TREE_UNDEFINED, TREE_UNDEFINED],
        "threshold": [0.5, TREE_UNDEFINED, TREE_UNDEFINED],
        "impurity": [0.5, 0.0, 0.0],
        "n_node_samples": [4, 2, 2],
        "weighted_n_node_samples": [4.0, 2.0, 2.0],
        "missing_go_to_left": [1, 0, 0],
        "value": np.array([[[0.5, 0.5]], [[1.0, 0.0]], [[0.0, 1.0]]]),
    }
    return Tree(1, np.array([2]), arrays)


def test_single_split_by_hand():
    tree = _stump()
    path = cost_complexity_pruning_path(tree)
    # R(root) = 0.5, R(leaves) = 0, two leaves: alpha = 0.5 / (2 - 1).
    np.testing.assert_array_equal(path["ccp_alphas"], [0.0, 0.5])
    np.testing.assert_array_equal(path["impurities"], [0.0, 0.5])
    assert prune_tree(tree, 0.49).node_count == 3
    root = prune_tree(tree, 0.5)
    assert root.node_count == 1
    assert root.feature[0] == TREE_UNDEFINED and root.threshold[0] == TREE_UNDEFINED
    assert root.missing_go_to_left[0] == 0
    np.testing.assert_array_equal(root.value[0], [[0.5, 0.5]])


def test_input_not_modified_and_alpha_zero_copies():
    tree = _stump()
    before = {name: array.copy() for name, array in tree.arrays().items()}
    same = prune_tree(tree, 0.0)
    prune_tree(tree, 10.0)
    for name, array in tree.arrays().items():
        np.testing.assert_array_equal(array, before[name])
        np.testing.assert_array_equal(getattr(same, name), array)
        assert not np.shares_memory(getattr(same, name), array)


def test_single_leaf_tree():
    arrays = {name: np.zeros(1, dtype=dtype) for name, dtype in NODE_FIELDS.items()}
    arrays.update(children_left=[TREE_LEAF], children_right=[TREE_LEAF],
                  feature=[TREE_UNDEFINED], weighted_n_node_samples=[3.0],
                  impurity=[0.25], value=np.ones((1, 1, 1)))
    tree = Tree(2, np.array([1]), arrays)
    path = cost_complexity_pruning_path(tree)
    np.testing.assert_array_equal(path["ccp_alphas"], [0.0])
    np.testing.assert_array_equal(path["impurities"], [0.25])
    assert prune_tree(tree, 1.0).node_count == 1


@pytest.mark.parametrize("alpha", [-0.1, float("nan")])
def test_invalid_alpha(alpha):
    with pytest.raises(ValueError, match="ccp_alpha"):
        prune_tree(_stump(), alpha)


def test_rejects_non_tree():
    with pytest.raises(TypeError, match="Tree"):
        cost_complexity_pruning_path(DecisionTreeClassifier())


def test_large_tree_path_is_consistent():
    """A tree of > 100k nodes (the heap-based path's case; its speed is a benchmark matter,
    not a unit test's): the path is monotone and pruning at its median alpha keeps a
    proper subtree whose total leaf impurity is the path's value there."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60_000, 4))
    y = X[:, 0] + rng.normal(size=60_000)
    tree = tree_from_sklearn(DecisionTreeRegressor(random_state=0).fit(X, y).tree_)
    assert tree.node_count > 100_000
    path = cost_complexity_pruning_path(tree)
    assert np.all(np.diff(path["ccp_alphas"]) >= 0)
    assert np.all(np.diff(path["impurities"]) >= -1e-9)
    pruned = prune_tree(tree, float(np.median(path["ccp_alphas"])))
    assert 1 < pruned.node_count < tree.node_count
