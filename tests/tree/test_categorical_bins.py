"""Categorical columns with more levels than ``max_bins`` (or a category of ``max_bins`` or
more): category bins (``category_bins_``) — the ``max_bins - 1`` most frequent categories a
bin each, the rest one shared bin. Oracles: the rule written out here on the data (the
capped codes) grows the very same trees; scikit-learn's HistGradientBoosting on the capped
codes; the models of columns within ``max_bins`` are those of category ``c`` in bin ``c``."""

from __future__ import annotations

import json
import tracemalloc
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_limits

from cipherforest.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
)
from cipherforest.io import load_model, save_model
from cipherforest.tree import DecisionTreeClassifier, DecisionTreeRegressor


def _high_cardinality(n=6000, n_levels=2000, seed=0):
    """Column 0: one of ``n_levels`` categories, drawn with Zipf-like popularity (category
    values scattered over ``0..10 n_levels``); the label follows a random effect of the 200
    most popular categories (the rest have none). Column 1: a weak numeric signal."""
    rng = np.random.default_rng(seed)
    values = rng.choice(10 * n_levels, n_levels, replace=False).astype(float)
    popularity = 1.0 / (np.arange(n_levels) + 3.0)
    code = rng.choice(n_levels, n, p=popularity / popularity.sum())
    effect = rng.normal(size=n_levels) * 2.0
    effect[200:] = 0.0
    x = rng.normal(size=n)
    y = (effect[code] + 0.5 * x + rng.logistic(size=n) * 0.5 > 0).astype(int)
    return np.column_stack([values[code], x]), y


def _capped(column, max_bins):
    """The documented rule, written out: the max_bins - 1 categories with the most rows
    (ties: the smaller) get codes 0.. in ascending order of category, the rest code
    max_bins - 1; NaN stays NaN."""
    present = column[~np.isnan(column)]
    values, counts = np.unique(present, return_counts=True)
    if values.shape[0] <= max_bins:
        kept = values
    else:
        ranked = sorted(zip(-counts, values, strict=True))[: max_bins - 1]
        kept = np.sort([v for _, v in ranked])
    code = {v: i for i, v in enumerate(kept)}
    return np.array([np.nan if np.isnan(v) else code.get(v, len(kept)) for v in column])


def _assert_same_trees(a, b):
    for name, array in a.tree_.arrays().items():
        np.testing.assert_array_equal(array, b.tree_.arrays()[name], err_msg=name)


@pytest.mark.parametrize("model", [
    DecisionTreeClassifier(max_bins=255, categorical_features=[0], random_state=0),
    RandomForestClassifier(8, max_bins=255, categorical_features=[0], random_state=0),
    GradientBoostingClassifier(n_estimators=15, max_bins=255, categorical_features=[0],
                               max_depth=None, max_leaf_nodes=15, random_state=0),
], ids=["tree", "forest", "boosting"])
def test_category_bins_grow_the_trees_of_the_capped_codes(model):
    X, y = _high_cardinality()
    X[::17, 0] = np.nan
    capped = X.copy()
    capped[:, 0] = _capped(X[:, 0], 255)
    ours = model.fit(X, y)
    kept = ours.category_bins_[0]
    assert kept.shape[0] == 254 and np.all(np.diff(kept) > 0)
    assert ours.known_categories_[0].shape[0] > 1000
    reference = type(model)(**model.get_params()).fit(capped, y)
    assert reference.category_bins_ == [None, None]  # codes below max_bins: code c, bin c
    if hasattr(ours, "estimators_"):
        for a, b in zip(np.ravel(ours.estimators_), np.ravel(reference.estimators_),
                        strict=True):
            _assert_same_trees(a, b)
    else:
        _assert_same_trees(ours, reference)
    np.testing.assert_array_equal(ours.predict_proba(X), reference.predict_proba(capped))


def test_frequent_categories_are_learned_as_well_as_hist_gradient_boosting_on_capped_codes():
    X, y = _high_cardinality(n=12000, n_levels=3000, seed=1)
    train, test = slice(0, 9000), slice(9000, None)
    ours = GradientBoostingClassifier(n_estimators=100, max_depth=None, max_leaf_nodes=31,
                                      min_samples_leaf=20, max_bins=255,
                                      categorical_features=[0], random_state=0)
    ours_accuracy = np.mean(ours.fit(X[train], y[train]).predict(X[test]) == y[test])
    # HistGradientBoosting refuses more than max_bins categories: give it the capped codes
    # of the training rows' categories (a category first seen in the test rows is NaN).
    kept = ours.category_bins_[0]
    seen = np.isin(X[:, 0], ours.known_categories_[0])
    capped = np.where(np.isin(X[:, 0], kept), np.searchsorted(kept, X[:, 0]), 254.0)
    capped[~seen] = np.nan
    theirs = HistGradientBoostingClassifier(max_iter=100, categorical_features=[0],
                                            early_stopping=False, random_state=0)
    Xc = np.column_stack([capped, X[:, 1]])
    with threadpool_limits(1):  # its OpenMP threads crawl on a busy machine
        theirs_accuracy = np.mean(theirs.fit(Xc[train], y[train]).predict(Xc[test])
                                  == y[test])
    numeric = GradientBoostingClassifier(n_estimators=100, max_depth=None, max_leaf_nodes=31,
                                         min_samples_leaf=20, max_bins=255, random_state=0)
    numeric_accuracy = np.mean(numeric.fit(X[train], y[train]).predict(X[test]) == y[test])
    # Within the gap of our boosting to HistGradientBoosting with at most max_bins
    # categories (test_categorical.py), and well above reading the categories as numbers.
    assert ours_accuracy >= theirs_accuracy - 0.02, (ours_accuracy, theirs_accuracy)
    assert ours_accuracy > numeric_accuracy + 0.02, (ours_accuracy, numeric_accuracy)


def test_trees_and_forests_learn_the_frequent_categories():
    X, y = _high_cardinality(n=12000, n_levels=3000, seed=2)
    train, test = slice(0, 9000), slice(9000, None)
    for cls, params in ((DecisionTreeClassifier, {"min_samples_leaf": 10}),
                        (RandomForestClassifier, {"n_estimators": 30, "n_jobs": 2})):
        native = cls(max_bins=255, categorical_features=[0], random_state=0, **params)
        ordinal = cls(max_bins=255, random_state=0, **params)
        native_accuracy = np.mean(native.fit(X[train], y[train]).predict(X[test]) == y[test])
        ordinal_accuracy = np.mean(ordinal.fit(X[train], y[train]).predict(X[test])
                                   == y[test])
        assert native_accuracy > ordinal_accuracy + 0.05, (cls.__name__, native_accuracy,
                                                           ordinal_accuracy)


@settings(max_examples=25, deadline=None)
@given(max_bins=st.integers(4, 40), data=st.data())
def test_columns_within_max_bins_keep_category_c_in_bin_c(max_bins, data):
    """At most max_bins levels: categories below max_bins are their own bins (the model of
    before category bins: the raw value indexes the bitsets); the same levels shifted to
    max_bins and more get bins in their order, which grows the very same tree."""
    n_levels = data.draw(st.integers(2, max_bins))
    levels = np.array(sorted(data.draw(st.sets(st.integers(0, max_bins - 1),
                                               min_size=n_levels, max_size=n_levels))))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    n = 300
    c = levels[rng.integers(0, n_levels, n)].astype(float)
    c[rng.uniform(size=n) < 0.05] = np.nan
    y = (rng.uniform(size=levels.max() + 1)[np.nan_to_num(c).astype(int)]
         + rng.normal(scale=0.3, size=n))
    X = np.column_stack([c, rng.normal(size=n)])
    model = DecisionTreeRegressor(max_bins=max_bins, categorical_features=[0],
                                  min_samples_leaf=3, random_state=0).fit(X, y)
    assert model.category_bins_ == [None, None]
    t = model.tree_
    inner = np.flatnonzero((t.children_left != -1) & np.isnan(t.threshold))
    for node in inner:  # a category's bit is the category's value
        bits = {b for b in range(256) if (t.categorical_bitsets[node, b // 32] >> (b % 32)) & 1}
        assert bits <= set(levels.tolist())
    shifted = X.copy()
    shifted[:, 0] = c * 7 + 1000  # same order, every category >= max_bins
    ranked = X.copy()
    ranked[:, 0] = np.searchsorted(levels, c).astype(float)
    ranked[np.isnan(c), 0] = np.nan
    a = DecisionTreeRegressor(max_bins=max_bins, categorical_features=[0], min_samples_leaf=3,
                              random_state=0).fit(shifted, y)
    b = DecisionTreeRegressor(max_bins=max_bins, categorical_features=[0], min_samples_leaf=3,
                              random_state=0).fit(ranked, y)
    np.testing.assert_array_equal(a.category_bins_[0], levels * 7 + 1000)
    _assert_same_trees(a, b)
    if np.array_equal(levels, np.arange(n_levels)):
        _assert_same_trees(model, b)


@pytest.mark.parametrize("model", [
    DecisionTreeClassifier(max_bins=64, categorical_features=[0], random_state=0),
    RandomForestClassifier(6, max_bins=64, categorical_features=[0], random_state=0),
    GradientBoostingClassifier(n_estimators=10, max_bins=64, categorical_features=[0],
                               random_state=0),
], ids=["tree", "forest", "boosting"])
def test_rare_categories_share_a_bin_and_unseen_ones_follow_nan(model):
    X, y = _high_cardinality(n=4000, n_levels=500, seed=3)
    X[::13, 0] = np.nan
    model.fit(X, y)
    kept = model.category_bins_[0]
    known = model.known_categories_[0]
    rare = known[~np.isin(known, kept)]
    unseen = np.setdiff1d(np.arange(0.0, 5001.0), known)
    rows = X[:30].copy()
    proba = {}
    for name, value in (("rare_a", rare[0]), ("rare_b", rare[-1]), ("unseen", unseen[0]),
                        ("huge", 1e12), ("negative", -4.0), ("fraction", kept[0] + 0.5),
                        ("nan", np.nan)):
        rows[:, 0] = value
        proba[name] = model.predict_proba(rows)
    np.testing.assert_array_equal(proba["rare_a"], proba["rare_b"])
    for name in ("unseen", "huge", "negative", "fraction"):
        np.testing.assert_array_equal(proba[name], proba["nan"], err_msg=name)
    rows[:, 0] = unseen[0]
    model.predict(rows)
    assert np.all(rows[:, 0] == unseen[0])  # X itself is left as it is


def test_a_million_levels_bound_the_memory_and_keep_the_smallest_of_ties():
    n = 1_000_000
    rng = np.random.default_rng(4)
    c = rng.permutation(n).astype(float) * 3.0  # every row its own category
    X = np.column_stack([c, rng.normal(size=n)])
    y = (X[:, 1] > 0).astype(int)
    model = DecisionTreeClassifier(max_bins=255, categorical_features=[0], max_depth=3,
                                   random_state=0)
    tracemalloc.start()
    model.fit(X, y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # Every category has one row: the 254 smallest get bins, the rest share bin 254.
    np.testing.assert_array_equal(model.category_bins_[0], np.arange(254) * 3.0)
    assert model.known_categories_[0].shape[0] == n
    # A few copies of X's 16 MB (validation, the mapped copy, the uniques, the bins), not
    # anything per category and bin.
    assert peak < 8 * X.nbytes, peak
    assert np.mean(model.predict(X[:20000]) == y[:20000]) > 0.99


def test_bad_values_in_a_column_with_category_bins():
    X, y = _high_cardinality(n=2000, n_levels=600, seed=5)
    fractional = X.copy()
    fractional[3, 0] = 1000.25
    with pytest.raises(ValueError, match="has the value 1000.25: categories must be "
                                         "non-negative integers"):
        GradientBoostingClassifier(max_bins=255, categorical_features=[0]).fit(fractional, y)
    negative = X.copy()
    negative[::5, 0] = -7.0
    as_nan = X.copy()
    as_nan[::5, 0] = np.nan
    a = DecisionTreeClassifier(max_bins=255, categorical_features=[0], random_state=0)
    b = DecisionTreeClassifier(max_bins=255, categorical_features=[0], random_state=0)
    _assert_same_trees(a.fit(negative, y), b.fit(as_nan, y))
    np.testing.assert_array_equal(a.category_bins_[0], b.category_bins_[0])


def test_pandas_categories_beyond_max_bins_and_other_categories_at_predict():
    pd = pytest.importorskip("pandas")
    X, y = _high_cardinality(n=5000, n_levels=400, seed=6)
    names = np.array([f"shop{int(v)}" for v in X[:, 0]])
    frame = pd.DataFrame({"shop": pd.Categorical(names), "x": X[:, 1]})
    assert len(frame["shop"].cat.categories) > 255
    model = GradientBoostingClassifier(n_estimators=20, max_bins=255, random_state=0,
                                       categorical_features="from_dtype").fit(frame, y)
    assert model.category_bins_[0].shape[0] == 254
    # The same values under the categories in another order (and one more) map by value.
    reordered = frame.copy()
    categories = list(frame["shop"].cat.categories[::-1]) + ["new shop"]
    reordered["shop"] = pd.Categorical(names, categories=categories)
    np.testing.assert_array_equal(model.predict_proba(reordered), model.predict_proba(frame))
    unseen = frame.iloc[:10].copy()
    unseen["shop"] = pd.Categorical(["new shop"] * 10)
    missing = frame.iloc[:10].copy()
    missing["shop"] = pd.Categorical([np.nan] * 10, categories=categories)
    np.testing.assert_array_equal(model.predict_proba(unseen), model.predict_proba(missing))


@pytest.mark.parametrize("model", [
    DecisionTreeRegressor(max_bins=255, categorical_features=[0], random_state=0),
    RandomForestClassifier(5, max_bins=255, categorical_features=[0], random_state=0),
    GradientBoostingRegressor(n_estimators=10, max_bins=255, categorical_features=[0],
                              random_state=0),
], ids=["tree", "forest", "boosting"])
def test_save_load_keeps_the_category_bins(model, tmp_path):
    X, y = _high_cardinality(n=3000, n_levels=900, seed=7)
    X[::11, 0] = np.nan
    model.fit(X, y)
    path = tmp_path / "model.cfmodel"
    save_model(model, path)
    with zipfile.ZipFile(path) as archive:
        assert json.loads(archive.read("meta.json"))["format_version"] == 3
    loaded = load_model(path)
    rows = np.vstack([X[:300], [[12345.0, 0.0], [np.nan, 1.0], [-1.0, 0.5]]])
    np.testing.assert_array_equal(loaded.predict(rows), model.predict(rows))
    np.testing.assert_array_equal(loaded.category_bins_[0], model.category_bins_[0])


def test_a_file_written_before_category_bins_loads(tmp_path):
    """A model file of categorical features without ``category_bins_`` (as files written
    before it) loads and predicts as category c in bin c."""
    rng = np.random.default_rng(8)
    c = rng.integers(0, 40, 2000).astype(float)
    y = np.isin(c, rng.choice(40, 20, replace=False)).astype(int)
    X = np.column_stack([c, rng.normal(size=2000)])
    model = GradientBoostingClassifier(n_estimators=8, max_bins=255, categorical_features=[0],
                                       random_state=0).fit(X, y)
    path = tmp_path / "new.cfmodel"
    save_model(model, path)
    old = tmp_path / "old.cfmodel"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(old, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "meta.json":
                meta = json.loads(data)
                assert meta["format_version"] == 2
                del meta["attributes"]["category_bins_"]
                data = json.dumps(meta).encode()
            target.writestr(item, data)
    loaded = load_model(old)
    assert getattr(loaded, "category_bins_", None) is None
    rows = np.vstack([X[:200], [[45.0, 0.0], [np.nan, 0.0]]])
    np.testing.assert_array_equal(loaded.predict_proba(rows), model.predict_proba(rows))


def test_warm_start_keeps_the_category_bins_of_the_first_fit():
    X, y = _high_cardinality(n=4000, n_levels=800, seed=9)
    model = GradientBoostingClassifier(n_estimators=5, max_bins=64, categorical_features=[0],
                                       warm_start=True, random_state=0).fit(X, y)
    first = model.category_bins_[0].copy()
    # Other rows, whose most frequent categories differ: the first trees still read bins
    # by the first fit's categories.
    other = np.random.default_rng(1).permutation(X.shape[0])[:1500]
    model.set_params(n_estimators=10).fit(X[other], y[other])
    np.testing.assert_array_equal(model.category_bins_[0], first)
    fresh = GradientBoostingClassifier(n_estimators=5, max_bins=64, categorical_features=[0],
                                       random_state=0).fit(X[other], y[other])
    assert not np.array_equal(fresh.category_bins_[0], first)
    staged = list(model.staged_predict_proba(X[:100]))
    np.testing.assert_allclose(staged[-1], model.predict_proba(X[:100]))
