"""Multi-output y (2-D) for trees and forests: against scikit-learn and against the
single-output fits the multi-output criteria reduce to."""

import numpy as np
import pytest
import sklearn.tree as sk_tree
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.utils import compute_sample_weight

from cipherforest import (
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)


def _data(n=240, missing=0.0, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.rand(n, 4)
    if missing:
        X[rng.rand(n, 4) < missing] = np.nan
    Y = rng.lognormal(size=(n, 3))
    labels = (rng.rand(n, 3) * np.array([2, 3, 5])).astype(int)
    return X, Y, labels, rng.rand(n) + 0.1


@pytest.mark.parametrize("criterion", ["squared_error", "poisson", "absolute_error"])
@pytest.mark.parametrize("params", [{}, {"max_leaf_nodes": 12}, {"min_samples_leaf": 4}])
def test_regressor_matches_scikit_learn(criterion, params):
    X, Y, _, w = _data(missing=0.1)
    params = {**params, "random_state": 0}
    ours = DecisionTreeRegressor(criterion=criterion, **params).fit(X, Y, sample_weight=w)
    ref = sk_tree.DecisionTreeRegressor(criterion=criterion, **params).fit(X, Y,
                                                                           sample_weight=w)
    assert ours.n_outputs_ == 3 and ours.predict(X).shape == (X.shape[0], 3)
    assert ours.tree_.node_count == ref.tree_.node_count
    assert_allclose(ours.predict(X), ref.predict(X), rtol=1e-12)
    # (Pure nodes' squared error is float dust, ~1e-12, in both.)
    assert_allclose(np.sort(ours.tree_.impurity), np.sort(ref.tree_.impurity), rtol=1e-10,
                    atol=1e-9)


@pytest.mark.parametrize("params", [{}, {"max_leaf_nodes": 12}])
def test_classifier_matches_scikit_learn(params):
    X, _, labels, w = _data(missing=0.1)
    classes = np.array(["a", "b", "c", "d", "e"])[labels]
    params = {**params, "random_state": 0}
    ours = DecisionTreeClassifier(**params).fit(X, classes, sample_weight=w)
    ref = sk_tree.DecisionTreeClassifier(**params).fit(X, classes, sample_weight=w)
    assert_array_equal(ours.n_classes_, [2, 3, 5])
    for a, b in zip(ours.classes_, ref.classes_, strict=True):
        assert_array_equal(a, b)
    assert ours.tree_.node_count == ref.tree_.node_count
    proba, ref_proba = ours.predict_proba(X), ref.predict_proba(X)
    assert isinstance(proba, list) and len(proba) == 3
    for p, q in zip(proba, ref_proba, strict=True):
        assert_allclose(p, q, atol=1e-12)
    assert_array_equal(ours.predict(X), ref.predict(X))
    assert ours.tree_.value.shape == ref.tree_.value.shape


@pytest.mark.parametrize("criterion", ["squared_error", "absolute_error", "poisson"])
def test_identical_outputs_grow_the_single_output_tree(criterion):
    # The impurity is the mean over outputs: k copies of one target rank splits alike
    # (features that make the same partition may trade places: float dust breaks the tie;
    # small deep nodes have tied absolute errors, so the depth is limited).
    X, Y, _, w = _data()
    tree = DecisionTreeRegressor(criterion=criterion, max_depth=2, random_state=0)
    single = clone(tree).fit(X, Y[:, 0], sample_weight=w)
    multi = clone(tree).fit(X, np.column_stack([Y[:, 0]] * 3), sample_weight=w)
    assert_array_equal(multi.tree_.n_node_samples, single.tree_.n_node_samples)
    assert_allclose(multi.tree_.impurity, single.tree_.impurity, rtol=1e-12, atol=1e-14)
    for k in range(3):
        assert_allclose(multi.predict(X)[:, k], single.predict(X), rtol=1e-12)


def test_class_weight_list_equals_explicit_sample_weight():
    X, _, labels, _ = _data()
    y = labels[:, :2]
    class_weight = [{0: 1.0, 1: 3.0}, {0: 2.0, 1: 1.0, 2: 0.5}]
    weighted = DecisionTreeClassifier(class_weight=class_weight, max_depth=4,
                                      random_state=0).fit(X, y)
    explicit = DecisionTreeClassifier(max_depth=4, random_state=0).fit(
        X, y, sample_weight=compute_sample_weight(class_weight, y))
    assert_allclose(weighted.tree_.value, explicit.tree_.value)
    assert_array_equal(weighted.tree_.feature, explicit.tree_.feature)


@pytest.mark.parametrize("Forest", [RandomForestRegressor, ExtraTreesRegressor])
def test_forest_regressor_averages_its_trees(Forest):
    X, Y, _, _ = _data(n=150)
    forest = Forest(n_estimators=4, bootstrap=True, oob_score=True, random_state=0).fit(X, Y)
    assert forest.n_outputs_ == 3
    assert_allclose(forest.predict(X), np.mean([t.predict(X) for t in forest], axis=0))
    assert forest.oob_prediction_.shape == (150, 3)


@pytest.mark.parametrize("Forest", [RandomForestClassifier, ExtraTreesClassifier])
def test_forest_classifier_shapes_and_balanced_subsample(Forest):
    X, _, labels, _ = _data(n=150)
    y = labels[:, :2] > 0  # two binary outputs (multilabel): OOB is defined
    forest = Forest(n_estimators=5, bootstrap=True, oob_score=True, random_state=0,
                    class_weight="balanced_subsample").fit(X, y)
    proba = forest.predict_proba(X)
    assert [p.shape for p in proba] == [(150, 2), (150, 2)]
    for k in range(2):
        mean = np.mean([t.predict_proba(X)[k] for t in forest], axis=0)
        assert_allclose(proba[k], mean)
    assert forest.predict(X).shape == (150, 2)
    assert forest.oob_decision_function_.shape == (150, 2, 2)
    with pytest.raises(ValueError, match="multiclass-multioutput"):
        Forest(n_estimators=3, bootstrap=True, oob_score=True).fit(X, labels)


def test_histogram_finder_refuses_multi_output():
    X, Y, _, _ = _data(n=60)
    with pytest.raises(ValueError, match="max_bins"):
        DecisionTreeRegressor(max_bins=16).fit(X, Y)
