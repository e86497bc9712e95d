"""AdaBoost: discrete AdaBoost / SAMME for classification and AdaBoost.R2 for regression.

Binary classification follows the seed (trees-and-ensembles, "AdaBoost") literally. Labels
and predictions are coded ``y, h in {-1, +1}``; with weights ``w`` that sum to one, round
``t`` fits ``h_t`` on ``w`` and computes::

    eps_t   = sum_i w_i [h_t(x_i) != y_i] / sum_i w_i
    alpha_t = learning_rate * 1/2 ln((1 - eps_t) / eps_t)
    Z_t     = sum_i w_i exp(-alpha_t y_i h_t(x_i))        (= 2 sqrt(eps_t (1 - eps_t)) at rate 1)
    w_i    <- w_i exp(-alpha_t y_i h_t(x_i)) / Z_t

and the model is ``H(x) = sum_t alpha_t h_t(x)``, predicting ``sign(H)``. A learner with
``eps_t = 0`` classifies every example of positive weight, so boosting stops after keeping
it; a learner with ``eps_t >= 1/2`` has no edge and is not added (boosting stops).

With ``K > 2`` classes the same loop runs SAMME (Zhu, Zou, Rosset & Hastie, 2009), as
scikit-learn does: ``alpha_t = learning_rate * (ln((1 - eps_t) / eps_t) + ln(K - 1))``, the
update ``w_i <- w_i exp(alpha_t [h_t(x_i) != y_i]) / Z_t`` and the stop ``eps_t >= 1 - 1/K``.
The decision function codes a vote for class ``k`` as ``1`` and for any other class as
``-1/(K-1)``: ``F_k(x) = sum_t alpha_t c_{t,k}(x)``.

Regression is AdaBoost.R2 (Drucker, 1997) with scikit-learn's conventions: per-sample losses
``L_i = |h_t(x_i) - y_i| / max_j |h_t(x_j) - y_j|`` (then squared or ``1 - exp(-L)``),
``eps_t = sum_i w_i L_i``, ``beta_t = eps_t / (1 - eps_t)``, ``alpha_t = learning_rate *
ln(1 / beta_t)``, ``w_i <- w_i beta_t^(learning_rate (1 - L_i)) / Z_t``, and the prediction is
the ``alpha``-weighted median of the learners' predictions.

Sub-estimators that accept ``sample_weight`` are fitted on the weights (no resampling);
others on a weighted bootstrap of the rows. When the base estimator is one of our own
decision trees, the feature matrix is presorted (or binned) once per fit and every round
grows its tree on it (``BaseDecisionTree._fit_prepared``) instead of re-sorting.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from scipy.special import softmax
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    MetaEstimatorMixin,
    RegressorMixin,
    clone,
)
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import compute_sample_weight, get_tags
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    check_is_fitted,
    check_random_state,
    has_fit_parameter,
    validate_data,
)

from .._progress import ProgressBar
from .._registry import register_model_class
from .._sklearn_compat import HasMethods, Interval, StrOptions, _check_sample_weight, _fit_context
from ..tree import DecisionTreeClassifier, DecisionTreeRegressor
from ..tree._categorical_input import resolve_categorical_fit
from ..tree._classes import tree_X
from ..tree._common import CRITERIA_CLF, CRITERIA_REG
from ..tree._fit import prepare_tree_data
from ..tree._sparse_input import missing_mask
from ._base import draw_seeds

__all__ = ["AdaBoostClassifier", "AdaBoostRegressor"]

#: Stand-in for ``eps_t = 0`` in the step-size formulas: ``alpha`` is infinite in exact
#: arithmetic, and this gives the largest finite value the formula takes in float64 (about
#: 18.0 for binary AdaBoost, 36.0 for SAMME's and R2's ``ln((1 - eps) / eps)``).
PERFECT_ERROR = float(np.finfo(np.float64).eps)

#: Weights are kept at or above this (except rows whose given weight is zero), so that
#: examples the ensemble handles well never underflow to zero and silently leave the training
#: set (scikit-learn issue #20320 applies the same floor).
MIN_WEIGHT = float(np.finfo(np.float64).eps)

R2_LOSSES = ("linear", "square", "exponential")


# ----------------------------------------------------------------------------- formulas
def weighted_error(sample_weight: np.ndarray, loss: np.ndarray) -> float:
    """``eps = sum_i w_i loss_i / sum_i w_i`` (``loss`` is 0/1 for classifiers)."""
    return float(np.dot(sample_weight, loss) / sample_weight.sum())


def classifier_alpha(error: float, n_classes: int, learning_rate: float) -> float:
    """Learner weight: the seed's ``1/2 ln((1-eps)/eps)`` for two classes, SAMME's
    ``ln((1-eps)/eps) + ln(K-1)`` for more, times ``learning_rate``.

    ``error = 0`` uses :data:`PERFECT_ERROR` (the exact value is infinite).
    """
    eps = max(error, PERFECT_ERROR)
    if n_classes <= 2:
        return learning_rate * 0.5 * np.log((1.0 - eps) / eps)
    return learning_rate * (np.log((1.0 - eps) / eps) + np.log(n_classes - 1.0))


def regressor_alpha(error: float, learning_rate: float) -> float:
    """AdaBoost.R2 learner weight ``learning_rate * ln(1 / beta)``, ``beta = eps / (1 - eps)``."""
    eps = max(error, PERFECT_ERROR)
    return learning_rate * np.log((1.0 - eps) / eps)


def classifier_exponent(incorrect: np.ndarray, alpha: float, n_classes: int) -> np.ndarray:
    """Exponent of each example's weight factor.

    Two classes: ``-alpha y_i h(x_i)`` with ``y h = +1`` when right and ``-1`` when wrong.
    SAMME: ``alpha [h(x_i) != y_i]``.
    """
    if n_classes <= 2:
        return -alpha * (1.0 - 2.0 * incorrect)
    return alpha * incorrect


def r2_losses(abs_error: np.ndarray, positive: np.ndarray, loss: str) -> np.ndarray:
    """AdaBoost.R2 per-sample losses in [0, 1]: errors scaled by the largest error among the
    rows of positive weight, then transformed by ``loss``."""
    error_max = abs_error[positive].max()
    scaled = abs_error / error_max if error_max > 0 else np.zeros_like(abs_error)
    scaled = np.minimum(scaled, 1.0)  # zero-weight rows may exceed the maximum; they are inert
    if loss == "square":
        return scaled**2
    if loss == "exponential":
        return 1.0 - np.exp(-scaled)
    return scaled


def reweight(sample_weight: np.ndarray, exponent: np.ndarray) -> tuple[np.ndarray, float]:
    """``w_i exp(exponent_i)`` renormalised, and the normaliser ``Z = sum_i w_i exp(...)``.

    ``sample_weight`` must sum to one (the seed's normalised weights), so ``Z`` is the seed's
    ``Z_t``.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # overflow stops the fit (fit loop)
        unnormalised = sample_weight * np.exp(exponent)
        z = float(unnormalised.sum())
    return unnormalised / z, z


def floor_weights(sample_weight: np.ndarray, zero: np.ndarray) -> np.ndarray:
    """Raise weights below :data:`MIN_WEIGHT` to it (except originally zero rows) and
    renormalise to sum one."""
    w = np.maximum(sample_weight, MIN_WEIGHT)
    w[zero] = 0.0
    return w / w.sum()


def class_votes(predictions: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Vote coding of one learner's predicted labels.

    Two classes: ``h in {-1, +1}`` of shape (n,), +1 meaning ``classes[1]``. ``K > 2``:
    SAMME's symmetric coding of shape (n, K), 1 for the predicted class and ``-1/(K-1)``
    elsewhere.
    """
    n_classes = classes.shape[0]
    if n_classes == 2:
        return np.where(predictions == classes[1], 1.0, -1.0)
    hit = predictions[:, np.newaxis] == classes[np.newaxis, :]
    return np.where(hit, 1.0, -1.0 / (n_classes - 1))


def proba_from_decision(decision: np.ndarray, total_weight: float,
                        n_classes: int) -> np.ndarray:
    """scikit-learn's SAMME probabilities from the (un-normalised) decision function.

    scikit-learn divides the decision by the total learner weight; then ``K > 2`` takes
    ``softmax(F / (K-1))`` (Zhu et al., eq. 15) and two classes
    ``softmax([-H, H] / 2)`` of its binary decision ``2 H / sum(alpha)``, i.e.
    ``P(classes_[1]) = sigmoid(2 H / sum(alpha))``.
    """
    if n_classes == 2:
        scaled = decision / total_weight
        return softmax(np.column_stack([-scaled, scaled]), axis=1)
    return softmax(decision / (total_weight * (n_classes - 1)), axis=1)


def weighted_median(predictions: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row, the smallest prediction whose cumulative weight reaches half the total.

    ``predictions`` has shape (n_samples, n_learners), ``weights`` (n_learners,); this is
    scikit-learn's AdaBoost.R2 weighted median.
    """
    order = np.argsort(predictions, axis=1, kind="stable")
    cdf = np.cumsum(weights[order], axis=1)
    median_pos = (cdf >= 0.5 * cdf[:, -1:]).argmax(axis=1)
    rows = np.arange(predictions.shape[0])
    return predictions[rows, order[rows, median_pos]]


# ----------------------------------------------------------------------------- learners
def _set_random_states(estimator, rng: np.random.RandomState) -> None:
    """Give every ``*random_state`` parameter (nested ones too) a seed drawn from ``rng``."""
    keys = sorted(k for k in estimator.get_params(deep=True)
                  if k == "random_state" or k.endswith("__random_state"))
    if keys:
        seeds = draw_seeds(rng, len(keys))
        estimator.set_params(**{k: int(s) for k, s in zip(keys, seeds, strict=True)})


class _GenericLearners:
    """Fits clones of any scikit-learn estimator: on the weights when its ``fit`` accepts
    ``sample_weight``, otherwise on a bootstrap drawn with probabilities ``w``."""

    def __init__(self, template, X: np.ndarray, y: np.ndarray):
        self.template = template
        self.X = X
        self.y = y
        self.uses_weights = has_fit_parameter(template, "sample_weight")

    def fit(self, sample_weight: np.ndarray, rng: np.random.RandomState):
        est = clone(self.template)
        _set_random_states(est, rng)
        # The fitted clone is kept even when its fit returns None.
        if self.uses_weights:
            est.fit(self.X, self.y, sample_weight=sample_weight)
            return est
        n = self.X.shape[0]
        rows = rng.choice(n, size=n, replace=True, p=sample_weight / sample_weight.sum())
        est.fit(self.X[rows], self.y[rows])
        return est


class _PreparedTrees:
    """Fits our own decision trees on a matrix presorted (or binned) once.

    Each round returns an estimator fitted exactly as ``clone(template).fit(X, y,
    sample_weight)`` would fit it in exact mode (same tree, same fitted attributes; the test
    suite checks this); in histogram mode the bins are computed once for all rounds.
    """

    def __init__(self, template, X: np.ndarray, y: np.ndarray, classes: np.ndarray | None,
                 seed: int, rows: np.ndarray | None = None,
                 sample_weight: np.ndarray | None = None):
        template._validate_params()
        self.template = template
        self.is_classifier = classes is not None
        self.classes = classes
        X = tree_X(X)
        self.n_samples, self.n_features = X.shape
        self.missing_mask = missing_mask(X)
        if self.is_classifier:
            y_fit = np.searchsorted(classes, y).astype(np.float64)
            self.n_classes = int(classes.shape[0])
            self.criterion = CRITERIA_CLF[template.criterion]
            # The tree computes class weights from all of y, zero-weight rows included.
            weight_factor = (compute_sample_weight(template.class_weight, y)
                             if template.class_weight is not None else None)
        else:
            if template.criterion == "poisson" and (np.any(y < 0) or np.sum(y) <= 0):
                raise ValueError("Some value(s) of y are negative or their sum is not "
                                 "positive, which Poisson regression does not allow.")
            y_fit = np.asarray(y, dtype=np.float64)
            self.n_classes = 1
            self.criterion = CRITERIA_REG[template.criterion]
            weight_factor = None
        # Rows that can never get weight (``rows`` excludes them) are left out before
        # presorting / binning, as the tree's own fit leaves out rows of zero weight.
        self.rows = rows
        if rows is not None:
            X, y_fit = X[rows], y_fit[rows]
            weight_factor = None if weight_factor is None else weight_factor[rows]
            sample_weight = None if sample_weight is None else sample_weight[rows]
        self.y_fit = y_fit
        self.weight_factor = weight_factor
        self.data = prepare_tree_data(X, template.max_bins, seed, sample_weight)

    def fit(self, sample_weight: np.ndarray, rng: np.random.RandomState):
        est = clone(self.template)
        _set_random_states(est, rng)
        w = sample_weight if self.rows is None else sample_weight[self.rows]
        if self.weight_factor is not None:
            w = w * self.weight_factor
        if not np.any(w > 0):
            raise ValueError("sample_weight is zero for every sample; nothing to fit")
        # The fitted categorical attributes (all None: a categorical template takes the
        # generic path), as the estimator's own fit sets them.
        resolve_categorical_fit(est, None)
        return est._fit_prepared(self.data, self.y_fit, w, self.n_classes, self.criterion,
                                 missing_mask=self.missing_mask.copy(),
                                 classes=self.classes if self.is_classifier else None,
                                 n_samples=self.n_samples)


def _make_learners(template, X, y, classes, seed: int, sample_weight: np.ndarray):
    """The learner factory for ``template``: the presorted-tree fast path for our own trees
    (bins weighted by the initial ``sample_weight``), scikit-learn's clone-and-fit
    otherwise."""
    fast = DecisionTreeRegressor if classes is None else DecisionTreeClassifier
    if (type(template) is fast and X.ndim == 2
            and getattr(template, "categorical_features", None) is None):
        positive = sample_weight > 0
        rows = None if positive.all() else np.flatnonzero(positive)
        return _PreparedTrees(template, X, y, classes, seed, rows, sample_weight)
    return _GenericLearners(template, X, y)


# ----------------------------------------------------------------------------- estimators
class _BaseWeightBoosting(MetaEstimatorMixin, BaseEstimator):
    """The boosting loop shared by the classifier and the regressor.

    Subclasses provide ``_default_estimator``, ``_prepare_targets`` and ``_round``. A round
    returns None (learner not added, stop) or ``(eps, alpha, next weights, Z, last)``; the
    loop keeps the weights normalised, records each round and stops as the seed says.
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict"]), None],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def _base_estimator(self):
        return self._default_estimator() if self.estimator is None else self.estimator

    def _allows_nan(self) -> bool:
        return get_tags(self._base_estimator()).input_tags.allow_nan

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self._allows_nan()
        tags.input_tags.sparse = get_tags(self._base_estimator()).input_tags.sparse
        return tags

    def _finite_option(self, X):
        # NaN passes only to base estimators that take it, and never inside a sparse X.
        return "allow-nan" if self._allows_nan() and not sp.issparse(X) else True

    def _validate_X(self, X):
        return validate_data(self, X, dtype=np.float64, reset=False,
                             accept_sparse=["csr", "csc"], allow_nd=True,
                             ensure_all_finite=self._finite_option(X))

    @_fit_context(prefer_skip_nested_validation=False)  # `estimator` is validated by its fit
    def fit(self, X, y, sample_weight=None):
        """Build the boosted ensemble from the training set (X, y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows (NaN allowed when the base estimator allows it; more than two
            dimensions when the base estimator takes them).
        y : array-like of shape (n_samples,)
            Class labels (classifier) or real targets (regressor).
        sample_weight : array-like of shape (n_samples,), default=None
            Initial example weights (normalised to sum one); None gives ``1 / n_samples``.

        Returns
        -------
        self : object
        """
        # X of more than 2 dimensions goes as it is to base estimators that take it (as
        # scikit-learn's allow_nd); our trees refuse it with their own error.
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=self._is_regressor,
                             accept_sparse=["csr", "csc"], allow_nd=True,
                             ensure_all_finite=self._finite_option(X))
        y = self._prepare_targets(y)
        sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64, copy=True,
                                             ensure_non_negative=True)
        if sample_weight.sum() <= 0:
            raise ValueError("sample_weight sums to zero; nothing to fit")
        zero = sample_weight == 0
        w = sample_weight / sample_weight.sum()

        self.estimator_ = self._base_estimator()
        rng = check_random_state(self.random_state)
        classes = None if self._is_regressor else self.classes_
        learners = _make_learners(self.estimator_, X, y, classes, int(draw_seeds(rng, 1)[0]),
                                  sample_weight)
        estimators, weights, errors, normalizers = [], [], [], []
        bar = ProgressBar(self.n_estimators, type(self).__name__) if self.verbose > 0 else None
        try:
            for _ in range(self.n_estimators):
                w = floor_weights(w, zero)
                round_rng = np.random.RandomState(draw_seeds(rng, 1)[0])
                est = learners.fit(self._learner_weights(w, round_rng), round_rng)
                outcome = self._round(est, X, y, w, is_first=not estimators)
                if bar:
                    bar.update()
                if outcome is None:  # no edge: the learner is not added
                    break
                error, alpha, w, z, last = outcome
                estimators.append(est)
                weights.append(alpha)
                errors.append(error)
                normalizers.append(z)
                if last:  # a perfect learner (or R2's kept first learner without edge)
                    break
                if not np.all(np.isfinite(w)):  # exp overflow: stop, as scikit-learn does
                    warnings.warn(f"Sample weights have reached infinite values, at iteration "
                                  f"{len(estimators) - 1}, causing overflow. Iterations "
                                  "stopped. Try lowering the learning rate.", UserWarning,
                                  stacklevel=2)
                    break
        finally:
            if bar:
                bar.close()
        self.estimators_ = estimators
        self.estimator_weights_ = np.asarray(weights, dtype=np.float64)
        self.estimator_errors_ = np.asarray(errors, dtype=np.float64)
        self.normalizers_ = np.asarray(normalizers, dtype=np.float64)
        return self

    def _learner_weights(self, w: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
        """Weights the round's learner is fitted with (classification: the boosting weights)."""
        return w

    def __len__(self) -> int:
        """Number of fitted sub-estimators."""
        return len(self.estimators_)

    def __getitem__(self, index):
        """The ``index``-th fitted sub-estimator."""
        return self.estimators_[index]

    def __iter__(self) -> Iterator:
        """Iterate over the fitted sub-estimators."""
        return iter(self.estimators_)

    @property
    def feature_importances_(self) -> np.ndarray:
        """Impurity importances of the sub-estimators, averaged with weights ``alpha_t``."""
        check_is_fitted(self)
        try:
            importances = np.array([est.feature_importances_ for est in self.estimators_])
        except AttributeError as exc:
            raise AttributeError("feature_importances_ needs sub-estimators that have a "
                                 "feature_importances_ attribute") from exc
        return self.estimator_weights_ @ importances / self.estimator_weights_.sum()


@register_model_class
class AdaBoostClassifier(ClassifierMixin, _BaseWeightBoosting):
    """Discrete AdaBoost classifier (the seed's algorithm for two classes, SAMME for more).

    Parameters
    ----------
    estimator : estimator, default=None
        Weak learner, cloned each round; must have ``fit`` and ``predict``. None is
        :class:`cipherforest.DecisionTreeClassifier` with ``max_depth=1`` (a stump).
        Estimators whose ``fit`` takes ``sample_weight`` receive the boosting weights;
        others are fitted on a bootstrap of the rows drawn with those weights.
    n_estimators : int, default=50
        Maximum number of rounds; boosting stops earlier when a learner is perfect
        (``eps = 0``, kept) or has no edge (``eps >= 1 - 1/K``, not added).
    learning_rate : float, default=1.0
        Factor on every ``alpha_t``; 1 is the seed's AdaBoost.
    random_state : int, RandomState instance or None, default=None
        Seeds the sub-estimators' ``random_state`` parameters, the bootstraps of
        estimators without ``sample_weight``, and the bins of histogram trees.
    verbose : int, default=0
        Show a progress bar on stderr when positive.

    Attributes
    ----------
    estimator_ : estimator
        The base estimator the ensemble clones.
    estimators_ : list of estimators
        Fitted learners, one per round kept.
    estimator_weights_ : ndarray of shape (n_rounds,)
        ``alpha_t`` of each kept learner.
    estimator_errors_ : ndarray of shape (n_rounds,)
        Weighted error ``eps_t`` of each kept learner.
    normalizers_ : ndarray of shape (n_rounds,)
        ``Z_t = sum_i w_i exp(-alpha_t y_i h_t(x_i))`` (two classes; SAMME:
        ``sum_i w_i exp(alpha_t [h_t(x_i) != y_i])``) with ``w`` normalised. 0 for a
        perfect learner (the limit ``alpha -> inf``).
    classes_ : ndarray of shape (n_classes,)
    n_classes_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when X has string column names.
    feature_importances_ : ndarray of shape (n_features_in_,)

    Notes
    -----
    Differences from scikit-learn's ``AdaBoostClassifier``: for two classes
    ``alpha_t`` is the seed's ``1/2 ln((1-eps)/eps)`` (scikit-learn uses twice that; the
    model's predictions, probabilities and ``decision_function`` do not change); a perfect
    learner gets ``alpha`` at ``eps = 2.2e-16`` (scikit-learn: 1); the per-round arrays have
    one entry per kept learner (scikit-learn pads to ``n_estimators``).
    ``predict_proba`` equals scikit-learn's for the same learners.
    """

    _is_regressor = False

    def __init__(self, estimator=None, *, n_estimators=50, learning_rate=1.0,
                 random_state=None, verbose=0):
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.random_state = random_state
        self.verbose = verbose

    @staticmethod
    def _default_estimator():
        return DecisionTreeClassifier(max_depth=1)

    def _prepare_targets(self, y):
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        self.n_classes_ = int(self.classes_.shape[0])
        return y

    def _round(self, est, X, y, w, is_first: bool):
        incorrect = (est.predict(X) != y).astype(np.float64)
        error = weighted_error(w, incorrect)
        if error == 0.0:
            return 0.0, classifier_alpha(0.0, self.n_classes_, self.learning_rate), w, 0.0, True
        if error >= 1.0 - 1.0 / self.n_classes_:
            if is_first:
                raise ValueError(f"BaseClassifier in AdaBoostClassifier ensemble is worse than "
                                 f"random, ensemble can not be fit: the first learner's "
                                 f"weighted error {error:.4g} is at least 1 - 1/K = "
                                 f"{1.0 - 1.0 / self.n_classes_:.4g} (no better than chance)")
            return None
        alpha = classifier_alpha(error, self.n_classes_, self.learning_rate)
        w, z = reweight(w, classifier_exponent(incorrect, alpha, self.n_classes_))
        return error, alpha, w, z, False

    # ------------------------------------------------------------------ prediction
    def _staged_raw(self, X) -> Iterator[tuple[np.ndarray, float]]:
        """Running ``(decision, sum of alphas)`` after each learner."""
        check_is_fitted(self)
        X = self._validate_X(X)
        shape = (X.shape[0],) if self.n_classes_ == 2 else (X.shape[0], self.n_classes_)
        decision = np.zeros(shape)
        total = 0.0
        for est, alpha in zip(self.estimators_, self.estimator_weights_, strict=True):
            if self.n_classes_ > 1:
                decision += alpha * class_votes(est.predict(X), self.classes_)
            total += alpha
            yield decision.copy(), total

    def _label(self, decision: np.ndarray) -> np.ndarray:
        if self.n_classes_ == 2:
            return self.classes_.take((decision > 0).astype(np.intp))
        return self.classes_.take(np.argmax(decision, axis=1))

    def _proba(self, decision: np.ndarray, total: float) -> np.ndarray:
        if self.n_classes_ == 1:
            return np.ones((decision.shape[0], 1))
        return proba_from_decision(decision, total, self.n_classes_)

    def _scaled(self, decision: np.ndarray, total: float) -> np.ndarray:
        # scikit-learn's scale: the vote divided by the total learner weight; two classes
        # give the difference of the two symmetric class scores, 2 H / sum(alpha).
        factor = 2.0 if self.n_classes_ == 2 else 1.0
        return decision * (factor / total) if total > 0 else decision

    def decision_function(self, X):
        """Weighted vote, normalised by the total learner weight as scikit-learn's.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        score : ndarray of shape (n_samples,) or (n_samples, n_classes)
            Two classes: ``2 H(x) / sum_t alpha_t`` with ``H = sum_t alpha_t h_t`` and
            ``h in {-1, +1}``, in [-2, 2]; positive means ``classes_[1]``. More: SAMME's
            ``F_k(x) / sum_t alpha_t`` (rows sum to 0), largest for the predicted class.
        """
        *_, last = self._staged_raw(X)
        return self._scaled(*last)

    def staged_decision_function(self, X) -> Iterator[np.ndarray]:
        """``decision_function`` of the first 1, 2, ... learners.

        Yields
        ------
        score : ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        for decision, total in self._staged_raw(X):
            yield self._scaled(decision, total)

    def predict(self, X):
        """Class of ``sign(H(x))`` (two classes; ``H = 0`` gives ``classes_[0]``), or of the
        largest SAMME score.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        return self._label(self.decision_function(X))  # the scale keeps the sign / argmax

    def staged_predict(self, X) -> Iterator[np.ndarray]:
        """``predict`` of the first 1, 2, ... learners.

        Yields
        ------
        y : ndarray of shape (n_samples,)
        """
        for decision, _ in self._staged_raw(X):
            yield self._label(decision)

    def predict_proba(self, X):
        """Class probabilities, as scikit-learn's SAMME (see :func:`proba_from_decision`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        result = None
        for decision, total in self._staged_raw(X):
            result = (decision, total)
        return self._proba(*result)

    def staged_predict_proba(self, X) -> Iterator[np.ndarray]:
        """``predict_proba`` of the first 1, 2, ... learners.

        Yields
        ------
        proba : ndarray of shape (n_samples, n_classes)
        """
        for decision, total in self._staged_raw(X):
            yield self._proba(decision, total)

    def predict_log_proba(self, X):
        """Natural logarithm of ``predict_proba``."""
        return np.log(self.predict_proba(X))

    def staged_score(self, X, y, sample_weight=None) -> Iterator[float]:
        """Accuracy of the first 1, 2, ... learners on (X, y).

        Yields
        ------
        score : float
        """
        for y_pred in self.staged_predict(X):
            yield accuracy_score(y, y_pred, sample_weight=sample_weight)


@register_model_class
class AdaBoostRegressor(RegressorMixin, _BaseWeightBoosting):
    """AdaBoost.R2 regressor (Drucker, 1997), predicting the weighted median of its learners.

    Parameters
    ----------
    estimator : estimator, default=None
        Weak learner, cloned each round; None is
        :class:`cipherforest.DecisionTreeRegressor` with ``max_depth=3``. Estimators whose
        ``fit`` takes ``sample_weight`` receive the boosting weights; others a weighted
        bootstrap of the rows.
    n_estimators : int, default=50
        Maximum number of rounds; boosting stops earlier on a perfect learner (kept) or a
        learner with average loss ``eps >= 1/2`` (not added).
    learning_rate : float, default=1.0
        Factor on every ``alpha_t`` and on the exponent of the weight update.
    loss : {"linear", "square", "exponential"}, default="linear"
        Per-sample loss from the scaled absolute error ``L``: ``L``, ``L**2`` or
        ``1 - exp(-L)``.
    random_state : int, RandomState instance or None, default=None
        Seeds the sub-estimators, bootstraps and histogram bins.
    verbose : int, default=0
        Show a progress bar on stderr when positive.

    Attributes
    ----------
    estimator_ : estimator
    estimators_ : list of estimators
    estimator_weights_ : ndarray of shape (n_rounds,)
        ``alpha_t = learning_rate * ln(1 / beta_t)``.
    estimator_errors_ : ndarray of shape (n_rounds,)
        Average loss ``eps_t``.
    normalizers_ : ndarray of shape (n_rounds,)
        ``Z_t = sum_i w_i beta_t^(learning_rate (1 - L_i))`` (0 for a perfect learner, 1 for
        a first learner kept without edge, whose round leaves the weights unchanged).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
    feature_importances_ : ndarray of shape (n_features_in_,)

    Notes
    -----
    As Drucker's AdaBoost.R2 and scikit-learn, each learner is fitted on a bootstrap drawn
    with the boosting weights as probabilities (passed as draw counts when the learner takes
    ``sample_weight``); errors are measured on every row with the boosting weights. A
    learner with ``eps >= 1/2`` is not added, except in round one where, as in
    scikit-learn, it is kept alone so that the model can predict. A perfect learner gets
    ``alpha`` at ``eps = 2.2e-16`` (scikit-learn: 1). Per-round arrays have one entry per
    kept learner.
    """

    _is_regressor = True
    _parameter_constraints: dict = {
        **_BaseWeightBoosting._parameter_constraints,
        "loss": [StrOptions(set(R2_LOSSES))],
    }

    def __init__(self, estimator=None, *, n_estimators=50, learning_rate=1.0, loss="linear",
                 random_state=None, verbose=0):
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.loss = loss
        self.random_state = random_state
        self.verbose = verbose

    @staticmethod
    def _default_estimator():
        return DecisionTreeRegressor(max_depth=3)

    def _prepare_targets(self, y):
        return np.asarray(y, dtype=np.float64)

    def _learner_weights(self, w: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
        """AdaBoost.R2 (Drucker 1997) fits each learner on a bootstrap drawn with the
        boosting weights as probabilities; the draw counts reach the learner as weights."""
        n = w.shape[0]
        draws = rng.choice(n, size=n, replace=True, p=w / w.sum())
        return np.bincount(draws, minlength=n).astype(np.float64)

    def _round(self, est, X, y, w, is_first: bool):
        losses = r2_losses(np.abs(est.predict(X) - y), w > 0, self.loss)
        error = weighted_error(w, losses)
        if error <= 0.0:
            return 0.0, regressor_alpha(0.0, self.learning_rate), w, 0.0, True
        if error >= 0.5:
            if is_first:
                # No edge, but an empty ensemble cannot predict: like scikit-learn, keep the
                # first learner alone (any positive weight gives its predictions; the
                # weights are left unchanged, so Z = 1) and stop.
                return error, 1.0, w, 1.0, True
            return None
        alpha = regressor_alpha(error, self.learning_rate)
        w, z = reweight(w, -alpha * (1.0 - losses))
        return error, alpha, w, z, False

    def _predictions(self, X) -> np.ndarray:
        check_is_fitted(self)
        X = self._validate_X(X)
        return np.column_stack([est.predict(X) for est in self.estimators_])

    def predict(self, X):
        """Weighted median (weights ``alpha_t``) of the learners' predictions.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        return weighted_median(self._predictions(X), self.estimator_weights_)

    def staged_predict(self, X) -> Iterator[np.ndarray]:
        """``predict`` of the first 1, 2, ... learners.

        Yields
        ------
        y : ndarray of shape (n_samples,)
        """
        predictions = self._predictions(X)
        for t in range(1, predictions.shape[1] + 1):
            yield weighted_median(predictions[:, :t], self.estimator_weights_[:t])

    def staged_score(self, X, y, sample_weight=None) -> Iterator[float]:
        """R² of the first 1, 2, ... learners on (X, y).

        Yields
        ------
        score : float
        """
        for y_pred in self.staged_predict(X):
            yield r2_score(y, y_pred, sample_weight=sample_weight)
