"""Bagging over any estimator: bootstrap rows, random feature subsets, out-of-bag estimates.

Every member ``b`` of the ensemble is defined by three seeds drawn up front from
``random_state`` (``draw_seeds``), so the fitted ensemble does not depend on ``n_jobs``::

    seeds[b] = [estimator seed, row seed, feature seed]

* the row seed gives the draw counts ``counts[b]`` (``bootstrap_counts``: ``max_samples`` draws
  with replacement; without replacement when ``bootstrap=False``). When the sub-estimator's
  ``fit`` accepts ``sample_weight`` the counts are passed as weights (no copy of ``X``'s rows);
  otherwise the rows are repeated by indexing. With a ``sample_weight`` given to ``fit``, rows
  are drawn with probabilities proportional to it (scikit-learn 1.9's semantics: a row of
  weight k is as likely as k copies of it), and a float ``max_samples`` is a fraction of the
  weight sum;
* the feature seed gives ``estimators_features_[b]`` (sorted column indices);
* the estimator seed is set as the sub-estimator's ``random_state``.

Out-of-bag (OOB) estimates follow the seed's rule: row ``i``'s OOB prediction averages only the
models ``O_i`` whose draw did not contain it, and rows with ``|O_i| = 0`` are left out of the
score (with a warning) and get NaN predictions.

Our own decision trees take a shortcut: ``X`` is presorted (or binned) once per fit and each
tree is grown on that shared, read-only data (``BaseDecisionTree._fit_prepared``). In exact
mode this grows exactly the tree that ``fit(X[:, features], y, sample_weight=counts)`` grows;
with ``max_bins`` the bins come from all training rows instead of each tree's in-bag rows.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import compute_sample_weight, get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.random import sample_without_replacement
from sklearn.utils.validation import (
    check_array,
    check_is_fitted,
    check_random_state,
    column_or_1d,
    has_fit_parameter,
    validate_data,
)

from .._parallel import effective_n_jobs, map_in_threads
from .._registry import register_model_class
from .._sklearn_compat import (
    HasMethods,
    Interval,
    RealNotInt,
    _check_sample_weight,
    _fit_context,
    _safe_indexing,
)
from ..tree._classes import (
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    resolve_max_features,
    tree_X,
    tree_X_options,
)
from ..tree._common import CRITERIA_CLF, CRITERIA_REG
from ..tree._fit import TreeData, prepare_tree_data
from ..tree._sparse_input import missing_mask
from ._base import (
    bootstrap_counts,
    draw_seeds,
    fit_members,
    resolve_n_draws,
    seeded_stream,
    warn_if_oob_missing,
)

__all__ = ["BaggingClassifier", "BaggingRegressor", "draw_features", "draw_sample_counts"]

# Columns of the per-estimator seed table.
_SEED_ESTIMATOR, _SEED_ROWS, _SEED_FEATURES = 0, 1, 2
_N_SEEDS = 3


# ------------------------------------------------------------------------------ draws
def draw_sample_counts(seed: int, n_samples: int, n_draws: int, bootstrap: bool,
                       probabilities: np.ndarray | None = None) -> np.ndarray:
    """How often each row is drawn for one estimator.

    Parameters
    ----------
    seed : int
        The estimator's row seed.
    n_samples : int
        Rows of the training set.
    n_draws : int
        Rows drawn (``max_samples`` resolved).
    bootstrap : bool
        With replacement (counts can exceed 1) or without (counts are 0 or 1).
    probabilities : ndarray of shape (n_samples,), default=None
        Probability of drawing each row (normalised sample weights); None: uniform.

    Returns
    -------
    counts : ndarray of shape (n_samples,), dtype int64
    """
    if probabilities is not None:
        rows = seeded_stream(seed).choice(n_samples, n_draws, replace=bootstrap,
                                          p=probabilities)
        return np.bincount(rows, minlength=n_samples)
    if bootstrap:
        return bootstrap_counts(seed, n_samples, n_draws)
    rows = sample_without_replacement(n_samples, n_draws, random_state=seed)
    return np.bincount(rows, minlength=n_samples)


def draw_features(seed: int, n_features: int, n_draws: int,
                  bootstrap_features: bool) -> np.ndarray:
    """Sorted column indices one estimator is trained on.

    Without replacement and ``n_draws == n_features`` this is every column, in order.
    """
    if bootstrap_features:
        drawn = seeded_stream(seed).randint(0, n_features, n_draws)
    elif n_draws == n_features:
        return np.arange(n_features, dtype=np.intp)
    else:
        drawn = sample_without_replacement(n_features, n_draws, random_state=seed)
    return np.sort(drawn).astype(np.intp)


def _is_every_column(features: np.ndarray, n_features: int) -> bool:
    return features.shape[0] == n_features and np.array_equal(features, np.arange(n_features))


def _columns(X, features: np.ndarray, n_features: int):
    """``X[:, features]``, without a copy when ``features`` is every column in order."""
    return X if _is_every_column(features, n_features) else X[:, features]


def _sum_in_order(fn: Callable[[int], object], n_items: int, n_jobs, accumulate) -> None:
    """Evaluate ``fn(0..n_items-1)`` in threads, a block at a time, and feed the results to
    ``accumulate`` in item order (so float sums do not depend on ``n_jobs``; memory is bounded
    by one block of results)."""
    block = 4 * effective_n_jobs(n_jobs)
    for start in range(0, n_items, block):
        items = range(start, min(n_items, start + block))
        for result in map_in_threads(fn, items, n_jobs):
            accumulate(result)


def _set_random_states(estimator, seed: int) -> None:
    """Give every ``random_state`` parameter of ``estimator`` (nested ones too) its own int."""
    keys = sorted(key for key in estimator.get_params(deep=True)
                  if key == "random_state" or key.endswith("__random_state"))
    if keys:
        values = draw_seeds(seeded_stream(seed), len(keys))
        estimator.set_params(**{key: int(v) for key, v in zip(keys, values, strict=True)})


# ------------------------------------------------------------------------------ tree shortcut
class _PreparedTrees:
    """Grows our decision trees on one presorted / binned copy of ``X`` (module docstring).

    Replicates ``BaseDecisionTree.fit`` for ``fit(X[:, features], y, sample_weight=w)``.
    """

    def __init__(self, template, X, y, n_classes: int, seed: int):
        self.is_classifier = isinstance(template, DecisionTreeClassifier)
        self.X = tree_X(check_array(X, dtype=np.float64, **tree_X_options(X)))
        self.n_samples, self.n_features = self.X.shape
        self.missing = missing_mask(self.X)
        self.n_classes = n_classes  # y holds class indices 0..n_classes-1 (classification)
        if self.is_classifier:
            self.y = y
        else:
            self.y = np.asarray(y, dtype=np.float64)
            if template.criterion == "poisson":
                if np.any(self.y < 0):
                    raise ValueError("Some value(s) of y are negative which is not allowed "
                                     "for Poisson regression.")
                if np.sum(self.y) <= 0:
                    raise ValueError("Sum of y is not positive which is necessary for "
                                     "Poisson regression.")
        self.data = prepare_tree_data(self.X, template.max_bins, seed)

    def _data_for(self, features: np.ndarray) -> TreeData:
        data = self.data
        if _is_every_column(features, self.n_features):
            return data
        if data.sparse is not None:
            thresholds = (None if data.bin_thresholds is None
                          else np.ascontiguousarray(data.bin_thresholds[features]))
            return TreeData(self.n_samples, features.shape[0], data.max_bins,
                            bin_thresholds=thresholds, sparse=data.sparse.select(features))
        if data.max_bins is None:
            return TreeData(self.n_samples, features.shape[0], None,
                            sorted_index=data.sorted_index[features],
                            sorted_value=data.sorted_value[features])
        return TreeData(self.n_samples, features.shape[0], data.max_bins,
                        X_binned=np.ascontiguousarray(data.X_binned[:, features]),
                        bin_thresholds=np.ascontiguousarray(data.bin_thresholds[features]))

    def fit(self, tree, features: np.ndarray, sample_weight: np.ndarray):
        """Fit ``tree`` (an unfitted clone) as ``tree.fit(X[:, features], y, sample_weight)``."""
        w = np.asarray(sample_weight, dtype=np.float64)
        if np.any(w < 0):
            raise ValueError("Negative values in data passed to `sample_weight`")
        if self.is_classifier:
            criterion = CRITERIA_CLF[tree.criterion]
            if tree.class_weight is not None:
                w = w * compute_sample_weight(tree.class_weight, self.y)
        else:
            criterion = CRITERIA_REG[tree.criterion]
        if not np.any(w > 0):
            raise ValueError("sample_weight is zero for every sample; nothing to fit")
        classes = np.arange(self.n_classes) if self.is_classifier else None
        return tree._fit_prepared(self._data_for(features), self.y, w, self.n_classes,
                                  criterion, missing_mask=self.missing[features],
                                  classes=classes, n_samples=self.n_samples)


# ------------------------------------------------------------------------------ estimators
_DOC = """{summary}

Each of ``n_estimators`` copies of ``estimator`` is fitted on ``max_samples`` rows drawn from
the training set (with replacement: the seed's bootstrap) and on ``max_features`` of its
columns; {combine}

Parameters
----------
estimator : estimator, default=None
    Any scikit-learn style {kind}; None means :class:`cipherforest.{tree}`. Note that
    :func:`cipherforest.io.save_model` only saves sub-estimators of registered classes (ours),
    and refuses others, such as scikit-learn's estimators, with a ``TypeError``.
n_estimators : int, default=10
    Number of sub-estimators.
max_samples : int or float, default=None
    Rows drawn per sub-estimator: None means ``n_samples``, an int that many (at most
    ``n_samples`` without bootstrap), a float ``max(1, int(max_samples * n_samples))`` (of
    ``sum(sample_weight)`` when fitting with weights).
max_features : int or float, default=1.0
    Columns drawn per sub-estimator: an int that many, a float
    ``max(1, int(max_features * n_features))``.
bootstrap : bool, default=True
    Draw rows with replacement. When False, ``max_samples`` distinct rows are drawn.
bootstrap_features : bool, default=False
    Draw columns with replacement.
oob_score : bool, default=False
    Compute the out-of-bag estimate (needs ``bootstrap=True``): each row is predicted only by
    the sub-estimators that did not draw it; rows drawn by every sub-estimator are left out of
    ``oob_score_`` with a warning.
warm_start : bool, default=False
    Keep the fitted sub-estimators and add ``n_estimators - len(estimators_)`` new ones. With
    an int ``random_state`` the result equals a fresh fit with the final ``n_estimators``.
n_jobs : int, default=None
    Threads for fitting and prediction (None: 1, -1: all cores). Results do not depend on it.
random_state : int, RandomState instance or None, default=None
    Seeds the row and column draws and the sub-estimators' ``random_state``.
verbose : int, default=0
    Show a progress bar while fitting when > 0.

Attributes
----------
estimator_ : estimator
    Unfitted clone of the base estimator the sub-estimators are cloned from.
estimators_ : list of estimators
    The fitted sub-estimators.{classifier_note}
estimators_features_ : list of ndarray of int
    Sorted column indices of each sub-estimator.
estimators_samples_ : list of ndarray of int
    Row indices drawn for each sub-estimator (sorted, a row repeated as often as it was drawn);
    recomputed on access from ``sample_seeds_``.
sample_seeds_ : ndarray of shape (n_estimators,)
    Seed of each sub-estimator's row draw.
max_samples_ : int
    Rows drawn per sub-estimator.
max_features_ : int
    Columns drawn per sub-estimator.
n_samples_fit_ : int
    Rows of the training set.
n_features_in_ : int
feature_names_in_ : ndarray of shape (n_features_in_,)
    Only when ``X`` has string column names.
{attributes}
"""

_CLASSIFIER_ATTRIBUTES = """classes_ : ndarray of shape (n_classes,)
n_classes_ : int
oob_score_ : float
    Accuracy of the out-of-bag predictions (only with ``oob_score=True``).
oob_decision_function_ : ndarray of shape (n_samples, n_classes)
    Out-of-bag class probabilities (vote fractions if the sub-estimators have no
    ``predict_proba``); NaN rows for samples without an out-of-bag model."""

_REGRESSOR_ATTRIBUTES = """oob_score_ : float
    R² of the out-of-bag predictions (only with ``oob_score=True``).
oob_prediction_ : ndarray of shape (n_samples,)
    Out-of-bag predictions; NaN for samples without an out-of-bag model."""


def _base_has(method: str) -> Callable[[BaseEstimator], bool]:
    """``available_if`` check: the (fitted or template) sub-estimator has ``method``."""
    def check(self) -> bool:
        if hasattr(self, "estimators_") and self.estimators_:
            return hasattr(self.estimators_[0], method)
        return hasattr(self._get_estimator(), method)
    return check


class BaseBagging(BaseEstimator):
    """Fitting, draws and out-of-bag bookkeeping shared by the two bagging estimators."""

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "predict"]), None],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "max_samples": [
            None,
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0, 1, closed="right"),
        ],
        "max_features": [
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0, 1, closed="right"),
        ],
        "bootstrap": ["boolean"],
        "bootstrap_features": ["boolean"],
        "oob_score": ["boolean"],
        "warm_start": ["boolean"],
        "n_jobs": [None, Integral],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    #: Default sub-estimator class (set by the subclasses).
    _default_estimator: type

    def __init__(self, estimator=None, n_estimators=10, *, max_samples=None, max_features=1.0,
                 bootstrap=True, bootstrap_features=False, oob_score=False, warm_start=False,
                 n_jobs=None, random_state=None, verbose=0):
        self.estimator = estimator
        self.n_estimators = n_estimators
        self.max_samples = max_samples
        self.max_features = max_features
        self.bootstrap = bootstrap
        self.bootstrap_features = bootstrap_features
        self.oob_score = oob_score
        self.warm_start = warm_start
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _get_estimator(self):
        return self._default_estimator() if self.estimator is None else self.estimator

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        base_tags = get_tags(self._get_estimator())
        tags.input_tags.allow_nan = base_tags.input_tags.allow_nan
        tags.input_tags.sparse = base_tags.input_tags.sparse
        return tags

    def __len__(self) -> int:
        return len(self.estimators_)

    def __getitem__(self, index):
        return self.estimators_[index]

    def __iter__(self):
        return iter(self.estimators_)

    # ------------------------------------------------------------------ fitting
    @_fit_context(prefer_skip_nested_validation=False)  # ``estimator`` is not validated here
    def fit(self, X, y, sample_weight=None):
        """Fit the sub-estimators on their draws of the training set (X, y).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training rows; NaN and sparse matrices are passed on if the sub-estimator takes
            them.
        y : array-like of shape (n_samples,)
            Class labels or real targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Rows are drawn with probabilities proportional to it (scikit-learn 1.9): a row
            of weight k is drawn as often as k copies of it would be; a float
            ``max_samples`` is then a fraction of ``sum(sample_weight)``.

        Returns
        -------
        self : object
        """
        warm = self.warm_start and bool(getattr(self, "estimators_", None))
        X, y = validate_data(self, X, y, accept_sparse=["csr", "csc"], dtype=None,
                             ensure_all_finite=False, multi_output=True, reset=not warm)
        y = self._encode_y(y, reset=not warm)
        n_samples = X.shape[0]
        # A warm start keeps growing the ensemble from the estimator it started with.
        template = self.estimator_ if warm else self._get_estimator()
        accepts_weight = has_fit_parameter(template, "sample_weight")
        probabilities = None
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                                 ensure_non_negative=True)
            if not self.bootstrap:
                warnings.warn(f"When fitting {type(self).__name__} with sample_weight it is "
                              f"recommended to use bootstrap=True, got {self.bootstrap}.",
                              UserWarning, stacklevel=2)
            probabilities = sample_weight / sample_weight.sum()
        if self.oob_score and not self.bootstrap:
            raise ValueError("Out of bag estimation only available if bootstrap=True")
        n_draws = resolve_n_draws(self.max_samples, n_samples, sample_weight,
                                  at_most_n_samples=False)
        if n_draws > n_samples and not self.bootstrap:
            raise ValueError(f"max_samples={n_draws} must be <= n_samples={n_samples} to "
                             "be able to sample without replacement.")
        n_features = resolve_max_features(self.max_features, self.n_features_in_)

        if warm:
            if n_samples != self.n_samples_fit_ or n_draws != self.max_samples_:
                raise ValueError("warm_start needs the same training set size and max_samples "
                                 f"as before (n_samples={self.n_samples_fit_}, "
                                 f"max_samples={self.max_samples_})")
        else:
            self.estimator_ = clone(template)
            self.estimators_ = []
            self.estimators_features_ = []
            self.sample_seeds_ = np.zeros(0, dtype=np.int64)
            for name in ("oob_score_", "oob_decision_function_", "oob_prediction_"):
                self.__dict__.pop(name, None)
        if warm and not self.oob_score:  # an earlier OOB estimate no longer describes the model
            for name in ("oob_score_", "oob_decision_function_", "oob_prediction_"):
                self.__dict__.pop(name, None)
        self.n_samples_fit_ = n_samples
        self.max_samples_ = self._max_samples = n_draws
        self.sample_probabilities_ = probabilities
        self.max_features_ = n_features

        n_old = len(self.estimators_)
        n_more = self.n_estimators - n_old
        if n_more < 0:
            raise ValueError(f"n_estimators={self.n_estimators} must be >= "
                             f"len(estimators_)={n_old} when warm_start=True")
        if n_more == 0:
            warnings.warn("Warm-start fitting without increasing n_estimators does not fit new "
                          "estimators.", UserWarning, stacklevel=2)
            return self

        # Every estimator's seeds are drawn here, so the ensemble does not depend on n_jobs;
        # warm starts draw the full table again and keep the rows of the new estimators.
        seeds = draw_seeds(check_random_state(self.random_state),
                           _N_SEEDS * self.n_estimators).reshape(-1, _N_SEEDS)[n_old:]
        prepared = None
        if type(template) in (DecisionTreeClassifier, DecisionTreeRegressor):
            prepared = _PreparedTrees(template, X, y, getattr(self, "n_classes_", 1),
                                      int(seeds[0, _SEED_ESTIMATOR]))

        def fit_one(b: int):
            est = clone(self.estimator_)
            _set_random_states(est, int(seeds[b, _SEED_ESTIMATOR]))
            features = draw_features(int(seeds[b, _SEED_FEATURES]), self.n_features_in_,
                                     n_features, self.bootstrap_features)
            counts = draw_sample_counts(int(seeds[b, _SEED_ROWS]), n_samples, n_draws,
                                        self.bootstrap, probabilities)
            if accepts_weight:
                weight = counts.astype(np.float64)
                if prepared is not None:
                    return prepared.fit(est, features, weight), features
                est.fit(_columns(X, features, self.n_features_in_), y, sample_weight=weight)
                return est, features
            rows = np.repeat(np.arange(n_samples), counts)
            X_rows = _columns(_safe_indexing(X, rows), features, self.n_features_in_)
            est.fit(X_rows, y[rows])  # kept even when fit returns None
            return est, features

        fitted = fit_members(fit_one, range(n_more), self.n_jobs, self.verbose,
                                desc=type(self).__name__)
        self.estimators_ += [est for est, _ in fitted]
        self.estimators_features_ += [features for _, features in fitted]
        self.sample_seeds_ = np.concatenate(
            [self.sample_seeds_, seeds[:, _SEED_ROWS].astype(np.int64)])

        if self.oob_score:
            self._set_oob_score(X, y)
        return self

    def _draw_counts(self, b: int) -> np.ndarray:
        return draw_sample_counts(int(self.sample_seeds_[b]), self.n_samples_fit_,
                                  self.max_samples_, self.bootstrap,
                                  self.sample_probabilities_)

    @property
    def estimators_samples_(self) -> list[np.ndarray]:
        """Row indices drawn for each sub-estimator (sorted; repeated rows appear repeatedly).

        Recomputed from ``sample_seeds_`` on every access.
        """
        check_is_fitted(self)
        rows = np.arange(self.n_samples_fit_)
        return [np.repeat(rows, self._draw_counts(b)) for b in range(len(self.estimators_))]

    # ------------------------------------------------------------------ out-of-bag
    def _oob_sums(self, X, predict: Callable, width: tuple[int, ...]):
        """Sum of ``predict(estimator, X_oob)`` over each row's out-of-bag models, and how many
        models each row has."""
        n_samples = X.shape[0]
        sums = np.zeros((n_samples, *width))
        n_models = np.zeros(n_samples, dtype=np.int64)

        def one(b: int):
            rows = np.flatnonzero(self._draw_counts(b) == 0)
            if rows.shape[0] == 0:
                return rows, None
            X_oob = _columns(_safe_indexing(X, rows), self.estimators_features_[b],
                             self.n_features_in_)
            return rows, predict(self.estimators_[b], X_oob)

        def accumulate(result) -> None:
            rows, values = result
            if values is not None:
                sums[rows] += values
                n_models[rows] += 1

        _sum_in_order(one, len(self.estimators_), self.n_jobs, accumulate)
        return sums, n_models

    @staticmethod
    def _oob_average(sums: np.ndarray, n_models: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-row mean over out-of-bag models (NaN rows where there is none), and the mask of
        rows that have one (warning when some do not)."""
        covered = warn_if_oob_missing(n_models)
        denominator = n_models.reshape(-1, *([1] * (sums.ndim - 1)))
        mean = np.full(sums.shape, np.nan)
        np.divide(sums, denominator, out=mean, where=denominator > 0)
        return mean, covered

    # ------------------------------------------------------------------ prediction
    def _validate_X_predict(self, X):
        check_is_fitted(self)
        return validate_data(self, X, accept_sparse=["csr", "csc"], dtype=None,
                             ensure_all_finite=False, reset=False)

    def _mean_over_estimators(self, X, predict: Callable) -> np.ndarray:
        """``mean_b predict(estimator_b, X[:, features_b])``, summed in estimator order."""
        total = []

        def one(b: int):
            return predict(self.estimators_[b],
                           _columns(X, self.estimators_features_[b], self.n_features_in_))

        def accumulate(values) -> None:
            if total:
                total[0] += values
            else:
                total.append(np.array(values, dtype=np.float64))

        _sum_in_order(one, len(self.estimators_), self.n_jobs, accumulate)
        return total[0] / len(self.estimators_)


@register_model_class
class BaggingClassifier(ClassifierMixin, BaseBagging):
    __doc__ = _DOC.format(
        summary="A bagging classifier over any classifier (scikit-learn's API).",
        combine="the ensemble averages their ``predict_proba`` (or their votes when they have "
                "none).",
        kind="classifier", tree="DecisionTreeClassifier",
        classifier_note=" They are fitted on the class indices ``0..n_classes-1``, so their "
                        "``classes_`` are indices into ``classes_``.",
        attributes=_CLASSIFIER_ATTRIBUTES)

    _default_estimator = DecisionTreeClassifier

    def _encode_y(self, y, reset: bool) -> np.ndarray:
        y = column_or_1d(y, warn=True)
        check_classification_targets(y)
        if reset:
            self.classes_, encoded = np.unique(y, return_inverse=True)
            self.n_classes_ = int(self.classes_.shape[0])
            return encoded
        encoded = np.searchsorted(self.classes_, y)
        encoded = np.minimum(encoded, self.n_classes_ - 1)
        if not np.array_equal(self.classes_[encoded], y):
            raise ValueError("warm_start cannot add classes that were not seen in the first fit")
        return encoded

    def _proba_of(self, estimator, X) -> np.ndarray:
        """Class probabilities of one sub-estimator over all ``n_classes_`` (one-hot votes
        when it has no ``predict_proba``)."""
        n = X.shape[0]
        if hasattr(estimator, "predict_proba"):
            proba = estimator.predict_proba(X)
            if proba.shape[1] == self.n_classes_:
                return proba
            full = np.zeros((n, self.n_classes_))
            full[:, estimator.classes_] = proba
            return full
        votes = np.zeros((n, self.n_classes_))
        votes[np.arange(n), np.asarray(estimator.predict(X), dtype=np.intp)] = 1.0
        return votes

    def _set_oob_score(self, X, y) -> None:
        sums, n_models = self._oob_sums(X, self._proba_of, (self.n_classes_,))
        self.oob_decision_function_, covered = self._oob_average(sums, n_models)
        if covered.any():
            predicted = np.argmax(self.oob_decision_function_[covered], axis=1)
            self.oob_score_ = float(accuracy_score(y[covered], predicted))
        else:
            self.oob_score_ = float("nan")

    def predict_proba(self, X):
        """Mean class probabilities of the sub-estimators (vote fractions if they have no
        ``predict_proba``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns follow ``classes_``.
        """
        X = self._validate_X_predict(X)
        return self._mean_over_estimators(X, self._proba_of)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, combined with ``logaddexp`` when the
        sub-estimators have ``predict_log_proba``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
        """
        X = self._validate_X_predict(X)
        if not hasattr(self.estimators_[0], "predict_log_proba"):
            with np.errstate(divide="ignore"):
                return np.log(self._mean_over_estimators(X, self._proba_of))
        log_proba = np.full((X.shape[0], self.n_classes_), -np.inf)

        def one(b: int):
            est = self.estimators_[b]
            values = est.predict_log_proba(
                _columns(X, self.estimators_features_[b], self.n_features_in_))
            if values.shape[1] == self.n_classes_:
                return values
            full = np.full((X.shape[0], self.n_classes_), -np.inf)
            full[:, est.classes_] = values
            return full

        def accumulate(values) -> None:
            np.logaddexp(log_proba, values, out=log_proba)

        _sum_in_order(one, len(self.estimators_), self.n_jobs, accumulate)
        return log_proba - np.log(len(self.estimators_))

    @available_if(_base_has("decision_function"))
    def decision_function(self, X):
        """Mean ``decision_function`` of the sub-estimators.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        score : ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        X = self._validate_X_predict(X)
        return self._mean_over_estimators(X, lambda est, X_b: est.decision_function(X_b))

    def predict(self, X):
        """Class with the highest mean probability (or the most votes).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        proba = self.predict_proba(X)
        return self.classes_.take(np.argmax(proba, axis=1))


@register_model_class
class BaggingRegressor(RegressorMixin, BaseBagging):
    __doc__ = _DOC.format(
        summary="A bagging regressor over any regressor (scikit-learn's API).",
        combine="the ensemble averages their predictions.",
        kind="regressor", tree="DecisionTreeRegressor", classifier_note="",
        attributes=_REGRESSOR_ATTRIBUTES)

    _default_estimator = DecisionTreeRegressor

    def _encode_y(self, y, reset: bool) -> np.ndarray:
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = column_or_1d(y, warn=True)
        return y

    def _set_oob_score(self, X, y) -> None:
        sums, n_models = self._oob_sums(X, lambda est, X_b: est.predict(X_b), y.shape[1:])
        self.oob_prediction_, covered = self._oob_average(sums, n_models)
        if covered.any():
            self.oob_score_ = float(r2_score(y[covered], self.oob_prediction_[covered]))
        else:
            self.oob_score_ = float("nan")

    def predict(self, X):
        """Mean prediction of the sub-estimators.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        X = self._validate_X_predict(X)
        return self._mean_over_estimators(X, lambda est, X_b: est.predict(X_b))

