"""AdaBoost: the seed's formulas round by round, SAMME / AdaBoost.R2, and scikit-learn parity.

Oracles: the seed's AdaBoost (trees-and-ensembles, "AdaBoost") replayed from the weights each
learner actually received (a recording weak learner stores them); scikit-learn's
``AdaBoostClassifier`` run on the very same weak learners (identical models, up to float
rounding); scikit-learn's AdaBoost with its own trees for cross-validated accuracy / R².
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.datasets import (
    load_breast_cancer,
    load_diabetes,
    load_digits,
    load_wine,
    make_classification,
)
from sklearn.ensemble import AdaBoostClassifier as SkAdaBoostClassifier
from sklearn.ensemble import AdaBoostRegressor as SkAdaBoostRegressor
from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score
from sklearn.tree import DecisionTreeClassifier as SkDecisionTreeClassifier
from sklearn.tree import DecisionTreeRegressor as SkDecisionTreeRegressor
from sklearn.utils.estimator_checks import parametrize_with_checks

from cipherforest import DecisionTreeClassifier, DecisionTreeRegressor
from cipherforest.ensemble._weight_boosting import (
    PERFECT_ERROR,
    AdaBoostClassifier,
    AdaBoostRegressor,
    _PreparedTrees,
    weighted_median,
)
from cipherforest.io import load_model, save_model


@pytest.fixture(scope="module")
def breast_cancer():
    return load_breast_cancer(return_X_y=True)


@pytest.fixture(scope="module")
def wine():
    return load_wine(return_X_y=True)


class RecordingStump(ClassifierMixin, BaseEstimator):
    """A stump that keeps the ``sample_weight`` it was fitted on (``sample_weight_``)."""

    def fit(self, X, y, sample_weight=None):
        self.sample_weight_ = np.array(sample_weight, dtype=np.float64)
        self.tree_ = DecisionTreeClassifier(max_depth=1).fit(X, y, sample_weight=sample_weight)
        self.classes_ = self.tree_.classes_
        return self

    def predict(self, X):
        return self.tree_.predict(X)


class MinorityThenStump(ClassifierMixin, BaseEstimator):
    """A stump on uniform weights (round 1); afterwards it predicts the class of smallest
    total weight everywhere, whose weighted error is at least 1/2."""

    def fit(self, X, y, sample_weight=None):
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight)
        self.classes_ = np.unique(y)
        if np.allclose(w, w[0]) and self.first_round_is_stump:
            self.tree_ = DecisionTreeClassifier(max_depth=1).fit(X, y)
            self.constant_ = None
        else:
            mass = np.array([w[y == c].sum() for c in self.classes_])
            self.constant_ = self.classes_[np.argmin(mass)]
        return self

    def __init__(self, first_round_is_stump=True):
        self.first_round_is_stump = first_round_is_stump

    def predict(self, X):
        if self.constant_ is None:
            return self.tree_.predict(X)
        return np.full(np.asarray(X).shape[0], self.constant_)


def seed_replay(model, X, y):
    """Replay the seed's binary AdaBoost from the recorded weights of every round.

    Returns per round: weights received (normalised), eps, alpha, Z and the seed's next
    weights ``w exp(-alpha y h) / Z``.
    """
    y_pm = np.where(y == model.classes_[1], 1.0, -1.0)
    rounds = []
    for est in model.estimators_:
        w = est.sample_weight_
        h = np.where(est.predict(X) == model.classes_[1], 1.0, -1.0)
        eps = np.sum(w * (h != y_pm)) / np.sum(w)
        alpha = 0.5 * np.log((1 - eps) / eps)
        unnormalised = w * np.exp(-alpha * y_pm * h)
        z = unnormalised.sum()
        rounds.append((w, eps, alpha, z, unnormalised / z))
    return rounds


# ------------------------------------------------------------------------- the seed's facts
def test_normaliser_equals_two_sqrt_eps_one_minus_eps(breast_cancer):
    """Seed: for the optimal step, Z_t = 2 sqrt(eps_t (1 - eps_t)) at every round."""
    X, y = breast_cancer
    model = AdaBoostClassifier(n_estimators=40).fit(X, y)
    assert len(model) == 40
    eps = model.estimator_errors_
    np.testing.assert_allclose(model.normalizers_, 2 * np.sqrt(eps * (1 - eps)),
                               rtol=0, atol=1e-12)

    # The same fact from an independent replay of the recorded weights.
    recorded = AdaBoostClassifier(RecordingStump(), n_estimators=40).fit(X, y)
    for w, eps_t, _, z, _ in seed_replay(recorded, X, y):
        assert w.sum() == pytest.approx(1.0, abs=1e-12)
        assert abs(z - 2 * np.sqrt(eps_t * (1 - eps_t))) < 1e-12


def test_rounds_follow_the_seed_formulas(breast_cancer):
    """eps, alpha = 1/2 ln((1-eps)/eps), Z and the weight update, replayed round by round."""
    X, y = breast_cancer
    model = AdaBoostClassifier(RecordingStump(), n_estimators=25).fit(X, y)
    rounds = seed_replay(model, X, y)
    for t, (_, eps, alpha, z, w_next) in enumerate(rounds):
        assert model.estimator_errors_[t] == pytest.approx(eps, rel=1e-12)
        assert model.estimator_weights_[t] == pytest.approx(alpha, rel=1e-12)
        assert model.normalizers_[t] == pytest.approx(z, rel=1e-12)
        if t + 1 < len(rounds):  # the next learner received exactly the seed's new weights
            np.testing.assert_allclose(rounds[t + 1][0], w_next, rtol=1e-10, atol=1e-15)
    eps = model.estimator_errors_
    np.testing.assert_allclose(model.estimator_weights_, 0.5 * np.log((1 - eps) / eps),
                               rtol=1e-14)


def test_learning_rate_scales_alpha(breast_cancer):
    X, y = breast_cancer
    model = AdaBoostClassifier(n_estimators=10, learning_rate=0.3).fit(X, y)
    eps = model.estimator_errors_
    np.testing.assert_allclose(model.estimator_weights_, 0.3 * 0.5 * np.log((1 - eps) / eps),
                               rtol=1e-14)


def test_samme_alpha_and_update(wine):
    X, y = wine
    model = AdaBoostClassifier(RecordingStump(), n_estimators=15).fit(X, y)
    k = 3
    eps = model.estimator_errors_
    np.testing.assert_allclose(model.estimator_weights_,
                               np.log((1 - eps) / eps) + np.log(k - 1), rtol=1e-14)
    for t in range(len(model) - 1):
        est, nxt = model.estimators_[t], model.estimators_[t + 1]
        w = est.sample_weight_
        unnormalised = w * np.exp(model.estimator_weights_[t] * (est.predict(X) != y))
        assert model.normalizers_[t] == pytest.approx(unnormalised.sum(), rel=1e-12)
        np.testing.assert_allclose(nxt.sample_weight_, unnormalised / unnormalised.sum(),
                                   rtol=1e-10, atol=1e-15)


def test_perfect_learner_stops_boosting():
    """eps = 0: the learner is kept and boosting stops (a single estimator)."""
    rng = np.random.RandomState(0)
    X = rng.uniform(-1, 1, size=(200, 3))
    y = np.where(X[:, 1] > 0.1, "pos", "neg")
    model = AdaBoostClassifier(n_estimators=50).fit(X, y)
    assert len(model.estimators_) == 1
    assert model.estimator_errors_.tolist() == [0.0]
    assert model.normalizers_.tolist() == [0.0]  # the limit of 2 sqrt(eps (1 - eps))
    eps = PERFECT_ERROR
    assert model.estimator_weights_[0] == pytest.approx(0.5 * np.log((1 - eps) / eps))
    assert (model.predict(X) == y).all()
    np.testing.assert_allclose(model.predict_proba(X).sum(axis=1), 1.0)


def test_learner_without_edge_is_not_added(breast_cancer):
    """eps >= 1/2 after a useful first round: the learner is dropped and boosting stops."""
    X, y = breast_cancer
    model = AdaBoostClassifier(MinorityThenStump(), n_estimators=10).fit(X, y)
    assert len(model.estimators_) == 1
    assert model.estimators_[0].constant_ is None  # the stump of round 1
    assert len(model.estimator_weights_) == len(model.estimator_errors_) == 1
    assert len(model.normalizers_) == 1
    np.testing.assert_array_equal(model.predict(X), model.estimators_[0].predict(X))


@pytest.mark.parametrize("n_classes", [2, 3])
def test_first_learner_without_edge_raises(n_classes):
    X, y = make_classification(120, 4, n_informative=3, n_redundant=0, n_classes=n_classes,
                               random_state=0)
    with pytest.raises(ValueError, match="worse than random"):
        AdaBoostClassifier(MinorityThenStump(first_round_is_stump=False)).fit(X, y)


def test_weights_stay_normalised(breast_cancer):
    X, y = breast_cancer
    sample_weight = np.random.RandomState(0).uniform(0.5, 3.0, len(y))
    model = AdaBoostClassifier(RecordingStump(), n_estimators=30).fit(X, y, sample_weight)
    for est in model.estimators_:
        assert est.sample_weight_.sum() == pytest.approx(1.0, abs=1e-12)
        assert (est.sample_weight_ > 0).all()
    np.testing.assert_allclose(model.estimators_[0].sample_weight_,
                               sample_weight / sample_weight.sum(), rtol=1e-12)


def test_decision_function_is_the_weighted_vote(breast_cancer):
    X, y = breast_cancer
    model = AdaBoostClassifier(n_estimators=12).fit(X, y)
    votes = np.array([np.where(e.predict(X) == model.classes_[1], 1.0, -1.0)
                      for e in model.estimators_])
    H = model.estimator_weights_ @ votes
    np.testing.assert_allclose(model.decision_function(X),
                               2 * H / model.estimator_weights_.sum(), rtol=1e-12)
    np.testing.assert_array_equal(model.predict(X), model.classes_[(H > 0).astype(int)])
    p1 = 1 / (1 + np.exp(-2 * H / model.estimator_weights_.sum()))
    np.testing.assert_allclose(model.predict_proba(X)[:, 1], p1, rtol=1e-12)


# ------------------------------------------------------------------------- scikit-learn parity
@pytest.mark.parametrize(("load", "learning_rate"), [
    (load_breast_cancer, 1.0), (load_breast_cancer, 0.5), (load_wine, 1.0), (load_digits, 0.8),
])
def test_same_learners_give_sklearn_model(load, learning_rate):
    """scikit-learn's AdaBoost on our stumps builds the same model (its binary alpha is twice
    the seed's); decision functions, probabilities and predictions agree."""
    X, y = load(return_X_y=True)
    ours = AdaBoostClassifier(n_estimators=20, learning_rate=learning_rate).fit(X, y)
    sk = SkAdaBoostClassifier(DecisionTreeClassifier(max_depth=1), n_estimators=20,
                              learning_rate=learning_rate).fit(X, y)
    factor = 2.0 if ours.n_classes_ == 2 else 1.0
    np.testing.assert_allclose(factor * ours.estimator_weights_, sk.estimator_weights_,
                               rtol=1e-10)
    np.testing.assert_allclose(ours.estimator_errors_, sk.estimator_errors_, rtol=1e-10)
    np.testing.assert_allclose(ours.predict_proba(X), sk.predict_proba(X), atol=1e-12)
    np.testing.assert_array_equal(ours.predict(X), sk.predict(X))
    np.testing.assert_allclose(
        ours.decision_function(X), sk.decision_function(X), atol=1e-12)
    np.testing.assert_allclose(ours.feature_importances_, sk.feature_importances_, atol=1e-12)


@pytest.mark.parametrize("load", [load_breast_cancer, load_wine, load_digits])
def test_cross_validated_accuracy_matches_sklearn(load):
    X, y = load(return_X_y=True)
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    ours = cross_val_score(AdaBoostClassifier(n_estimators=30, random_state=0), X, y, cv=cv)
    sk = cross_val_score(SkAdaBoostClassifier(SkDecisionTreeClassifier(max_depth=1),
                                              n_estimators=30, random_state=0), X, y, cv=cv)
    assert abs(ours.mean() - sk.mean()) <= 0.01


def test_cross_validated_r2_matches_sklearn():
    """scikit-learn fits R2's learners on random weighted bootstraps, we on the weights:
    compare means over three shuffles so one lucky bootstrap does not decide."""
    X, y = load_diabetes(return_X_y=True)
    ours, sk = [], []
    for seed in range(3):
        cv = KFold(5, shuffle=True, random_state=seed)
        ours.append(cross_val_score(AdaBoostRegressor(random_state=seed), X, y, cv=cv).mean())
        sk.append(cross_val_score(SkAdaBoostRegressor(SkDecisionTreeRegressor(max_depth=3),
                                                      random_state=seed), X, y, cv=cv).mean())
    assert abs(np.mean(ours) - np.mean(sk)) <= 0.02


# ------------------------------------------------------------------------- regression
def test_r2_rounds_follow_drucker():
    X, y = load_diabetes(return_X_y=True)
    for loss in ("linear", "square", "exponential"):
        model = AdaBoostRegressor(n_estimators=8, loss=loss, learning_rate=0.7).fit(X, y)
        w = np.full(len(y), 1.0 / len(y))
        for t, est in enumerate(model.estimators_):
            scaled = np.abs(est.predict(X) - y)
            scaled /= scaled.max()
            L = {"linear": scaled, "square": scaled**2,
                 "exponential": 1 - np.exp(-scaled)}[loss]
            eps = np.sum(w * L)
            beta = eps / (1 - eps)
            assert model.estimator_errors_[t] == pytest.approx(eps, rel=1e-10)
            assert model.estimator_weights_[t] == pytest.approx(0.7 * np.log(1 / beta),
                                                                rel=1e-10)
            unnormalised = w * beta ** (0.7 * (1 - L))
            assert model.normalizers_[t] == pytest.approx(unnormalised.sum(), rel=1e-10)
            w = unnormalised / unnormalised.sum()


def test_regressor_predicts_weighted_median():
    X, y = load_diabetes(return_X_y=True)
    model = AdaBoostRegressor(n_estimators=9, random_state=0).fit(X, y)
    preds = np.column_stack([e.predict(X[:40]) for e in model.estimators_])
    alpha = model.estimator_weights_
    expected = []
    for row in preds:
        order = np.argsort(row, kind="stable")
        cdf = np.cumsum(alpha[order])
        expected.append(row[order[np.searchsorted(cdf, 0.5 * cdf[-1] * (1 - 1e-15))]])
    np.testing.assert_allclose(model.predict(X[:40]), expected)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6).flatmap(lambda k: st.tuples(
    st.lists(st.lists(st.integers(-5, 5), min_size=k, max_size=k), min_size=1, max_size=5),
    st.lists(st.floats(0.01, 10), min_size=k, max_size=k))))
def test_weighted_median_definition(case):
    """Smallest prediction whose cumulative weight reaches half the total (brute force)."""
    rows, weights = case
    preds, weights = np.array(rows, dtype=float), np.array(weights)
    out = weighted_median(preds, weights)
    half = 0.5 * weights.sum()
    for row, value in zip(preds, out, strict=True):
        masses = [weights[row <= v].sum() for v in np.sort(row)]
        if any(abs(m - half) <= 1e-9 * half for m in masses):
            continue  # exactly half: which side wins is decided by float rounding
        candidates = [v for v, m in zip(np.sort(row), masses, strict=True) if m >= half]
        assert value == candidates[0]


# ------------------------------------------------------------------------- the tree fast path
@pytest.mark.parametrize("template", [
    DecisionTreeClassifier(max_depth=2),
    DecisionTreeClassifier(max_depth=3, max_features=2, class_weight="balanced",
                           ccp_alpha=0.01, criterion="entropy"),
    DecisionTreeClassifier(splitter="random", min_samples_leaf=3),
    DecisionTreeRegressor(max_depth=3),
    DecisionTreeRegressor(max_features=0.5, ccp_alpha=1.0, max_leaf_nodes=6),
])
def test_prepared_trees_equal_plain_fits(template):
    """Growing on the matrix presorted once gives the estimator ``fit`` would give."""
    rng = np.random.RandomState(1)
    X = rng.normal(size=(150, 5))
    X[rng.rand(*X.shape) < 0.05] = np.nan
    is_clf = isinstance(template, DecisionTreeClassifier)
    y = rng.randint(0, 3, 150) if is_clf else X[:, 0] * 3 + rng.normal(size=150)
    y = np.where(np.isnan(y), 0.0, y)
    classes = np.unique(y) if is_clf else None
    never = rng.rand(150) < 0.1  # rows of zero initial weight, left out of the presorting
    prepared = _PreparedTrees(template, X, y, classes, seed=0, rows=np.flatnonzero(~never))
    for round_seed in range(3):
        w = rng.uniform(0, 1, 150) * (rng.rand(150) > 0.2) * ~never
        fast = prepared.fit(w, np.random.RandomState(round_seed))
        plain = clone(template).set_params(random_state=fast.random_state).fit(X, y, w)
        assert set(vars(fast)) == set(vars(plain))
        for name, value in vars(plain).items():
            if name == "tree_":
                for field, array in value.arrays().items():
                    np.testing.assert_array_equal(getattr(fast.tree_, field), array)
            else:
                np.testing.assert_array_equal(getattr(fast, name), value)


# ------------------------------------------------------------------------- API
@pytest.mark.parametrize("kind", ["binary", "multiclass", "regression"])
def test_staged_methods_end_at_the_full_model(kind, breast_cancer, wine):
    if kind == "regression":
        X, y = load_diabetes(return_X_y=True)
        model = AdaBoostRegressor(n_estimators=10, random_state=0).fit(X, y)
    else:
        X, y = breast_cancer if kind == "binary" else wine
        model = AdaBoostClassifier(n_estimators=10, random_state=0).fit(X, y)
    staged = list(model.staged_predict(X))
    assert len(staged) == len(model)
    np.testing.assert_array_equal(staged[-1], model.predict(X))
    scores = list(model.staged_score(X, y))
    assert scores[-1] == pytest.approx(model.score(X, y))
    if kind != "regression":
        decisions = list(model.staged_decision_function(X))
        np.testing.assert_allclose(decisions[-1], model.decision_function(X))
        probas = list(model.staged_predict_proba(X))
        np.testing.assert_allclose(probas[-1], model.predict_proba(X))
        assert scores[-1] >= scores[0]


def test_shapes_binary_and_multiclass(breast_cancer, wine):
    for (X, y), k in ((breast_cancer, 2), (wine, 3)):
        model = AdaBoostClassifier(n_estimators=5).fit(X, y)
        decision = model.decision_function(X)
        assert decision.shape == ((len(y),) if k == 2 else (len(y), k))
        proba = model.predict_proba(X)
        assert proba.shape == (len(y), k)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        np.testing.assert_array_equal(model.classes_.take(proba.argmax(axis=1)),
                                      model.predict(X))


def test_feature_importances_are_alpha_weighted(wine):
    X, y = wine
    model = AdaBoostClassifier(n_estimators=10).fit(X, y)
    expected = sum(a * e.feature_importances_
                   for a, e in zip(model.estimator_weights_, model.estimators_, strict=True))
    np.testing.assert_allclose(model.feature_importances_,
                               expected / model.estimator_weights_.sum())
    assert model.feature_importances_.sum() == pytest.approx(1.0)


class NoWeightStump(ClassifierMixin, BaseEstimator):
    """A stump whose ``fit`` takes no ``sample_weight``; remembers how many distinct rows it
    saw."""

    def __init__(self, random_state=None):
        self.random_state = random_state

    def fit(self, X, y):
        self.n_distinct_rows_ = len(np.unique(X, axis=0))
        self.tree_ = DecisionTreeClassifier(max_depth=1, random_state=self.random_state)
        self.tree_.fit(X, y)
        self.classes_ = self.tree_.classes_
        return self

    def predict(self, X):
        return self.tree_.predict(X)


def test_estimator_without_sample_weight_is_fitted_on_weighted_bootstraps(breast_cancer):
    X, y = breast_cancer
    a = AdaBoostClassifier(NoWeightStump(), n_estimators=10, random_state=0).fit(X, y)
    b = AdaBoostClassifier(NoWeightStump(), n_estimators=10, random_state=0).fit(X, y)
    np.testing.assert_array_equal(a.estimator_weights_, b.estimator_weights_)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    # A bootstrap of n rows holds about (1 - 1/e) n distinct rows.
    assert all(e.n_distinct_rows_ < 0.8 * len(y) for e in a.estimators_)
    assert len({e.random_state for e in a.estimators_}) == len(a)
    assert a.score(X, y) > 0.9


def test_verbose_draws_a_progress_bar(breast_cancer, capsys):
    X, y = breast_cancer
    AdaBoostClassifier(n_estimators=3, verbose=1).fit(X, y)
    assert "AdaBoostClassifier" in capsys.readouterr().err


@pytest.mark.parametrize("make", [
    lambda: (AdaBoostClassifier(n_estimators=8, random_state=0), *load_breast_cancer(
        return_X_y=True)),
    lambda: (AdaBoostClassifier(DecisionTreeClassifier(max_depth=2, max_bins=32),
                                n_estimators=8, random_state=0), *load_wine(return_X_y=True)),
    lambda: (AdaBoostRegressor(n_estimators=8, loss="square", random_state=0),
             *load_diabetes(return_X_y=True)),
])
def test_save_load_round_trip(make, tmp_path):
    model, X, y = make()
    model.fit(X, y)
    path = tmp_path / "ada.cfmodel"
    save_model(model, path)
    loaded = load_model(path)
    assert type(loaded) is type(model)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    if hasattr(model, "predict_proba"):
        np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(loaded.normalizers_, model.normalizers_)


def _expected_failed_checks(estimator):
    if isinstance(estimator, AdaBoostRegressor):
        reason = ("AdaBoost.R2 draws a weighted bootstrap every round, so a row of weight 2 and "
                  "two copies of it get different draws (scikit-learn xfails this for its "
                  "AdaBoostRegressor too)")
        return {"check_sample_weight_equivalence_on_dense_data": reason,
                "check_sample_weight_equivalence_on_sparse_data": reason}
    if getattr(estimator.estimator, "max_bins", None) is not None:
        reason = ("histogram subtraction rounds differently for a row of weight 2 than for two "
                  "rows, which flips exact ties between splits in later rounds (scikit-learn "
                  "xfails this for HistGradientBoosting too)")
        return {"check_sample_weight_equivalence_on_dense_data": reason,
                "check_sample_weight_equivalence_on_sparse_data": reason}
    return {}


@parametrize_with_checks([
    AdaBoostClassifier(n_estimators=5, random_state=0),
    AdaBoostRegressor(n_estimators=5, random_state=0),
    AdaBoostClassifier(DecisionTreeClassifier(max_depth=2, max_bins=16), n_estimators=5,
                       random_state=0),
], expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


class _NoSampleWeightRegressor(RegressorMixin, BaseEstimator):
    def fit(self, X, y):
        self.mean_ = float(np.mean(y))
        return self

    def predict(self, X):
        return np.full(np.asarray(X).shape[0], self.mean_)


def test_regressor_keeps_a_first_learner_without_edge():
    """Like scikit-learn, a first learner with eps >= 1/2 is kept alone (the ensemble must
    predict) and boosting stops."""
    X = np.arange(10, dtype=float)[:, None]
    y = np.r_[np.zeros(5), np.ones(5)]  # any mean m in [0, 1] has eps = 0.5 / max(m, 1-m)
    model = AdaBoostRegressor(_NoSampleWeightRegressor(), n_estimators=5,
                              random_state=0).fit(X, y)
    assert len(model) == 1 and model.estimator_errors_[0] >= 0.5
    np.testing.assert_allclose(model.predict(X), model.estimators_[0].predict(X))


def test_sklearn_learners_through_the_generic_path(wine):
    """Any estimator with ``sample_weight`` works; with scikit-learn's own stumps the model
    is scikit-learn's."""
    X, y = wine
    ours = AdaBoostClassifier(SkDecisionTreeClassifier(max_depth=1), n_estimators=15,
                              random_state=0).fit(X, y)
    sk = SkAdaBoostClassifier(SkDecisionTreeClassifier(max_depth=1), n_estimators=15,
                              random_state=0).fit(X, y)
    np.testing.assert_allclose(ours.estimator_weights_, sk.estimator_weights_, rtol=1e-10)
    np.testing.assert_allclose(ours.predict_proba(X), sk.predict_proba(X), atol=1e-12)


@pytest.mark.parametrize("model", [AdaBoostClassifier(n_estimators=10, random_state=0),
                                   AdaBoostRegressor(n_estimators=10, random_state=0)])
def test_missing_values_are_handled_by_the_trees(model, breast_cancer):
    X, y = breast_cancer
    X = X.copy()
    X[np.random.RandomState(0).rand(*X.shape) < 0.1] = np.nan
    model.fit(X, y)
    assert np.isfinite(model.predict(X).astype(float)).all()
    assert model.score(X, y) > 0.6


class TreeThenOffset(RegressorMixin, BaseEstimator):
    """A depth-3 tree in round 1, afterwards a constant far above every target (average loss
    close to 1). Rounds are counted on the class: every round fits a fresh clone."""

    fits = 0

    def fit(self, X, y, sample_weight=None):
        type(self).fits += 1
        self.tree_ = (DecisionTreeRegressor(max_depth=3).fit(X, y, sample_weight)
                      if type(self).fits == 1 else None)
        self.offset_ = float(np.max(y) + 10 * np.ptp(y))
        return self

    def predict(self, X):
        if self.tree_ is not None:
            return self.tree_.predict(X)
        return np.full(np.asarray(X).shape[0], self.offset_)


def test_regressor_learner_without_edge_is_not_added():
    X, y = load_diabetes(return_X_y=True)
    TreeThenOffset.fits = 0
    model = AdaBoostRegressor(TreeThenOffset(), n_estimators=6).fit(X, y)
    assert len(model) == 1 and model.estimators_[0].tree_ is not None
    np.testing.assert_allclose(model.predict(X), model.estimators_[0].predict(X))


def test_nd_X_reaches_base_estimators_that_take_it():
    # A 3-D X goes unchanged to the base estimator (scikit-learn's allow_nd): a base that
    # flattens it boosts exactly as on the flattened 2-D X.
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    rng = np.random.RandomState(0)
    X = rng.randn(60, 3, 2)
    y = (X[:, 0, 0] + X[:, 1, 1] > 0).astype(int)
    flatten = FunctionTransformer(lambda A: A.reshape(A.shape[0], -1))
    base = make_pipeline(flatten, DecisionTreeClassifier(max_depth=1))
    nd = AdaBoostClassifier(base, n_estimators=5, random_state=0).fit(X, y)
    flat = AdaBoostClassifier(base, n_estimators=5, random_state=0).fit(X.reshape(60, -1), y)
    assert len(nd) == len(flat) > 1
    np.testing.assert_allclose(nd.predict_proba(X), flat.predict_proba(X.reshape(60, -1)))
    with pytest.raises(ValueError, match="dim 3"):
        AdaBoostClassifier(DecisionTreeClassifier(max_depth=1), n_estimators=2).fit(X, y)
