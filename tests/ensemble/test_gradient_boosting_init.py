"""Gradient boosting with ``init=<estimator>``: against scikit-learn and against the
constant start it generalises."""

import numpy as np
import pytest
import sklearn.ensemble as sk_ensemble
from numpy.testing import assert_allclose
from sklearn.datasets import make_classification, make_regression
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline

from cipherforest import GradientBoostingClassifier, GradientBoostingRegressor


class _NoWeights(LinearRegression):
    def fit(self, X, y):
        return super().fit(X, y)


def test_dummy_init_equals_the_default_start():
    # DummyRegressor(mean) / DummyClassifier(prior) predict the constants the default uses.
    X, y = make_regression(n_samples=120, random_state=0)
    assert_allclose(GradientBoostingRegressor(init=DummyRegressor(), n_estimators=5).fit(X, y)
                    .predict(X), GradientBoostingRegressor(n_estimators=5).fit(X, y).predict(X))
    for n_classes in (2, 3):
        X, y = make_classification(n_samples=150, n_classes=n_classes, n_informative=4,
                                   random_state=0)
        with_init = GradientBoostingClassifier(init=DummyClassifier(strategy="prior"),
                                               n_estimators=5, random_state=0).fit(X, y)
        default = GradientBoostingClassifier(n_estimators=5, random_state=0).fit(X, y)
        assert_allclose(with_init.predict_proba(X), default.predict_proba(X), atol=1e-12)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_init_matches_scikit_learn(n_classes):
    X, y = make_classification(n_samples=150, n_classes=n_classes, n_informative=4,
                               random_state=0)
    params = {"init": LogisticRegression(), "n_estimators": 5, "max_depth": 2,
              "random_state": 0}
    ours = GradientBoostingClassifier(**params).fit(X, y)
    ref = sk_ensemble.GradientBoostingClassifier(**params).fit(X, y)
    # scikit-learn's trees compute in float32: agreement to ~1e-6, not bit for bit.
    assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=1e-4)
    stages = list(ours.staged_decision_function(X))
    assert_allclose(stages[-1].reshape(ours.decision_function(X).shape), ours.decision_function(X))


def test_regressor_init_starts_from_its_predictions_and_checks_weights():
    X, y = make_regression(n_samples=120, noise=5.0, random_state=0)
    model = GradientBoostingRegressor(init=LinearRegression(), n_estimators=1,
                                      learning_rate=1e-12).fit(X, y)
    assert_allclose(model.predict(X), model.init_.predict(X), rtol=1e-9)
    GradientBoostingRegressor(init=_NoWeights(), n_estimators=2).fit(X, y)
    with pytest.raises(ValueError, match="_NoWeights does not support sample weights"):
        GradientBoostingRegressor(init=_NoWeights(), n_estimators=2).fit(
            X, y, sample_weight=np.ones(120))
    with pytest.raises(ValueError, match="Pipeline does not support sample weights"):
        GradientBoostingRegressor(init=make_pipeline(LinearRegression()), n_estimators=2).fit(
            X, y, sample_weight=np.ones(120))
