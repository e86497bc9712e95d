"""Random forests and extremely randomised trees.

All trees of a forest grow on one prepared copy of the training matrix (presorted once for the
exact finder, binned once for ``max_bins``); each tree only gets its own bootstrap counts as
sample weights, so no rows are copied. Trees grow in threads: the numba kernels release the
GIL. Every tree's seed is drawn up front from ``random_state``, so the forest is identical for
any ``n_jobs``.
"""

from __future__ import annotations

import warnings
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from .._parallel import map_in_threads
from .._registry import register_model_class
from .._sklearn_compat import Interval, RealNotInt, StrOptions, _fit_context
from ..tree._categorical_input import (
    apply_category_bins,
    categorical_predict_input,
    map_unknown_categories,
)
from ..tree._classes import (
    BaseDecisionTree,
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    check_poisson_target,
    classes_of_proba,
    encode_classes,
    log_proba,
    map_friedman_mse,
    split_outputs,
    tree_X,
    tree_X_options,
    validate_fit_arrays,
)
from ..tree._common import CRITERIA_CLF, CRITERIA_REG
from ..tree._fit import prepare_tree_data
from ._base import (
    bootstrap_counts,
    draw_seeds,
    fit_members,
    resolve_n_draws,
    warn_if_oob_missing,
)
from ._forest_predict import forest_bitsets, mean_forest_values

#: Parameters a forest passes on to each of its trees.
#: Trees whose predictions are summed together before block sums are added (in order).
_TREES_PER_BLOCK = 8

TREE_PARAMS = ("criterion", "max_depth", "min_samples_split", "min_samples_leaf",
               "min_weight_fraction_leaf", "max_features", "max_leaf_nodes",
               "min_impurity_decrease", "ccp_alpha", "monotonic_cst", "max_bins",
               "categorical_features")


class BaseForest(BaseEstimator):
    """Bootstrap, threading, OOB and warm start shared by the four forest estimators."""

    _tree_class: type[BaseDecisionTree]
    _splitter: str

    _parameter_constraints: dict = {
        **{k: v for k, v in BaseDecisionTree._parameter_constraints.items()
           if k in TREE_PARAMS},
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "bootstrap": ["boolean"],
        "oob_score": ["boolean", callable],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
        "max_samples": [
            None,
            Interval(RealNotInt, 0.0, None, closed="neither"),
            Interval(Integral, 1, None, closed="left"),
        ],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------------ fitting
    def _tree_template(self) -> BaseDecisionTree:
        params = {name: getattr(self, name) for name in TREE_PARAMS}
        if isinstance(self, ClassifierMixin):
            params["class_weight"] = None  # folded into the sample weights by the forest
        return self._tree_class(splitter=self._splitter, **params)

    def _fit_forest(self, X, y_encoded, sample_weight, n_classes: int, criterion: int,
                    class_weight_per_tree: str | None):
        if not self.bootstrap and self.max_samples is not None:
            raise ValueError("`max_sample` cannot be set if `bootstrap=False`. Either switch "
                             "to `bootstrap=True` or set `max_sample=None` (got "
                             f"max_samples={self.max_samples!r}).")
        if self.oob_score and not self.bootstrap:
            raise ValueError("Out of bag estimation only available if bootstrap=True")
        n_samples = X.shape[0]
        self.n_outputs_ = 1 if y_encoded.ndim == 1 else int(y_encoded.shape[1])
        n_draws = (resolve_n_draws(self.max_samples, n_samples, at_most_n_samples=False)
                   if self.bootstrap else n_samples)
        self._n_samples, self._n_samples_bootstrap = n_samples, n_draws

        random_state = check_random_state(self.random_state)
        if not self.warm_start or not hasattr(self, "estimators_"):
            self.estimators_ = []
            self.estimator_seeds_ = np.zeros(0, dtype=np.int64)
        n_existing = len(self.estimators_)
        if self.n_estimators < n_existing:
            raise ValueError(f"n_estimators={self.n_estimators} must be larger or equal to "
                             f"len(estimators_)={n_existing} when warm_start==True")
        # Same seeds as a fresh fit with the larger n_estimators would draw.
        seeds = draw_seeds(random_state, self.n_estimators)
        data_seed = int(seeds[0])  # independent of n_estimators, so warm start bins alike
        new_seeds = seeds[n_existing:]

        if new_seeds.shape[0] == 0:
            warnings.warn("Warm-start fitting without increasing n_estimators does not fit "
                          "new trees.", UserWarning, stacklevel=3)
        else:
            template = self._tree_template()
            # Extra trees read X by column and need no presort (``prepare_tree_data``).
            data = prepare_tree_data(X, self.max_bins, data_seed,
                                     categorical=getattr(self, "is_categorical_", None),
                                     presort_rows=self._splitter != "random")

            template_params = template.get_params()
            classes = self.classes_ if isinstance(self, ClassifierMixin) else None

            def grow(seed: int):
                weight = self._tree_weights(int(seed), sample_weight, y_encoded, n_samples,
                                            n_draws, n_classes, class_weight_per_tree)
                # As in scikit-learn, fractions refer to n_samples and to this tree's weights.
                # The tree's seed is its kernel seed, as the private forest's server grows it
                # (the demo checks both forests agree on the same ciphers).
                est = self._tree_class(**{**template_params, "random_state": int(seed)})
                return est._fit_prepared(data, y_encoded, weight, n_classes, criterion,
                                         missing_mask=self.missing_values_in_feature_mask_,
                                         classes=classes, seed=int(seed))

            new_trees = fit_members(grow, list(new_seeds), self.n_jobs, self.verbose,
                                       desc=type(self).__name__)
            self.estimators_ = self.estimators_ + new_trees
            self.estimator_seeds_ = np.asarray(seeds, dtype=np.int64)
        if self.oob_score:
            self._compute_oob(X, y_encoded, n_draws)
        return self

    # ------------------------------------------------------------------ sub-estimators
    @property
    def estimator(self) -> BaseDecisionTree:
        """The (unfitted) tree every member is grown as: this forest's tree parameters."""
        return self._tree_template()

    @property
    def estimator_(self) -> BaseDecisionTree:
        """Unfitted tree with the forest's tree parameters (as scikit-learn's ``estimator_``)."""
        check_is_fitted(self, "estimators_")
        return self._tree_template()

    def __len__(self) -> int:
        """Number of fitted trees."""
        return len(self.estimators_)

    def __getitem__(self, index):
        """The ``index``-th fitted tree."""
        return self.estimators_[index]

    def __iter__(self):
        """Iterate over the fitted trees."""
        return iter(self.estimators_)

    @property
    def estimators_samples_(self) -> list[np.ndarray]:
        """Training rows of each tree (int32, a row repeated as often as its bootstrap drew
        it; every row once without bootstrap). Recomputed from ``estimator_seeds_``.

        Fitting ``clone(estimators_[i])`` on ``X[estimators_samples_[i]]`` grows the same
        tree as the forest did with bootstrap counts as weights.
        """
        check_is_fitted(self, "estimators_")
        rows = np.arange(self._n_samples, dtype=np.int32)
        if not self.bootstrap:
            return [rows.copy() for _ in self.estimators_]
        return [np.repeat(rows, bootstrap_counts(int(seed), self._n_samples,
                                                 self._n_samples_bootstrap))
                for seed in self.estimator_seeds_[: len(self.estimators_)]]

    def _tree_weights(self, seed, sample_weight, y_encoded, n_samples, n_draws, n_classes,
                      class_weight_per_tree):
        if not self.bootstrap:
            return sample_weight
        counts = bootstrap_counts(seed, n_samples, n_draws)
        weight = sample_weight * counts
        if class_weight_per_tree == "balanced_subsample":
            if y_encoded.ndim == 1:
                return weight * _balanced_weight(y_encoded, counts, n_classes)
            # Several outputs: the product of each output's balanced weight (scikit-learn's).
            for k in range(y_encoded.shape[1]):
                weight = weight * _balanced_weight(y_encoded[:, k], counts, n_classes[k])
        return weight

    def _compute_oob(self, X, y_encoded, n_draws):
        n_samples = X.shape[0]
        width = (int(np.max(self.n_classes_)) if isinstance(self, ClassifierMixin) else 1)
        total = np.zeros((n_samples, self.n_outputs_, width))
        n_models = np.zeros(n_samples, dtype=np.int64)
        for est, seed in zip(self.estimators_, self.estimator_seeds_, strict=True):
            oob = bootstrap_counts(int(seed), n_samples, n_draws) == 0
            if not oob.any():
                continue
            total[oob] += est.tree_.predict(X[oob])[:, :, :width]
            n_models[oob] += 1
        covered = warn_if_oob_missing(n_models)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = total / n_models[:, np.newaxis, np.newaxis]
        mean[~covered] = np.nan
        # A callable oob_score is the metric, called as metric(y_true, y_pred) (scikit-learn's
        # convention; classifiers pass encoded labels); True means accuracy / R^2. Several
        # outputs: scikit-learn's shapes, (n_samples, n_classes, n_outputs) for the decision
        # function and (n_samples, n_outputs) for the prediction.
        if isinstance(self, ClassifierMixin):
            decision = mean[:, 0, :] if self.n_outputs_ == 1 else mean.transpose(0, 2, 1)
            self.oob_decision_function_ = decision
            # Plain accuracy, as the seed's OOB estimate (class weights only shape the trees).
            metric = self.oob_score if callable(self.oob_score) else accuracy_score
            # No row with an out-of-bag tree (tiny data, few trees): no estimate, as bagging.
            self.oob_score_ = float(metric(y_encoded[covered],
                                           np.argmax(decision[covered], axis=1))) \
                if covered.any() else float("nan")
        else:
            prediction = mean[:, 0, 0] if self.n_outputs_ == 1 else mean[:, :, 0]
            self.oob_prediction_ = prediction
            metric = self.oob_score if callable(self.oob_score) else r2_score
            self.oob_score_ = float(metric(y_encoded[covered], prediction[covered])) \
                if covered.any() else float("nan")

    # ------------------------------------------------------------------ prediction
    def _validate_X_predict(self, X, map_unknown: bool = True):
        check_is_fitted(self, "estimators_")
        X = categorical_predict_input(self, X)
        X = tree_X(validate_data(self, X, dtype=np.float64, reset=False, **tree_X_options(X)))
        return map_unknown_categories(self, X) if map_unknown else apply_category_bins(self, X)

    def _mean_tree_values(self, X) -> np.ndarray:
        """Average of the trees' leaf values for the (unvalidated) ``X``, shape (n_samples,
        n_outputs, n_values).

        Dense X: one compiled walk of every tree over blocks of rows, rows in threads
        (``_forest_predict``). Sparse X: trees in threads, each tree's values summed. Either
        way trees are summed in fixed blocks of ``_TREES_PER_BLOCK`` and the block sums
        added in order, so the float result does not depend on ``n_jobs`` or the path.
        """
        check_is_fitted(self, "estimators_")
        trees = [est.tree_ for est in self.estimators_]
        try:
            bitsets = forest_bitsets(trees, getattr(self, "known_categories_", None),
                                     getattr(self, "category_bins_", None))
        except LookupError:
            bitsets = False  # unseen categories must be mapped in X
        X = self._validate_X_predict(X, map_unknown=bitsets is False)
        if not sp.issparse(X):
            return mean_forest_values(trees, np.ascontiguousarray(X), self.n_jobs,
                                      _TREES_PER_BLOCK, bitsets or None)
        n_trees = len(trees)
        blocks = [range(i, min(i + _TREES_PER_BLOCK, n_trees))
                  for i in range(0, n_trees, _TREES_PER_BLOCK)]

        def block_sum(indices):
            total = trees[indices[0]].predict(X)
            for i in indices[1:]:
                total += trees[i].predict(X)
            return total

        parts = map_in_threads(block_sum, blocks, self.n_jobs)
        total = parts[0]
        for part in parts[1:]:
            total += part
        return total / n_trees

    def apply(self, X):
        """Leaf index of every sample in every tree, shape (n_samples, n_estimators)."""
        X = self._validate_X_predict(X)
        return np.column_stack([est.tree_.apply(X) for est in self.estimators_])

    def decision_path(self, X):
        """Nodes each sample visits in every tree.

        Returns
        -------
        indicator : sparse matrix of shape (n_samples, total number of nodes)
            Column ``n_nodes_ptr[i] + j`` is node ``j`` of tree ``i``.
        n_nodes_ptr : ndarray of shape (n_estimators + 1,)
            Where each tree's columns start.
        """
        X = self._validate_X_predict(X)
        paths = [est.tree_.decision_path(X) for est in self.estimators_]
        n_nodes_ptr = np.cumsum([0] + [path.shape[1] for path in paths])
        return sp.hstack(paths).tocsr(), n_nodes_ptr

    @property
    def feature_importances_(self) -> np.ndarray:
        """Mean over trees of each tree's normalised MDI importances, renormalised."""
        check_is_fitted(self, "estimators_")
        per_tree = [est.tree_.compute_feature_importances() for est in self.estimators_
                    if est.tree_.node_count > 1]
        if not per_tree:
            return np.zeros(self.n_features_in_)
        mean = np.mean(per_tree, axis=0)
        return mean / mean.sum()


class ForestClassifierMixin(ClassifierMixin):
    """Classification half of a forest: label encoding, class weights, probability average."""

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Grow the forest on (X, y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NaN allowed.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self
        """
        X, y, sample_weight = validate_fit_arrays(self, X, y, sample_weight, multi_output=True)
        check_classification_targets(y)
        if self.oob_score and y.ndim == 2 and type_of_target(y) == "multiclass-multioutput":
            raise ValueError("The type of target cannot be used to compute OOB estimates. Got "
                             "multiclass-multioutput while only the following are supported: "
                             "continuous, continuous-multioutput, binary, multiclass, "
                             "multilabel-indicator.")
        classes, y_encoded, n_classes = encode_classes(y)
        if (self.warm_start and hasattr(self, "estimators_")
                and self.n_estimators > len(self.estimators_)):
            if not _same_classes(classes, self.classes_):
                raise ValueError("warm_start needs the same classes as the first fit")
        self.classes_ = classes
        self.n_classes_ = n_classes
        per_tree = None
        if self.class_weight == "balanced_subsample":
            per_tree = "balanced_subsample" if self.bootstrap else None
            if not self.bootstrap:
                sample_weight = sample_weight * compute_sample_weight("balanced", y)
        elif self.class_weight is not None:
            sample_weight = sample_weight * compute_sample_weight(self.class_weight, y)
        if not np.any(sample_weight > 0):
            raise ValueError("sample_weight is zero for every sample; nothing to fit")
        return self._fit_forest(X, y_encoded, sample_weight, self.n_classes_,
                                CRITERIA_CLF[self.criterion], per_tree)

    def predict_proba(self, X):
        """Mean of the trees' class proportions, shape (n_samples, n_classes) (a list of
        such arrays, one per output, for multi-output y)."""
        return split_outputs(self._mean_tree_values(X), self.n_classes_)

    def predict_log_proba(self, X):
        """Natural logarithm of ``predict_proba``."""
        with np.errstate(divide="ignore"):
            return log_proba(self.predict_proba(X))

    def predict(self, X):
        """Class with the highest mean probability (per output)."""
        return classes_of_proba(self.predict_proba(X), self.classes_)


class ForestRegressorMixin(RegressorMixin):
    """Regression half of a forest: mean of the trees' predictions."""

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Grow the forest on (X, y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NaN allowed.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self
        """
        X, y, sample_weight = validate_fit_arrays(self, X, y, sample_weight, multi_output=True)
        y = np.asarray(y, dtype=np.float64)
        if self.criterion == "poisson":
            check_poisson_target(y, sum_wording="strictly positive")
        if not np.any(sample_weight > 0):
            raise ValueError("sample_weight is zero for every sample; nothing to fit")
        return self._fit_forest(X, y, sample_weight, 1, CRITERIA_REG[self.criterion], None)

    def predict(self, X):
        """Mean of the trees' predictions, shape (n_samples,) or (n_samples, n_outputs)."""
        values = self._mean_tree_values(X)[:, :, 0]
        return values[:, 0] if self.n_outputs_ == 1 else values


def _balanced_weight(y_encoded: np.ndarray, counts: np.ndarray, n_classes: int) -> np.ndarray:
    """Per-row "balanced" class weight computed on a bootstrap sample (``counts`` draws of
    each row): n_drawn / (n_present_classes * drawn_of_class); 0 for classes not drawn."""
    drawn = np.bincount(y_encoded, weights=counts, minlength=n_classes)
    present = drawn > 0
    class_w = np.zeros(n_classes)
    class_w[present] = counts.sum() / (present.sum() * drawn[present])
    return class_w[y_encoded]


def _same_classes(a, b) -> bool:
    """Whether two ``classes_`` values (arrays, or lists of per-output arrays) agree."""
    if isinstance(a, list) != isinstance(b, list):
        return False
    if not isinstance(a, list):
        return np.array_equal(a, b)
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


_CLF_CONSTRAINTS = {
    "criterion": [StrOptions(set(CRITERIA_CLF))],
    "class_weight": [dict, list, StrOptions({"balanced", "balanced_subsample"}), None],
}
_REG_CONSTRAINTS = {"criterion": [StrOptions(set(CRITERIA_REG))]}

_FOREST_DOC = """
    Parameters
    ----------
    n_estimators : int, default=100
    criterion : str
        As the decision trees: "gini", "entropy"/"log_loss" (classification);
        "squared_error", "absolute_error", "poisson" (regression).
    max_depth, min_samples_split, min_samples_leaf, min_weight_fraction_leaf, max_leaf_nodes, \
min_impurity_decrease, ccp_alpha
        Passed to every tree (see :class:`cipherforest.DecisionTreeClassifier`).
    max_features : int, float, {"sqrt", "log2"} or None
        Features drawn at each split ("sqrt" by default for classification, 1.0 for regression).
    bootstrap : bool
        Grow each tree on a bootstrap sample (N draws with replacement, passed as counts).
    oob_score : bool or callable, default=False
        Score every training sample with the trees that did not draw it (``oob_score_``:
        accuracy / R^2, or ``oob_score(y_true, y_pred)`` when a callable such as
        ``sklearn.metrics.f1_score``); samples drawn by every tree are left out, with a
        warning.
    n_jobs : int, default=None
        Threads growing trees and predicting (-1: all cores). Results do not depend on it.
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0
        Progress bar on stderr when > 0.
    warm_start : bool, default=False
        Add trees to the existing forest when ``n_estimators`` grows.
    class_weight : dict, list of dict, "balanced", "balanced_subsample" or None (classifiers)
        "balanced_subsample" recomputes balanced weights on each tree's bootstrap sample; a
        list holds one dict per output of a 2-D y.
    max_samples : int, float or None, default=None
        Bootstrap size: None n_samples, an int that many draws, a float (may exceed 1)
        ``max(1, int(max_samples * n_samples))`` draws.
    max_bins : int in [2, 255] or None, default=None
        Histogram split finding with features binned once for the whole forest.
    monotonic_cst : array-like of int of shape (n_features,), default=None
        Monotonicity constraint per feature for every tree (see
        :class:`cipherforest.DecisionTreeRegressor`); the forest's mean keeps it.
    categorical_features : array-like of {bool, int, str} or "from_dtype" or None, \
default=None
        Categorical features, split by sets of categories (with ``max_bins``; see
        :class:`cipherforest.DecisionTreeClassifier`).

    Attributes
    ----------
    estimators_ : list of fitted trees
    estimator_seeds_ : ndarray of shape (n_estimators,)
        Seed of each tree; also seeds its bootstrap draw.
    classes_, n_classes_ : classifiers only (lists / arrays per output for a 2-D y)
    n_outputs_ : int
    n_features_in_, feature_names_in_ : as scikit-learn
    feature_importances_ : ndarray of shape (n_features_in_,)
    oob_score_, oob_decision_function_ / oob_prediction_ : with ``oob_score=True``
    is_categorical_, known_categories_, category_bins_, pandas_categories_ : as
        :class:`cipherforest.DecisionTreeClassifier`'s
"""


def _forest_init(self, n_estimators, criterion, max_depth, min_samples_split,
                 min_samples_leaf, min_weight_fraction_leaf, max_features, max_leaf_nodes,
                 min_impurity_decrease, bootstrap, oob_score, n_jobs, random_state, verbose,
                 warm_start, ccp_alpha, max_samples, max_bins, monotonic_cst,
                 categorical_features=None):
    self.n_estimators = n_estimators
    self.criterion = map_friedman_mse(criterion)
    self.max_depth = max_depth
    self.min_samples_split = min_samples_split
    self.min_samples_leaf = min_samples_leaf
    self.min_weight_fraction_leaf = min_weight_fraction_leaf
    self.max_features = max_features
    self.max_leaf_nodes = max_leaf_nodes
    self.min_impurity_decrease = min_impurity_decrease
    self.bootstrap = bootstrap
    self.oob_score = oob_score
    self.n_jobs = n_jobs
    self.random_state = random_state
    self.verbose = verbose
    self.warm_start = warm_start
    self.ccp_alpha = ccp_alpha
    self.max_samples = max_samples
    self.max_bins = max_bins
    self.monotonic_cst = monotonic_cst
    self.categorical_features = categorical_features


@register_model_class
class RandomForestClassifier(ForestClassifierMixin, BaseForest):
    __doc__ = "A random forest classifier, drop-in for scikit-learn's." + _FOREST_DOC
    _tree_class = DecisionTreeClassifier
    _splitter = "best"
    _parameter_constraints = {**BaseForest._parameter_constraints, **_CLF_CONSTRAINTS}

    def __init__(self, n_estimators=100, *, criterion="gini", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, min_weight_fraction_leaf=0.0,
                 max_features="sqrt", max_leaf_nodes=None, min_impurity_decrease=0.0,
                 bootstrap=True, oob_score=False, n_jobs=None, random_state=None, verbose=0,
                 warm_start=False, class_weight=None, ccp_alpha=0.0, max_samples=None,
                 max_bins=None, monotonic_cst=None, categorical_features=None):
        _forest_init(self, n_estimators, criterion, max_depth, min_samples_split,
                     min_samples_leaf, min_weight_fraction_leaf, max_features, max_leaf_nodes,
                     min_impurity_decrease, bootstrap, oob_score, n_jobs, random_state,
                     verbose, warm_start, ccp_alpha, max_samples, max_bins, monotonic_cst,
                     categorical_features)
        self.class_weight = class_weight


@register_model_class
class ExtraTreesClassifier(ForestClassifierMixin, BaseForest):
    __doc__ = ("An extremely randomised trees classifier (one random threshold per drawn "
               "feature), drop-in for scikit-learn's." + _FOREST_DOC)
    _tree_class = DecisionTreeClassifier
    _splitter = "random"
    _parameter_constraints = {**BaseForest._parameter_constraints, **_CLF_CONSTRAINTS}

    def __init__(self, n_estimators=100, *, criterion="gini", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, min_weight_fraction_leaf=0.0,
                 max_features="sqrt", max_leaf_nodes=None, min_impurity_decrease=0.0,
                 bootstrap=False, oob_score=False, n_jobs=None, random_state=None, verbose=0,
                 warm_start=False, class_weight=None, ccp_alpha=0.0, max_samples=None,
                 max_bins=None, monotonic_cst=None, categorical_features=None):
        _forest_init(self, n_estimators, criterion, max_depth, min_samples_split,
                     min_samples_leaf, min_weight_fraction_leaf, max_features, max_leaf_nodes,
                     min_impurity_decrease, bootstrap, oob_score, n_jobs, random_state,
                     verbose, warm_start, ccp_alpha, max_samples, max_bins, monotonic_cst,
                     categorical_features)
        self.class_weight = class_weight


@register_model_class
class RandomForestRegressor(ForestRegressorMixin, BaseForest):
    __doc__ = "A random forest regressor, drop-in for scikit-learn's." + _FOREST_DOC
    _tree_class = DecisionTreeRegressor
    _splitter = "best"
    _parameter_constraints = {**BaseForest._parameter_constraints, **_REG_CONSTRAINTS}

    def __init__(self, n_estimators=100, *, criterion="squared_error", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, min_weight_fraction_leaf=0.0,
                 max_features=1.0, max_leaf_nodes=None, min_impurity_decrease=0.0,
                 bootstrap=True, oob_score=False, n_jobs=None, random_state=None, verbose=0,
                 warm_start=False, ccp_alpha=0.0, max_samples=None, max_bins=None,
                 monotonic_cst=None, categorical_features=None):
        _forest_init(self, n_estimators, criterion, max_depth, min_samples_split,
                     min_samples_leaf, min_weight_fraction_leaf, max_features, max_leaf_nodes,
                     min_impurity_decrease, bootstrap, oob_score, n_jobs, random_state,
                     verbose, warm_start, ccp_alpha, max_samples, max_bins, monotonic_cst,
                     categorical_features)


@register_model_class
class ExtraTreesRegressor(ForestRegressorMixin, BaseForest):
    __doc__ = ("An extremely randomised trees regressor, drop-in for scikit-learn's."
               + _FOREST_DOC)
    _tree_class = DecisionTreeRegressor
    _splitter = "random"
    _parameter_constraints = {**BaseForest._parameter_constraints, **_REG_CONSTRAINTS}

    def __init__(self, n_estimators=100, *, criterion="squared_error", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, min_weight_fraction_leaf=0.0,
                 max_features=1.0, max_leaf_nodes=None, min_impurity_decrease=0.0,
                 bootstrap=False, oob_score=False, n_jobs=None, random_state=None, verbose=0,
                 warm_start=False, ccp_alpha=0.0, max_samples=None, max_bins=None,
                 monotonic_cst=None, categorical_features=None):
        _forest_init(self, n_estimators, criterion, max_depth, min_samples_split,
                     min_samples_leaf, min_weight_fraction_leaf, max_features, max_leaf_nodes,
                     min_impurity_decrease, bootstrap, oob_score, n_jobs, random_state,
                     verbose, warm_start, ccp_alpha, max_samples, max_bins, monotonic_cst,
                     categorical_features)
