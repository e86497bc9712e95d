"""Behaviour of the forests in ``cipherforest.ensemble._forest``.

What the tests prove, with their oracles:

* determinism: the forest (every tree array) and its predictions do not depend on ``n_jobs``;
  the same ``random_state`` gives the same forest; warm start grows exactly the forest a single
  fit would (also with ``max_bins`` on data large enough for the binning subsample);
* bootstrap: each tree's seed and bootstrap sample are scikit-learn's (same root sample
  counts as scikit-learn's trees); ``max_samples`` sets the number of draws;
* out-of-bag: ``oob_decision_function_`` / ``oob_prediction_`` are recomputed from
  ``estimator_seeds_`` with ``bootstrap_counts`` (the seed's formula: average over the trees
  that did not draw the row); rows without OOB trees are NaN with a warning; ``oob_score_``
  tracks a held-out score;
* class weights: "balanced_subsample" balances every tree's bootstrap sample exactly,
  "balanced" multiplies the full-data weights, and both raise minority recall;
* histogram mode, NaN, feature importances, the fitted trees, save/load, the progress bar;
* score parity with scikit-learn on bundled and generated datasets (cross-validated).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import datasets
from sklearn import ensemble as sk_ensemble
from sklearn.base import ClassifierMixin
from sklearn.metrics import accuracy_score, r2_score, recall_score
from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score
from sklearn.utils import compute_sample_weight

from cipherforest import DecisionTreeClassifier, DecisionTreeRegressor
from cipherforest.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from cipherforest.ensemble._base import bootstrap_counts, seeded_stream
from cipherforest.io import load_model, save_model

FORESTS = [RandomForestClassifier, RandomForestRegressor, ExtraTreesClassifier,
           ExtraTreesRegressor]
CLASSIFIERS = [RandomForestClassifier, ExtraTreesClassifier]
REGRESSORS = [RandomForestRegressor, ExtraTreesRegressor]


def _ids(classes):
    return [c.__name__ for c in classes]


# ------------------------------------------------------------------------------ helpers
def is_classifier(forest_or_class) -> bool:
    """True for a classifier class or instance (scikit-learn's helper wants instances)."""
    cls = forest_or_class if isinstance(forest_or_class, type) else type(forest_or_class)
    return issubclass(cls, ClassifierMixin)


def _data(forest_cls, n_samples=400, random_state=0):
    """A 3-class classification or a noisy regression problem matching ``forest_cls``."""
    if is_classifier(forest_cls):
        return datasets.make_classification(n_samples, n_features=8, n_informative=5,
                                            n_classes=3, random_state=random_state)
    return datasets.make_regression(n_samples, n_features=8, n_informative=5, noise=5.0,
                                    random_state=random_state)


def _output(forest, X):
    """The forest's continuous output: probabilities or regression values."""
    return forest.predict_proba(X) if is_classifier(forest) else forest.predict(X)


def _assert_same_trees(a, b):
    """Both forests hold trees with identical node arrays, in the same order."""
    assert len(a.estimators_) == len(b.estimators_)
    for i, (ta, tb) in enumerate(zip(a.estimators_, b.estimators_, strict=True)):
        arrays_a, arrays_b = ta.tree_.arrays(), tb.tree_.arrays()
        for name in arrays_a:
            np.testing.assert_array_equal(arrays_a[name], arrays_b[name],
                                          err_msg=f"tree {i}, array {name}")


def _root(tree_est):
    t = tree_est.tree_
    return int(t.n_node_samples[0]), float(t.weighted_n_node_samples[0])


# ------------------------------------------------------------------------------ determinism
# Depth 4 keeps leaves impure, so leaf values are fractions whose sums depend on their order.
# n_jobs=3 is more threads than this machine's cores; -1 is all cores.
N_JOBS = [2, 3, -1]
DETERMINISM_PARAMS = {"n_estimators": 30, "max_depth": 4, "random_state": 0}


@pytest.mark.parametrize("forest_cls", FORESTS, ids=_ids(FORESTS))
def test_n_jobs_gives_identical_trees(forest_cls):
    X, y = _data(forest_cls)
    serial = forest_cls(n_jobs=1, **DETERMINISM_PARAMS).fit(X, y)
    for n_jobs in N_JOBS:
        threaded = forest_cls(n_jobs=n_jobs, **DETERMINISM_PARAMS).fit(X, y)
        _assert_same_trees(serial, threaded)
        np.testing.assert_array_equal(serial.estimator_seeds_, threaded.estimator_seeds_)


@pytest.mark.parametrize("forest_cls", FORESTS, ids=_ids(FORESTS))
def test_n_jobs_gives_identical_predictions(forest_cls):
    # The docstring promises "Results do not depend on it": bit for bit, as the trees are.
    # The trees being identical (test above), this only checks prediction threads.
    X, y = _data(forest_cls)
    forest = forest_cls(n_jobs=1, **DETERMINISM_PARAMS).fit(X, y)
    serial = _output(forest, X)
    for n_jobs in N_JOBS:
        np.testing.assert_array_equal(_output(forest.set_params(n_jobs=n_jobs), X), serial,
                                      err_msg=f"n_jobs={n_jobs}")


@pytest.mark.parametrize("forest_cls", FORESTS, ids=_ids(FORESTS))
def test_same_random_state_same_forest(forest_cls):
    X, y = _data(forest_cls)
    a = forest_cls(n_estimators=8, random_state=3).fit(X, y)
    b = forest_cls(n_estimators=8, random_state=3).fit(X, y)
    _assert_same_trees(a, b)
    np.testing.assert_array_equal(_output(a, X), _output(b, X))
    other = forest_cls(n_estimators=8, random_state=4).fit(X, y)
    # On fresh rows (fully grown trees all fit the training rows exactly).
    X_new, _ = _data(forest_cls, random_state=1)
    assert not np.array_equal(_output(a, X_new), _output(other, X_new))


@pytest.mark.parametrize("forest_cls", [RandomForestClassifier, RandomForestRegressor],
                         ids=["clf", "reg"])
def test_bootstrap_samples_are_scikit_learns(forest_cls):
    # Seeds are drawn as scikit-learn draws its trees' random_state, and bootstrap_counts
    # draws rows as scikit-learn does, so every tree's root sees scikit-learn's sample.
    X, y = _data(forest_cls, n_samples=300)
    ours = forest_cls(n_estimators=10, random_state=7).fit(X, y)
    theirs = getattr(sk_ensemble, forest_cls.__name__)(n_estimators=10, random_state=7)
    theirs.fit(X, y)
    np.testing.assert_array_equal(ours.estimator_seeds_,
                                  [t.random_state for t in theirs.estimators_])
    for mine, sk in zip(ours.estimators_, theirs.estimators_, strict=True):
        assert _root(mine) == (sk.tree_.n_node_samples[0], sk.tree_.weighted_n_node_samples[0])


# ------------------------------------------------------------------------------ warm start
@pytest.mark.parametrize("max_bins", [None, 32])
@pytest.mark.parametrize("forest_cls", FORESTS, ids=_ids(FORESTS))
def test_warm_start_equals_single_fit(forest_cls, max_bins):
    X, y = _data(forest_cls)
    grown = forest_cls(n_estimators=5, random_state=0, warm_start=True, max_bins=max_bins)
    grown.fit(X, y)
    first_five = list(grown.estimators_)
    grown.set_params(n_estimators=10).fit(X, y)
    assert grown.estimators_[:5] == first_five  # the old trees are kept, not regrown
    single = forest_cls(n_estimators=10, random_state=0, max_bins=max_bins).fit(X, y)
    _assert_same_trees(grown, single)
    np.testing.assert_array_equal(grown.estimator_seeds_, single.estimator_seeds_)
    np.testing.assert_array_equal(_output(grown, X), _output(single, X))


def test_warm_start_equals_single_fit_when_binning_subsamples():
    # Above 200,000 rows the bin edges come from a random row subsample. Growing 2 → 4 trees
    # must still give the forest a single fit of 4 trees gives.
    rng = np.random.RandomState(0)
    n = 200_500
    X = rng.normal(size=(n, 2))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(np.int64)
    params = {"random_state": 0, "max_bins": 16, "max_depth": 2}
    grown = RandomForestClassifier(n_estimators=2, warm_start=True, **params).fit(X, y)
    grown.set_params(n_estimators=4).fit(X, y)
    single = RandomForestClassifier(n_estimators=4, **params).fit(X, y)
    _assert_same_trees(grown, single)


def test_warm_start_rejects_fewer_trees():
    X, y = _data(RandomForestClassifier)
    forest = RandomForestClassifier(n_estimators=5, warm_start=True, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="n_estimators"):
        forest.set_params(n_estimators=3).fit(X, y)


# ------------------------------------------------------------------------------ out-of-bag
def _oob_oracle(forest, X, n_draws):
    """Average output over the trees whose bootstrap did not draw the row (NaN if none)."""
    n = X.shape[0]
    total, count = None, np.zeros(n)
    for tree, seed in zip(forest.estimators_, forest.estimator_seeds_, strict=True):
        out = tree.predict_proba(X) if is_classifier(forest) else tree.predict(X)[:, None]
        oob = bootstrap_counts(int(seed), n, n_draws) == 0
        total = np.zeros_like(out) if total is None else total
        total[oob] += out[oob]
        count += oob
    with np.errstate(invalid="ignore"):
        return total / count[:, None], count


@pytest.mark.parametrize("max_samples,n_draws", [(None, 30), (0.5, 15), (7, 7)])
@pytest.mark.parametrize("forest_cls", FORESTS, ids=_ids(FORESTS))
def test_oob_uses_only_trees_that_did_not_draw_the_row(forest_cls, max_samples, n_draws):
    X, y = _data(forest_cls, n_samples=30)
    forest = forest_cls(n_estimators=15, bootstrap=True, oob_score=True, random_state=0,
                        max_samples=max_samples).fit(X, y)
    expected, count = _oob_oracle(forest, X, n_draws)
    assert count.min() > 0  # 15 trees: every row is out of bag somewhere
    if is_classifier(forest):
        np.testing.assert_allclose(forest.oob_decision_function_, expected, rtol=1e-12)
        assert forest.oob_score_ == pytest.approx(
            accuracy_score(y, forest.classes_[expected.argmax(axis=1)]))
    else:
        np.testing.assert_allclose(forest.oob_prediction_, expected[:, 0], rtol=1e-12)
        assert forest.oob_score_ == pytest.approx(r2_score(y, expected[:, 0]))


@settings(max_examples=20, deadline=None)
@given(n_samples=st.integers(4, 40), n_estimators=st.integers(3, 8),
       seed=st.integers(0, 2**31 - 2), regression=st.booleans())
def test_oob_matches_oracle_property(n_samples, n_estimators, seed, regression):
    rng = np.random.RandomState(seed % 1000)
    X = rng.normal(size=(n_samples, 3))
    y = X[:, 0] + rng.normal(size=n_samples) if regression else np.arange(n_samples) % 2
    cls = RandomForestRegressor if regression else RandomForestClassifier
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # rows without OOB trees may happen
        forest = cls(n_estimators=n_estimators, oob_score=True, random_state=seed).fit(X, y)
    expected, count = _oob_oracle(forest, X, n_samples)
    got = forest.oob_prediction_[:, None] if regression else forest.oob_decision_function_
    np.testing.assert_array_equal(np.isnan(got).any(axis=1), count == 0)
    np.testing.assert_allclose(got[count > 0], expected[count > 0], rtol=1e-12)


@pytest.mark.parametrize("forest_cls", [RandomForestClassifier, RandomForestRegressor],
                         ids=["clf", "reg"])
def test_rows_without_oob_tree_warn_and_are_nan(forest_cls):
    X, y = _data(forest_cls, n_samples=60)
    with pytest.warns(UserWarning, match="Some inputs do not have OOB scores"):
        forest = forest_cls(n_estimators=2, oob_score=True, random_state=0).fit(X, y)
    seeds = forest.estimator_seeds_
    drawn_by_all = (bootstrap_counts(int(seeds[0]), 60, 60) > 0) & (
        bootstrap_counts(int(seeds[1]), 60, 60) > 0)
    assert 0 < drawn_by_all.sum() < 60
    got = forest.oob_decision_function_ if is_classifier(forest) else forest.oob_prediction_
    got = got.reshape(60, -1)
    np.testing.assert_array_equal(np.isnan(got).all(axis=1), drawn_by_all)
    assert not np.isnan(got[~drawn_by_all]).any()
    # The score uses the covered rows only (the seed's rule).
    if is_classifier(forest):
        expected = accuracy_score(y[~drawn_by_all],
                                  forest.classes_[got[~drawn_by_all].argmax(axis=1)])
    else:
        expected = r2_score(y[~drawn_by_all], got[~drawn_by_all, 0])
    assert forest.oob_score_ == pytest.approx(expected)


@pytest.mark.parametrize("forest_cls", [RandomForestClassifier, RandomForestRegressor],
                         ids=["clf", "reg"])
def test_no_row_out_of_bag_gives_nan_score(forest_cls):
    """Four rows, three trees, seed 19: every tree draws every row (found by hypothesis);
    the fit warns and the OOB score is NaN, as BaggingClassifier's, instead of failing."""
    rng = np.random.RandomState(19)
    X = rng.normal(size=(4, 3))
    y = X[:, 0] if forest_cls is RandomForestRegressor else np.arange(4) % 2
    with pytest.warns(UserWarning, match="4 of 4 samples were used by every estimator"):
        forest = forest_cls(n_estimators=3, oob_score=True, random_state=19).fit(X, y)
    assert np.isnan(forest.oob_score_)
    got = forest.oob_decision_function_ if is_classifier(forest) else forest.oob_prediction_
    assert np.isnan(got).all()


@pytest.mark.parametrize("forest_cls", [RandomForestClassifier, RandomForestRegressor],
                         ids=["clf", "reg"])
def test_oob_score_close_to_held_out_score(forest_cls):
    if is_classifier(forest_cls):
        X, y = datasets.make_classification(6000, n_features=20, n_informative=8,
                                            random_state=0)
    else:
        X, y = datasets.make_friedman1(6000, noise=1.0, random_state=0)
    forest = forest_cls(n_estimators=100, oob_score=True, random_state=0, n_jobs=-1)
    forest.fit(X[:3000], y[:3000])
    held_out = forest.score(X[3000:], y[3000:])
    assert abs(forest.oob_score_ - held_out) < 0.03, (forest.oob_score_, held_out)


def test_oob_score_is_plain_accuracy_with_class_weight():
    # The seed's OOB error is (1/N) sum of per-row losses, and oob_score_ estimates score():
    # class weights shape the trees, not the score.
    X, y, X_test, y_test = _imbalanced()
    forest = RandomForestClassifier(n_estimators=50, class_weight="balanced",
                                    min_samples_leaf=5, oob_score=True, random_state=0)
    forest.fit(X, y)
    oob_pred = forest.classes_[forest.oob_decision_function_.argmax(axis=1)]
    assert forest.oob_score_ == pytest.approx(accuracy_score(y, oob_pred))
    assert abs(forest.oob_score_ - forest.score(X_test, y_test)) < 0.03


@pytest.mark.parametrize("forest_cls", FORESTS, ids=_ids(FORESTS))
def test_oob_score_without_bootstrap_raises(forest_cls):
    X, y = _data(forest_cls, n_samples=50)
    with pytest.raises(ValueError, match="bootstrap"):
        forest_cls(n_estimators=3, bootstrap=False, oob_score=True).fit(X, y)


# ------------------------------------------------------------------------------ max_samples
@pytest.mark.parametrize("max_samples,n_draws", [(50, 50), (0.25, 100), (1.0, 400)])
@pytest.mark.parametrize("forest_cls", [RandomForestClassifier, RandomForestRegressor],
                         ids=["clf", "reg"])
def test_max_samples_sets_bootstrap_size(forest_cls, max_samples, n_draws):
    X, y = _data(forest_cls, n_samples=400)
    forest = forest_cls(n_estimators=6, max_samples=max_samples, random_state=0).fit(X, y)
    for tree, seed in zip(forest.estimators_, forest.estimator_seeds_, strict=True):
        counts = bootstrap_counts(int(seed), 400, n_draws)
        n_rows, weight = _root(tree)
        assert n_rows <= n_draws
        assert n_rows == np.count_nonzero(counts)  # the distinct rows drawn
        assert weight == n_draws  # every draw counts once


def test_max_samples_without_bootstrap_raises():
    X, y = _data(RandomForestClassifier, n_samples=400)
    with pytest.raises(ValueError, match="max_sample"):
        RandomForestClassifier(n_estimators=2, max_samples=10, bootstrap=False).fit(X, y)


@pytest.mark.parametrize("max_samples", [401, 1.5])
def test_max_samples_may_exceed_n_samples_as_in_scikit_learn(max_samples):
    X, y = _data(RandomForestClassifier, n_samples=400)
    forest = RandomForestClassifier(n_estimators=2, max_samples=max_samples,
                                    random_state=0).fit(X, y)
    n_draws = int(max_samples * 400) if isinstance(max_samples, float) else max_samples
    assert all(_root(tree)[1] == n_draws for tree in forest.estimators_)


# ------------------------------------------------------------------------------ class weights
def _imbalanced():
    X, y = datasets.make_classification(4000, n_features=10, n_informative=4,
                                        weights=[0.93, 0.07], flip_y=0.02, class_sep=0.6,
                                        random_state=1)
    return X[:2000], y[:2000], X[2000:], y[2000:]


def test_class_weight_improves_minority_recall():
    X, y, X_test, y_test = _imbalanced()
    recall = {}
    for class_weight in [None, "balanced", "balanced_subsample"]:
        forest = RandomForestClassifier(n_estimators=30, min_samples_leaf=10, random_state=0,
                                        class_weight=class_weight).fit(X, y)
        recall[class_weight] = recall_score(y_test, forest.predict(X_test))
    assert recall["balanced"] > recall[None] + 0.2, recall
    assert recall["balanced_subsample"] > recall[None] + 0.2, recall


def test_balanced_subsample_balances_every_bootstrap_sample():
    # Weights n_drawn / (n_classes_drawn * n_drawn_of_class): every tree's root has equal
    # weight per class, so its class proportions are uniform.
    X, y, _, _ = _imbalanced()
    forest = RandomForestClassifier(n_estimators=6, class_weight="balanced_subsample",
                                    random_state=0).fit(X[:300], y[:300])
    for tree in forest.estimators_:
        np.testing.assert_allclose(tree.tree_.value[0, 0], [0.5, 0.5], rtol=1e-12)
        assert tree.tree_.weighted_n_node_samples[0] == pytest.approx(300)


def test_balanced_class_weight_multiplies_bootstrap_counts():
    X, y, _, _ = _imbalanced()
    X, y = X[:300], y[:300]
    forest = RandomForestClassifier(n_estimators=6, class_weight="balanced",
                                    random_state=0).fit(X, y)
    balanced = compute_sample_weight("balanced", y)
    for tree, seed in zip(forest.estimators_, forest.estimator_seeds_, strict=True):
        weight = bootstrap_counts(int(seed), 300, 300) * balanced
        per_class = np.bincount(y, weights=weight, minlength=2)
        np.testing.assert_allclose(tree.tree_.value[0, 0], per_class / per_class.sum(),
                                   rtol=1e-12)


# ------------------------------------------------------------------------------ max_bins, NaN
@pytest.mark.parametrize("max_bins", [32, 255])
def test_histogram_mode_accuracy_close_to_exact(max_bins):
    X, y = datasets.make_classification(10_000, n_features=20, n_informative=8,
                                        random_state=0)
    scores = {}
    for bins in [None, max_bins]:
        forest = RandomForestClassifier(n_estimators=30, random_state=0, max_bins=bins,
                                        n_jobs=-1).fit(X[:5000], y[:5000])
        scores[bins] = accuracy_score(y[5000:], forest.predict(X[5000:]))
    assert abs(scores[max_bins] - scores[None]) <= 0.01, scores


@pytest.mark.parametrize("max_bins", [None, 32])
@pytest.mark.parametrize("forest_cls", FORESTS, ids=_ids(FORESTS))
def test_nan_trains_and_predicts(forest_cls, max_bins):
    # Feature 0 is NaN exactly when the target is "high": the forest must learn from NaN.
    rng = np.random.RandomState(0)
    n = 600
    X = rng.normal(size=(n, 4))
    high = rng.rand(n) < 0.4
    X[high, 0] = np.nan
    y = high.astype(np.int64) if is_classifier(forest_cls) else np.where(high, 10.0, 0.0)
    y = y + (0.0 if is_classifier(forest_cls) else rng.normal(scale=0.1, size=n))
    forest = forest_cls(n_estimators=10, random_state=0, max_bins=max_bins).fit(X, y)
    np.testing.assert_array_equal(forest.missing_values_in_feature_mask_,
                                  [True, False, False, False])
    X_test = rng.normal(size=(200, 4))
    X_test[:100, 0] = np.nan
    pred = forest.predict(X_test)
    assert np.isfinite(pred.astype(np.float64)).all()
    if is_classifier(forest_cls):
        assert (pred[:100] == 1).all() and (pred[100:] == 0).all()
        np.testing.assert_allclose(forest.predict_proba(X_test).sum(axis=1), 1.0)
    else:
        assert np.abs(pred[:100] - 10.0).max() < 1.0 and np.abs(pred[100:]).max() < 1.0
    # NaN in features that had none at training time also predicts.
    X_test[:, 1:] = np.nan
    assert np.isfinite(forest.predict(X_test).astype(np.float64)).all()


# ------------------------------------------------------------------------------ the trees
@pytest.mark.parametrize("forest_cls", FORESTS, ids=_ids(FORESTS))
def test_feature_importances(forest_cls):
    rng = np.random.RandomState(0)
    X = rng.normal(size=(500, 5))
    y = X[:, 2] > 0 if is_classifier(forest_cls) else 3 * X[:, 2] + 0.1 * rng.normal(size=500)
    forest = forest_cls(n_estimators=10, random_state=0, max_features=2).fit(X, y)
    importances = forest.feature_importances_
    assert importances.shape == (5,)
    assert importances.sum() == pytest.approx(1.0)
    assert importances.argmax() == 2
    assert importances[2] > 2 * np.delete(importances, 2).max()
    # Mean of the trees' normalised importances (as scikit-learn), renormalised.
    per_tree = np.mean([t.feature_importances_ for t in forest.estimators_], axis=0)
    np.testing.assert_allclose(importances, per_tree / per_tree.sum(), rtol=1e-12)


@pytest.mark.parametrize("forest_cls", FORESTS, ids=_ids(FORESTS))
def test_estimators_are_fitted_trees_and_average_to_the_forest(forest_cls):
    X, y = _data(forest_cls)
    forest = forest_cls(n_estimators=7, random_state=0).fit(X, y)
    tree_cls = DecisionTreeClassifier if is_classifier(forest) else DecisionTreeRegressor
    assert len(forest.estimators_) == 7
    outputs = []
    for tree, seed in zip(forest.estimators_, forest.estimator_seeds_, strict=True):
        assert type(tree) is tree_cls
        assert tree.random_state == seed
        assert tree.n_features_in_ == X.shape[1]
        assert tree.predict(X).shape == (X.shape[0],)
        if is_classifier(forest):
            np.testing.assert_array_equal(tree.classes_, forest.classes_)
            outputs.append(tree.predict_proba(X))
        else:
            outputs.append(tree.predict(X))
    np.testing.assert_allclose(_output(forest, X), np.mean(outputs, axis=0), rtol=1e-12,
                               atol=1e-12)
    assert forest.apply(X).shape == (X.shape[0], 7)


# 6 trees leave some rows without OOB trees: their NaN rows must survive the round trip too.
@pytest.mark.filterwarnings("ignore:Some inputs do not have OOB scores:UserWarning")
@pytest.mark.parametrize("max_bins", [None, 32])
@pytest.mark.parametrize("forest_cls", FORESTS, ids=_ids(FORESTS))
def test_save_load_round_trip(forest_cls, max_bins, tmp_path):
    X, y = _data(forest_cls, n_samples=200)
    if is_classifier(forest_cls):
        y = np.array(["ant", "bee", "cat"])[y]  # string labels survive too
    forest = forest_cls(n_estimators=6, random_state=0, max_bins=max_bins, bootstrap=True,
                        oob_score=True).fit(X, y)
    path = tmp_path / "forest.cfmodel"
    save_model(forest, path)
    loaded = load_model(path)
    assert type(loaded) is forest_cls
    assert loaded.get_params() == forest.get_params()
    np.testing.assert_array_equal(loaded.predict(X), forest.predict(X))
    np.testing.assert_array_equal(_output(loaded, X), _output(forest, X))
    np.testing.assert_array_equal(loaded.feature_importances_, forest.feature_importances_)
    np.testing.assert_array_equal(loaded.estimator_seeds_, forest.estimator_seeds_)
    assert loaded.oob_score_ == forest.oob_score_
    oob = "oob_decision_function_" if is_classifier(forest) else "oob_prediction_"
    assert np.isnan(getattr(forest, oob)).any()
    np.testing.assert_array_equal(getattr(loaded, oob), getattr(forest, oob))
    _assert_same_trees(loaded, forest)


def test_verbose_draws_a_progress_bar(capsys):
    X, y = _data(RandomForestClassifier, n_samples=100)
    RandomForestClassifier(n_estimators=7, random_state=0).fit(X, y)
    assert capsys.readouterr().err == ""
    RandomForestClassifier(n_estimators=7, random_state=0, verbose=1).fit(X, y)
    err = capsys.readouterr().err
    assert "RandomForestClassifier" in err
    assert "7/7" in err and err.endswith("\n")


# ------------------------------------------------------------------------------ parity
# Parity with scikit-learn: the issue asks for |ours - sklearn| <= 1 point (accuracy percent,
# or 0.01 R²) on the mean 5-fold score. One seed's 5-fold mean moves by about a point from
# seed to seed on the small datasets (diabetes, ExtraTrees, 30 trees: sd 0.012 R² over 12
# seeds for both libraries; wine, ExtraTrees, 50 trees: 5 seeds gave -1.0 point, 30 seeds
# +0.02 ± 0.18), so the mean is taken over several random_states, more where the data are
# small (cheap) and noisy. benchmarks/parity.py prints the full table.
PARITY_DATASETS = {  # name: (loader, number of random_states averaged)
    "breast_cancer": (lambda: datasets.load_breast_cancer(return_X_y=True), 5),
    "wine": (lambda: datasets.load_wine(return_X_y=True), 10),
    "iris": (lambda: datasets.load_iris(return_X_y=True), 10),
    "digits": (lambda: datasets.load_digits(return_X_y=True), 1),
    "make_classification": (lambda: datasets.make_classification(
        2000, n_features=20, n_informative=8, random_state=0), 2),
    "diabetes": (lambda: datasets.load_diabetes(return_X_y=True), 8),
    "make_regression": (lambda: datasets.make_regression(
        1000, n_features=20, n_informative=10, noise=10.0, random_state=0), 2),
    "friedman1": (lambda: datasets.make_friedman1(1000, noise=1.0, random_state=0), 2),
}
PARITY_CASES = [
    (name, forest_cls)
    for name in PARITY_DATASETS
    for forest_cls in (REGRESSORS if name in ("diabetes", "make_regression", "friedman1")
                       else CLASSIFIERS)
]


@pytest.mark.parametrize("dataset,forest_cls", PARITY_CASES,
                         ids=[f"{d}-{c.__name__}" for d, c in PARITY_CASES])
def test_score_parity_with_scikit_learn(dataset, forest_cls):
    load, n_seeds = PARITY_DATASETS[dataset]
    X, y = load()
    if is_classifier(forest_cls):
        cv = StratifiedKFold(5, shuffle=True, random_state=0)
    else:
        cv = KFold(5, shuffle=True, random_state=0)
    sk_cls = getattr(sk_ensemble, forest_cls.__name__)
    ours, theirs = [], []
    for seed in range(n_seeds):
        ours.append(cross_val_score(forest_cls(n_estimators=30, random_state=seed), X, y,
                                    cv=cv).mean())
        theirs.append(cross_val_score(sk_cls(n_estimators=30, random_state=seed), X, y,
                                      cv=cv).mean())
    difference = np.mean(ours) - np.mean(theirs)
    assert abs(difference) <= 0.01, (np.mean(ours), np.mean(theirs))


@pytest.mark.parametrize("forest_cls", [RandomForestClassifier, ExtraTreesRegressor])
def test_estimators_samples_are_the_bootstrap_draws(forest_cls):
    X, y = _data(forest_cls, n_samples=200)
    forest = forest_cls(n_estimators=3, max_features=0.5, bootstrap=True, max_samples=0.5,
                        random_state=0).fit(X, y)
    samples = forest.estimators_samples_
    assert len(forest) == 3 and list(forest) == forest.estimators_
    for tree, rows, seed in zip(forest, samples, forest.estimator_seeds_, strict=True):
        assert rows.dtype == np.int32 and rows.shape == (100,)
        counts = bootstrap_counts(int(seed), 200, 100)
        np.testing.assert_array_equal(np.bincount(rows, minlength=200), counts)
        assert _root(tree) == (np.count_nonzero(counts), 100.0)


@settings(max_examples=30, deadline=None)
@given(seeds=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=4))
def test_a_seeded_stream_is_the_stream_of_a_new_random_state(seeds):
    """``seeded_stream`` reseeds one generator per thread instead of building one per tree
    or round: the same draws as ``np.random.RandomState(seed)``, seed after seed, on each
    thread independently."""
    from concurrent.futures import ThreadPoolExecutor

    def draws(seed):
        stream = seeded_stream(seed)
        return (stream.randint(0, 1000, 50), stream.permutation(40), stream.random_sample(3))

    def expected(seed):
        fresh = np.random.RandomState(seed)
        return (fresh.randint(0, 1000, 50), fresh.permutation(40), fresh.random_sample(3))

    with ThreadPoolExecutor(2) as pool:
        for got, seed in zip(pool.map(draws, seeds * 3), seeds * 3, strict=True):
            for a, b in zip(got, expected(seed), strict=True):
                np.testing.assert_array_equal(a, b)
