"""Split finding at a cost proportional to the features a node looks at (``_node_features``).

What the tests prove, with their oracles:

* the node sort (radix or insertion sort of presorted ranks) gives a node's samples and
  values in the order of the presorted layout filtered to the node (NaN last, ties by row
  id), at sizes on both sides of the insertion/radix switch and over one to three radix passes;
* ``presort`` (quicksort, ties put in row order) is NumPy's stable sort, bit for bit;
* forests grow the same trees whichever layout the cost model picks: every tree array equal
  with node sorts / per-feature histograms forced on and off (classification with NaN, ties,
  whole class weights, best-first growth, random thresholds; regression with whole targets, whose
  sums are exact in any order);
* the cost model picks node sorts on wide data with ``max_features="sqrt"`` (not on narrow
  data), per-feature histograms unless (nearly) every feature is drawn;
* Gini histogram nodes under whole weights, split by sorting their rows' bins
  (``best_split_bins_gini``), grow the trees the histograms grow: the oracle is the same
  fit with every weight halved (not whole, so histograms; halving is exact, so the same
  candidates and values), at node sizes on both sides of the insertion/counting switch.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression

from _helpers.trees import assert_same_forests, assert_same_tree  # noqa: E402
from cipherforest import DecisionTreeClassifier
from cipherforest.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from cipherforest.tree import ExtraTreeClassifier, _fit
from cipherforest.tree._common import CRITERION_GINI
from cipherforest.tree._fit import presort, row_index_dtype
from cipherforest.tree._node_features import (
    BINS_INSERTION_MAX,
    INSERTION_SORT_MAX,
    LAYOUT_COLUMNS,
    LAYOUT_NODE_SORT,
    LAYOUT_PRESORTED,
    exact_layout,
    feature_histograms_pay,
    node_sort_pays,
    radix_passes,
    sort_node_feature,
    sorted_ranks,
)


def _with_ties_and_nan(rng, n_rows, n_features):
    X = rng.normal(size=(n_rows, n_features))
    X[:, 0] = np.round(X[:, 0])  # many ties
    X[::7, 1] = np.nan
    X[::5, 2] = 0.0
    X[::10, 2] = -0.0
    return X


@pytest.mark.parametrize("n_rows", [300, 70_000])
def test_presort_is_the_stable_sort(n_rows):
    X = _with_ties_and_nan(np.random.default_rng(0), n_rows, 4)
    order, values = presort(X)
    stable = np.argsort(X, axis=0, kind="stable")
    np.testing.assert_array_equal(order, stable.T)
    assert order.dtype == row_index_dtype(n_rows)
    expected = np.take_along_axis(X, stable, axis=0).T
    np.testing.assert_array_equal(values.view(np.int64), expected.view(np.int64))


@pytest.mark.parametrize(("n_rows", "passes"), [(200, 1), (50_000, 2), (70_000, 3)])
def test_node_sort_is_the_presorted_layout_of_the_node(n_rows, passes):
    rng = np.random.default_rng(1)
    X = _with_ties_and_nan(rng, n_rows, 3)
    sorted_index, sorted_value = presort(X)
    ranks = sorted_ranks(sorted_index)
    dtype = sorted_index.dtype
    keys = np.zeros(n_rows, dtype=dtype)
    keys_tmp = np.zeros(n_rows, dtype=dtype)
    counts = np.zeros(256, dtype=np.int64)
    index_out = np.zeros(n_rows, dtype=dtype)
    value_out = np.zeros(n_rows)
    assert radix_passes(n_rows) == passes  # 8, 16 and 17 bit ranks
    for size in (1, 2, INSERTION_SORT_MAX, INSERTION_SORT_MAX + 1, 150, n_rows):
        node = np.sort(rng.choice(n_rows, size, replace=False)).astype(dtype)
        # The node's rows in some segment of a longer row order, shuffled (a node's rows
        # are in any order).
        samples = np.concatenate([np.zeros(3, dtype=dtype), rng.permutation(node)])
        in_node = np.zeros(n_rows, dtype=bool)
        in_node[node] = True
        for feature in range(3):
            sort_node_feature(feature, samples, 3, 3 + size, ranks, sorted_index,
                              sorted_value, keys, keys_tmp, counts, index_out, value_out)
            expected = sorted_index[feature][in_node[sorted_index[feature]]]
            np.testing.assert_array_equal(index_out[:size], expected)
            np.testing.assert_array_equal(value_out[:size].view(np.int64),
                                          X[expected, feature].view(np.int64))


def _force_layouts(monkeypatch, on: bool):
    # On: extra trees read columns, the best splitter sorts its nodes; off: both partition
    # the presorted rows.
    monkeypatch.setattr(_fit, "exact_layout", lambda n_features, max_features, n_rows,
                        is_random: ((LAYOUT_COLUMNS if is_random else LAYOUT_NODE_SORT)
                                    if on else LAYOUT_PRESORTED))
    monkeypatch.setattr(_fit, "feature_histograms_pay", lambda *args: on)


def _wide_classification():
    X, y = make_classification(1200, 60, n_informative=12, n_classes=4, random_state=0)
    X[::13, 5] = np.nan
    X[:, 7] = np.round(X[:, 7])
    return X, y


@pytest.mark.parametrize("make", [
    lambda: RandomForestClassifier(6, random_state=0),
    lambda: ExtraTreesClassifier(6, random_state=0),
    lambda: RandomForestClassifier(6, criterion="entropy", random_state=0),
    # Whole class weights: fractional ones sum in a different order (the node's rows, not
    # a feature's), which may round differently.
    lambda: RandomForestClassifier(6, class_weight={0: 1, 1: 3, 2: 2, 3: 1},
                                   max_leaf_nodes=40, random_state=0),
    lambda: RandomForestClassifier(6, max_bins=64, random_state=0),
    lambda: ExtraTreesClassifier(6, max_bins=255, random_state=0),
    lambda: RandomForestClassifier(6, max_bins=255, max_leaf_nodes=40, random_state=0),
], ids=["rf", "et", "entropy", "class-weight-best-first", "rf-hist", "et-hist",
        "hist-best-first"])
def test_per_node_layouts_grow_the_same_trees(monkeypatch, make):
    X, y = _wide_classification()
    _force_layouts(monkeypatch, False)
    full = make().fit(X, y)
    _force_layouts(monkeypatch, True)
    per_node = make().fit(X, y)
    assert_same_forests(full, per_node)
    np.testing.assert_array_equal(full.predict_proba(X), per_node.predict_proba(X))


@pytest.mark.parametrize("forest", [RandomForestRegressor, ExtraTreesRegressor])
@pytest.mark.parametrize("max_bins", [None, 255])
def test_per_node_layouts_same_regression_trees_with_exact_sums(monkeypatch, forest,
                                                                 max_bins):
    X, y = make_regression(1500, 40, random_state=0)
    X[::11, 3] = np.nan
    y = np.round(y / 10)  # whole targets: every sum is exact, in any order
    _force_layouts(monkeypatch, False)
    full = forest(4, max_features=0.1, max_bins=max_bins, random_state=0).fit(X, y)
    _force_layouts(monkeypatch, True)
    per_node = forest(4, max_features=0.1, max_bins=max_bins, random_state=0).fit(X, y)
    assert_same_forests(full, per_node)


def test_node_sort_leaves_the_shared_presorted_rows_untouched(monkeypatch):
    X, y = _wide_classification()
    _force_layouts(monkeypatch, True)
    data = _fit.prepare_tree_data(X, None, 0)
    before = data.sorted_index.copy(), data.sorted_value.copy()
    params = _fit.GrowthParams(CRITERION_GINI, False, None, 7, -1, 2, 1, 0.0, 0.0, -1)
    weights = np.random.default_rng(0).integers(0, 3, len(y)).astype(float)
    tree, leaves = _fit.grow_tree_on(data, y.astype(float), weights, 4, params, 0,
                                     return_leaves=True)
    assert tree.node_count > 1
    np.testing.assert_array_equal(data.sorted_index, before[0])
    np.testing.assert_array_equal(data.sorted_value.view(np.int64), before[1].view(np.int64))
    # Each row's leaf, read off the partitioned row order, is the leaf it falls in.
    positive = weights > 0
    np.testing.assert_array_equal(leaves[positive], tree.apply(X[positive]))
    assert np.all(leaves[~positive] == -1)


def test_cost_model_picks_the_per_node_layouts():
    # max_features="sqrt": 28 of MNIST's 784 features, 44 of 2,000, 7 of 50, 4 of 20.
    assert node_sort_pays(784, 28, 10_000)
    assert node_sort_pays(2_000, 44, 5_000)
    assert node_sort_pays(50, 7, 25_000)
    assert not node_sort_pays(20, 4, 100_000)  # narrow: presorted
    for n_features, max_features in ((784, 28), (2_000, 44), (50, 7), (20, 4)):
        assert feature_histograms_pay(n_features, max_features)
    # Extra trees read columns on every shape, narrow and every feature drawn included.
    for n_features, max_features in ((784, 28), (20, 4), (20, 20)):
        assert exact_layout(n_features, max_features, 100_000, True) == LAYOUT_COLUMNS
    assert exact_layout(784, 28, 10_000, False) == LAYOUT_NODE_SORT
    assert exact_layout(20, 4, 100_000, False) == LAYOUT_PRESORTED
    # Every feature drawn (single trees, regression forests): the full layouts.
    assert not node_sort_pays(784, 784, 10_000)
    assert not feature_histograms_pay(784, 784)
    assert not feature_histograms_pay(20, 16)


def test_extra_trees_presort_nothing(monkeypatch):
    # Extra trees read X by column: neither the forest nor a single tree presorts (a
    # several-output forest grows on the general finder, which presorts once, lazily).
    X, y = make_classification(600, 20, n_informative=6, random_state=0)
    X[::9, 3] = np.nan
    calls = []

    def counting_presort(values):
        calls.append(values.shape)
        return presort(values)

    monkeypatch.setattr(_fit, "presort", counting_presort)
    assert ExtraTreesClassifier(4, random_state=0).fit(X, y).score(X, y) == 1.0
    assert ExtraTreeClassifier(random_state=0).fit(X, y).score(X, y) == 1.0
    assert ExtraTreesRegressor(3, random_state=0).fit(X, y.astype(float)).score(X, y) > 0.99
    assert calls == []
    two_outputs = np.column_stack([y, 1 - y])
    forest = ExtraTreesClassifier(3, random_state=0).fit(X, two_outputs)
    assert calls == [X.shape]  # once for the fit's three trees
    assert forest.score(X, two_outputs) > 0.9


@pytest.mark.parametrize("nan", [False, True], ids=["no-nan", "nan"])
def test_bin_sorting_nodes_grow_the_histograms_trees(nan):
    X, y = _wide_classification()
    if not nan:
        X = np.nan_to_num(X)
    weights = np.random.default_rng(1).integers(1, 4, len(y)).astype(float)
    whole = DecisionTreeClassifier(max_bins=255, max_features="sqrt", random_state=0)
    halved = DecisionTreeClassifier(max_bins=255, max_features="sqrt", random_state=0)
    whole.fit(X, y, sample_weight=weights)
    halved.fit(X, y, sample_weight=weights / 2)
    sizes = whole.tree_.n_node_samples[whole.tree_.children_left >= 0]
    assert sizes.min() <= BINS_INSERTION_MAX < sizes.max()  # both sorts split nodes
    assert_same_tree(whole.tree_, halved.tree_, skip=("weighted_n_node_samples",))
    np.testing.assert_array_equal(whole.tree_.weighted_n_node_samples,
                                  2 * halved.tree_.weighted_n_node_samples)

    forest = RandomForestClassifier(5, max_bins=255, random_state=0).fit(X, y)
    forest_halved = RandomForestClassifier(5, max_bins=255, random_state=0).fit(
        X, y, sample_weight=np.full(len(y), 0.5))
    assert_same_forests(forest, forest_halved, skip=("weighted_n_node_samples",))
    np.testing.assert_array_equal(forest.predict_proba(X), forest_halved.predict_proba(X))
