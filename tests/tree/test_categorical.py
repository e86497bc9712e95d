"""Native categorical features (``categorical_features=``) of the histogram finder: oracles for
the category-set splits, scikit-learn's semantics of the parameter, unknown categories at
predict, bad input, saving."""

from __future__ import annotations

import itertools
import json
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_limits

from cipherforest.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
)
from cipherforest.io import load_model, save_model
from cipherforest.tree import DecisionTreeClassifier, DecisionTreeRegressor


def _category_set_data(n=3000, n_levels=20, seed=0):
    """Column 0: a category; the class is whether it is in a random half of the levels.
    Column 1: noise."""
    rng = np.random.default_rng(seed)
    levels = rng.permutation(n_levels)[: n_levels // 2]
    c = rng.integers(0, n_levels, n)
    y = np.isin(c, levels).astype(int)
    X = np.column_stack([c, rng.normal(size=n)]).astype(float)
    return X, y


def _best_partition_impurity(c, y, criterion):
    """Smallest summed weighted impurity of the two children over every partition of the
    categories of ``c`` into two non-empty sets (brute force)."""
    levels = np.unique(c)
    best = np.inf
    for r in range(1, len(levels)):
        for left in itertools.combinations(levels[1:], r - 1):
            left = np.isin(c, (levels[0],) + left)
            best = min(best, _impurity(y[left], criterion) + _impurity(y[~left], criterion))
    return best


def _impurity(y, criterion):
    if criterion == "gini":
        p = np.bincount(y, minlength=2) / y.shape[0]
        return y.shape[0] * (1.0 - np.sum(p * p))
    return float(np.sum((y - y.mean()) ** 2))


def _root_children_impurity(tree):
    t = tree.tree_
    left, right = t.children_left[0], t.children_right[0]
    return (t.weighted_n_node_samples[left] * t.impurity[left]
            + t.weighted_n_node_samples[right] * t.impurity[right])


def test_one_category_split_separates_the_classes():
    X, y = _category_set_data()
    for model in (DecisionTreeClassifier(max_bins=255, categorical_features=[0], max_depth=1),
                  RandomForestClassifier(5, max_bins=255, categorical_features=[0],
                                         max_features=None, max_depth=1, random_state=0),
                  GradientBoostingClassifier(n_estimators=5, max_depth=1, max_bins=255,
                                             categorical_features=[0])):
        model.fit(X, y)
        assert np.mean(model.predict(X) == y) == 1.0, type(model).__name__
    tree = DecisionTreeClassifier(max_bins=255, categorical_features=[0], max_depth=1).fit(X, y)
    assert tree.tree_.feature[0] == 0 and np.isnan(tree.tree_.threshold[0])
    # Without categorical_features one threshold cannot separate a scattered set.
    numeric = DecisionTreeClassifier(max_bins=255, max_depth=1).fit(X, y)
    assert np.mean(numeric.predict(X) == y) < 0.8


@pytest.mark.parametrize("criterion", ["gini", "squared_error"])
def test_sorted_categories_find_the_best_partition(criterion):
    # Fisher / Breiman: for two classes and for the squared error, the best of the 2^(k-1)
    # partitions is a prefix of the categories sorted by their mean target.
    rng = np.random.default_rng(1)
    for seed in range(5):
        rng = np.random.default_rng(seed)
        c = rng.integers(0, 7, 400)
        share = rng.uniform(size=7)
        if criterion == "gini":
            y = (rng.uniform(size=400) < share[c]).astype(int)
            model = DecisionTreeClassifier(max_depth=1, max_bins=255, categorical_features=[0])
        else:
            y = share[c] * 3 + rng.normal(scale=0.5, size=400)
            model = DecisionTreeRegressor(max_depth=1, max_bins=255, categorical_features=[0])
        model.fit(c.reshape(-1, 1).astype(float), y)
        assert _root_children_impurity(model) == pytest.approx(
            _best_partition_impurity(c, y, criterion), rel=1e-9)


def test_native_categories_beat_one_hot_at_equal_depth():
    X, y = _category_set_data(n=4000, n_levels=40, seed=3)
    X_test, y_test = _category_set_data(n=2000, n_levels=40, seed=3)
    native = DecisionTreeClassifier(max_depth=2, max_bins=255, categorical_features=[0])
    native.fit(X, y)
    one_hot = np.column_stack([X[:, 0:1] == k for k in range(40)] + [X[:, 1:]]).astype(float)
    one_hot_test = np.column_stack([X_test[:, 0:1] == k for k in range(40)]
                                   + [X_test[:, 1:]]).astype(float)
    encoded = DecisionTreeClassifier(max_depth=2, max_bins=255).fit(one_hot, y)
    native_accuracy = np.mean(native.predict(X_test) == y_test)
    assert native_accuracy == 1.0
    assert native_accuracy > np.mean(encoded.predict(one_hot_test) == y_test) + 0.2


def test_boosting_accuracy_matches_hist_gradient_boosting():
    rng = np.random.default_rng(5)
    n = 6000
    cats = rng.integers(0, [8, 30, 60], size=(n, 3))
    effects = [rng.normal(size=k) for k in (8, 30, 60)]
    numeric = rng.normal(size=(n, 2))
    logit = sum(effects[j][cats[:, j]] for j in range(3)) + numeric[:, 0]
    y = (logit + rng.logistic(size=n) > 0).astype(int)
    X = np.column_stack([cats, numeric]).astype(float)
    train, test = slice(0, 4000), slice(4000, None)
    ours = GradientBoostingClassifier(n_estimators=100, max_depth=None, max_leaf_nodes=31,
                                      min_samples_leaf=20, max_bins=255,
                                      categorical_features=[0, 1, 2], random_state=0)
    theirs = HistGradientBoostingClassifier(max_iter=100, categorical_features=[0, 1, 2],
                                            early_stopping=False, random_state=0)
    ours_accuracy = np.mean(ours.fit(X[train], y[train]).predict(X[test]) == y[test])
    with threadpool_limits(1):  # its OpenMP threads crawl on a busy machine
        theirs_accuracy = np.mean(theirs.fit(X[train], y[train]).predict(X[test]) == y[test])
    assert ours_accuracy >= theirs_accuracy - 0.02


def test_forests_and_multiclass_trees_split_categories():
    rng = np.random.default_rng(7)
    c = rng.integers(0, 30, 3000)
    classes = rng.integers(0, 3, 30)  # each category belongs to one of three classes
    y = classes[c]
    X = np.column_stack([c, rng.normal(size=3000)]).astype(float)
    for model in (DecisionTreeClassifier(max_bins=255, categorical_features=[0]),
                  ExtraTreesClassifier(20, max_bins=255, categorical_features=[0],
                                       random_state=0),
                  RandomForestClassifier(20, max_bins=255, categorical_features=[0],
                                         random_state=0)):
        assert np.mean(model.fit(X, y).predict(X) == y) == 1.0, type(model).__name__


def test_the_forms_of_categorical_features_agree():
    pd = pytest.importorskip("pandas")
    X, y = _category_set_data(n=1000)
    frame = pd.DataFrame({"c": X[:, 0], "x": X[:, 1]})
    reference = DecisionTreeClassifier(max_bins=255, categorical_features=[0],
                                       random_state=0).fit(X, y)
    for spec, data in (([True, False], X), (np.array([0]), X), (["c"], frame)):
        model = DecisionTreeClassifier(max_bins=255, categorical_features=spec,
                                       random_state=0).fit(data, y)
        np.testing.assert_array_equal(model.tree_.categorical_bitsets,
                                      reference.tree_.categorical_bitsets)
        np.testing.assert_array_equal(model.is_categorical_, [True, False])


def test_no_categorical_feature_grows_the_numeric_tree():
    X, y = _category_set_data(n=1000)
    plain = GradientBoostingClassifier(n_estimators=5, max_bins=64, random_state=0).fit(X, y)
    # "from_dtype" on an ndarray selects no feature: the very same model.
    same = GradientBoostingClassifier(n_estimators=5, max_bins=64, random_state=0,
                                      categorical_features="from_dtype").fit(X, y)
    assert same.is_categorical_ is None
    for a, b in zip(plain.estimators_.flat, same.estimators_.flat, strict=True):
        assert b.tree_.categorical_bitsets is None
        for name, array in a.tree_.arrays().items():
            np.testing.assert_array_equal(array, b.tree_.arrays()[name], err_msg=name)


def test_pandas_from_dtype_and_categories_at_predict():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    names = np.array([f"level{k}" for k in range(12)])
    c = rng.integers(0, 12, 2000)
    y = np.isin(c, [0, 3, 5, 8, 11]).astype(int)
    frame = pd.DataFrame({"color": pd.Categorical(names[c]), "x": rng.normal(size=2000)})
    model = GradientBoostingClassifier(n_estimators=20, max_bins=255,
                                       categorical_features="from_dtype").fit(frame, y)
    assert list(model.is_categorical_) == [True, False]
    assert np.mean(model.predict(frame) == y) == 1.0
    # The same values under categories in another order map by value, not by code.
    shuffled = frame.copy()
    shuffled["color"] = pd.Categorical(names[c], categories=names[::-1])
    np.testing.assert_array_equal(model.predict_proba(shuffled), model.predict_proba(frame))
    # A category unseen at fit is treated as missing: as NaN.
    unseen = frame.iloc[:5].copy()
    unseen["color"] = pd.Categorical(["purple"] * 5)
    missing = frame.iloc[:5].copy()
    missing["color"] = pd.Categorical([np.nan] * 5, categories=names)
    np.testing.assert_array_equal(model.predict_proba(unseen), model.predict_proba(missing))
    with pytest.raises(ValueError, match="pass X as a DataFrame"):
        model.predict(frame.to_numpy())


def test_unseen_numeric_category_follows_the_missing_side():
    X, y = _category_set_data(n=2000, n_levels=20)
    model = DecisionTreeClassifier(max_bins=255, categorical_features=[0], random_state=0)
    model.fit(X, y)
    rows = X[:50].copy()
    nan_rows = rows.copy()
    nan_rows[:, 0] = np.nan
    for unseen in (20.0, 100.0, 2.5, -3.0):  # no training row had these values
        rows[:, 0] = unseen
        np.testing.assert_array_equal(model.predict_proba(rows), model.predict_proba(nan_rows))


def test_negative_categories_are_missing_at_fit():
    X, y = _category_set_data(n=1000)
    X[::7, 0] = -1.0
    as_nan = X.copy()
    as_nan[::7, 0] = np.nan
    a = DecisionTreeClassifier(max_bins=255, categorical_features=[0], random_state=0).fit(X, y)
    b = DecisionTreeClassifier(max_bins=255, categorical_features=[0],
                               random_state=0).fit(as_nan, y)
    for name, array in a.tree_.arrays().items():
        np.testing.assert_array_equal(array, b.tree_.arrays()[name], err_msg=name)


def test_bad_categorical_input_is_refused():
    X, y = _category_set_data(n=500)
    fractional = X.copy()
    fractional[0, 0] = 1.5
    with pytest.raises(ValueError, match="has the value 1.5"):
        DecisionTreeClassifier(max_bins=255, categorical_features=[0]).fit(fractional, y)
    with pytest.raises(ValueError, match="needs the histogram finder"):
        DecisionTreeClassifier(categorical_features=[0]).fit(X, y)
    with pytest.raises(ValueError, match="dense X only"):
        DecisionTreeClassifier(max_bins=255, categorical_features=[0]).fit(
            sp.csr_matrix(X), y)
    with pytest.raises(ValueError, match="indices outside"):
        DecisionTreeClassifier(max_bins=255, categorical_features=[2]).fit(X, y)
    with pytest.raises(ValueError, match="boolean mask of 3 entries"):
        DecisionTreeClassifier(max_bins=255,
                               categorical_features=[True, False, True]).fit(X, y)
    with pytest.raises(ValueError, match="no feature names"):
        DecisionTreeClassifier(max_bins=255, categorical_features=["c"]).fit(X, y)


def test_more_levels_than_max_bins_get_category_bins():
    # More levels than bins (test_categorical_bins.py has the rule's oracles): the
    # max_bins - 1 most frequent categories a bin each (ties: the smaller), the rest one.
    pd = pytest.importorskip("pandas")
    levels = [f"l{k:02d}" for k in range(40)]
    frame = pd.DataFrame({"c": pd.Categorical(levels * 5 + ["l39"])})
    y = np.arange(201) % 2
    model = GradientBoostingClassifier(n_estimators=3, max_bins=32,
                                       categorical_features="from_dtype").fit(frame, y)
    np.testing.assert_array_equal(model.category_bins_[0], list(range(30)) + [39])
    X, y = _category_set_data(n=500)  # categories 0..19, 16 bins
    tree = DecisionTreeClassifier(max_bins=16, categorical_features=[0]).fit(X, y)
    assert tree.category_bins_[0].shape[0] == 15


@pytest.mark.parametrize("model", [
    DecisionTreeRegressor(max_bins=255, categorical_features=[0], random_state=0),
    RandomForestClassifier(5, max_bins=255, categorical_features=[0], random_state=0),
    GradientBoostingRegressor(n_estimators=10, max_bins=255, categorical_features=[0],
                              random_state=0),
])
def test_save_load_round_trip_keeps_category_sets(model, tmp_path):
    X, y = _category_set_data(n=1500)
    X[::11, 0] = np.nan
    model.fit(X, y)
    path = tmp_path / "model.cfmodel"
    save_model(model, path)
    with zipfile.ZipFile(path) as archive:
        assert json.loads(archive.read("meta.json"))["format_version"] == 2
    loaded = load_model(path)
    rows = np.vstack([X[:200], [[25.0, 0.0], [np.nan, 1.0]]])  # an unseen category, NaN
    np.testing.assert_array_equal(loaded.predict(rows), model.predict(rows))
    np.testing.assert_array_equal(loaded.known_categories_[0], model.known_categories_[0])


def test_numeric_models_still_save_as_format_version_1(tmp_path):
    X, y = _category_set_data(n=300)
    save_model(DecisionTreeClassifier(max_bins=255).fit(X, y), tmp_path / "m")
    with zipfile.ZipFile(tmp_path / "m") as archive:
        assert json.loads(archive.read("meta.json"))["format_version"] == 1


def test_packed_boosting_walk_matches_the_tree_by_tree_sums():
    X, y = _category_set_data(n=3000, n_levels=30, seed=4)
    X[::13, 0] = np.nan
    model = GradientBoostingClassifier(n_estimators=15, max_bins=255, categorical_features=[0],
                                       random_state=0).fit(X, y)
    rows = np.vstack([X[:500], [[31.0, 0.5], [np.nan, -0.5]]])
    # staged_* adds tree by tree (Tree.apply); predict walks the packed ensemble.
    np.testing.assert_array_equal(list(model.staged_decision_function(rows))[-1].ravel(),
                                  model.decision_function(rows))


def _walk(tree, x):
    """Leaf of row ``x``, walked in Python from the node arrays and bitsets."""
    t = tree.tree_
    node = 0
    while t.children_left[node] != -1:
        value = x[t.feature[node]]
        if np.isnan(value):
            left = bool(t.missing_go_to_left[node])
        elif np.isnan(t.threshold[node]):
            c = int(value)
            left = bool((t.categorical_bitsets[node, c // 32] >> (c % 32)) & 1)
        else:
            left = value <= t.threshold[node]
        node = t.children_left[node] if left else t.children_right[node]
    return node


def test_apply_and_decision_path_follow_the_category_sets():
    X, y = _category_set_data(n=2000)
    X[::9, 0] = np.nan
    tree = DecisionTreeClassifier(max_bins=255, categorical_features=[0], max_depth=4,
                                  random_state=0).fit(X, y)
    leaves = tree.apply(X)
    np.testing.assert_array_equal(leaves, [_walk(tree, x) for x in X])
    path = tree.decision_path(X).toarray().astype(bool)
    is_leaf = tree.tree_.children_left == -1
    assert np.all((path & is_leaf).sum(axis=1) == 1)
    np.testing.assert_array_equal(np.argmax(path & is_leaf, axis=1), leaves)


def test_fold_unknown_categories_sends_unseen_categories_the_nan_way():
    from cipherforest.tree._categorical import OTHER_BIT, fold_unknown_categories

    def members(bits):
        return {c for c in range(32 * bits.shape[0]) if (bits[c // 32] >> np.uint32(c % 32)) & 1}

    left = np.zeros((3, 8), dtype=np.uint32)
    left[0, 0] = (1 << 1) | (1 << 3)  # categories 1 and 3 go left
    feature = np.array([0, -2, -2])
    threshold = np.array([np.nan, -2.0, -2.0])
    known = [np.array([1.0, 2.0, 3.0]), None]
    nan_right = fold_unknown_categories(left, feature, threshold, np.array([0, 0, 0]), known)
    assert members(nan_right[0]) == {1, 3}
    nan_left = fold_unknown_categories(left, feature, threshold, np.array([1, 0, 0]), known)
    assert members(nan_left[0]) == {1, 3} | (set(range(256)) - {1, 2, 3})
    assert OTHER_BIT in members(nan_left[0])
    np.testing.assert_array_equal(nan_left[1:], 0)  # leaves keep their (empty) rows
    # A categorical feature split by a threshold cannot be folded: the caller maps X.
    assert fold_unknown_categories(left, feature, np.array([0.5, -2.0, -2.0]),
                                   np.array([1, 0, 0]), known) is None


@pytest.mark.parametrize("model", [
    RandomForestClassifier(7, max_bins=255, categorical_features=[0], random_state=0),
    GradientBoostingClassifier(n_estimators=12, max_bins=255, categorical_features=[0],
                               random_state=0),
], ids=["forest", "boosting"])
def test_unseen_categories_predict_as_nan_without_a_copy_of_X(model):
    import tracemalloc

    X, y = _category_set_data(n=3000, n_levels=30, seed=5)
    X = np.column_stack([X, np.random.default_rng(0).normal(size=(3000, 8))])
    X[::9, 0] = np.nan
    model.fit(X[X[:, 0] != 7], y[X[:, 0] != 7])  # category 7 is never seen
    rows = np.tile(X[:40], (5, 1))
    odd = [7.0, 30.0, 254.0, 255.0, 300.0, 1e12, 2.5, -3.0, -0.0]
    rows[: len(odd), 0] = odd
    as_nan = rows.copy()
    as_nan[: len(odd) - 1, 0] = np.nan  # -0.0 is category 0, seen
    np.testing.assert_array_equal(model.predict_proba(rows), model.predict_proba(as_nan))
    assert rows[2, 0] == 254.0  # X itself is left as it is
    big = np.ascontiguousarray(np.tile(X, (40, 1)))  # 120,000 x 10
    model.predict_proba(big[:10])
    tracemalloc.start()
    proba = model.predict_proba(big)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # The probabilities (and boosting's raw scores) are allocated; a copy of X is not.
    assert peak < 2 * proba.nbytes + big.nbytes // 4, (peak, big.nbytes)
