"""Decision tree estimators with the scikit-learn API.

The classes validate parameters and arrays and hand the numeric work to ``_fit`` (growth),
``_tree`` (prediction walks) and ``_pruning`` (cost-complexity pruning).
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    check_is_fitted,
    check_random_state,
    column_or_1d,
    validate_data,
)

from .._registry import register_model_class
from .._sklearn_compat import Interval, RealNotInt, StrOptions, _check_sample_weight, _fit_context
from ._categorical_input import (
    categorical_predict_input,
    check_categorical_values,
    map_unknown_categories,
    resolve_categorical_fit,
)
from ._common import CRITERIA_CLF, CRITERIA_REG, MAX_BINS, SPLITTERS
from ._fit import GrowthParams, TreeData, fit_tree_arrays, grow_tree_on
from ._pruning import cost_complexity_pruning_path as _pruning_path
from ._pruning import prune_tree
from ._sparse_input import canonical_sparse, missing_mask

_SEED_BOUND = np.iinfo(np.int32).max


def resolve_max_features(max_features, n_features: int) -> int:
    """Number of features drawn per split, from scikit-learn's ``max_features`` spellings."""
    if max_features is None:
        return n_features
    if isinstance(max_features, str):
        if max_features == "sqrt":
            return max(1, int(np.sqrt(n_features)))
        return max(1, int(np.log2(n_features)))
    if isinstance(max_features, Integral):
        if max_features > n_features:
            raise ValueError(f"max_features={max_features} is larger than the number of "
                             f"features ({n_features})")
        return int(max_features)
    return max(1, int(max_features * n_features))


def map_friedman_mse(criterion):
    """scikit-learn 1.9's handling of the deprecated ``criterion="friedman_mse"``: it warns
    (``FutureWarning``) at construction and becomes ``"squared_error"``, which ranks splits the
    same way."""
    if isinstance(criterion, str) and criterion == "friedman_mse":
        warnings.warn('Value `"friedman_mse"` for `criterion` is deprecated and will be removed '
                      'in 1.11 (as in scikit-learn). It maps to `"squared_error"`, which gives '
                      'the same splits. Use `criterion="squared_error"` to remove this '
                      "warning.", FutureWarning, stacklevel=3)
        return "squared_error"
    return criterion


def tree_X_options(X) -> dict:
    """``validate_data`` options for the X of a tree model: scipy sparse matrices and arrays
    are accepted (as CSC/CSR, made canonical by :func:`tree_X`); NaN marks a missing value
    only in dense X, as in scikit-learn (a sparse X with NaN is rejected)."""
    return {"accept_sparse": ["csc", "csr"],
            "ensure_all_finite": True if sp.issparse(X) else "allow-nan"}


def tree_X(X):
    """A validated X as the trees read it: dense X as it is, sparse X as canonical CSR
    (``_sparse_input.canonical_sparse``: sorted indices, duplicates summed, no stored
    zeros), never densified. The fitted model is the one ``X.toarray()`` gives."""
    return canonical_sparse(X) if sp.issparse(X) else X


def validate_fit_arrays(estimator, X, y, sample_weight, multi_output: bool = False):
    """Validate training arrays for a tree model (and set ``n_features_in_``,
    ``feature_names_in_`` and ``missing_values_in_feature_mask_`` on ``estimator``).

    Returns float64 ``X`` (NaN allowed, inf rejected; sparse X as canonical CSR), ``y`` (1-D,
    or 2-D with several columns when ``multi_output``; a single column becomes 1-D) and
    float64 non-negative ``sample_weight``.
    """
    if sp.issparse(y):
        raise ValueError("sparse multilabel-indicator for y is not supported.")
    X, categorical = resolve_categorical_fit(estimator, X)
    X, y = validate_data(estimator, X, y, dtype=np.float64, multi_output=True,
                         **tree_X_options(X))
    X = check_categorical_values(estimator, tree_X(X), categorical)
    estimator.missing_values_in_feature_mask_ = missing_mask(X)
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = column_or_1d(y, warn=True)
    elif y.ndim != 1 and not (multi_output and y.ndim == 2):
        raise ValueError(f"{type(estimator).__name__} supports a single output; y has shape "
                         f"{y.shape}")
    sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                         ensure_non_negative=True)
    return X, y, sample_weight


def _n_outputs(y: np.ndarray) -> int:
    return int(y.shape[1]) if np.ndim(y) == 2 else 1


def resolve_monotonic_cst(monotonic_cst, n_features: int, n_outputs: int, n_classes,
                          criterion: int, is_classifier: bool) -> tuple[int, ...] | None:
    """Validate ``monotonic_cst`` as scikit-learn does; return the per-feature constraints
    the growth kernel applies (None when there are none).

    Classifiers constrain the positive class's probability, the kernel the proportion of
    class 0, so their signs flip (scikit-learn's convention).
    """
    if monotonic_cst is None:
        return None
    if n_outputs > 1:
        raise ValueError("Monotonicity constraints are not supported with multiple outputs.")
    cst = np.asarray(monotonic_cst)
    if cst.ndim != 1 or cst.shape[0] != n_features:
        raise ValueError(f"monotonic_cst has shape {cst.shape[0] if cst.ndim else cst.shape} "
                         f"but the input data X has {n_features} features.")
    if not np.all(np.isin(cst, (-1, 0, 1))):
        raise ValueError("monotonic_cst must be None or an array-like of -1, 0 or 1, but got "
                         f"{np.unique(cst)}")
    cst = cst.astype(np.int64)
    if is_classifier:
        if int(np.max(n_classes)) > 2:
            raise ValueError("Monotonicity constraints are not supported with multiclass "
                             "classification")
        cst = -cst
    return tuple(int(c) for c in cst) if cst.any() else None


def check_poisson_target(y, sum_wording: str) -> None:
    """Raise scikit-learn's errors for a Poisson target with a negative value or a sum that is
    not positive (``sum_wording``: "positive" as its trees say, "strictly positive" as its
    forests). Targets that are not numbers are left to the array validation."""
    try:
        values = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        return
    if np.any(values < 0):
        raise ValueError("Some value(s) of y are negative which is not allowed for Poisson "
                         "regression.")
    if np.sum(values) <= 0:
        raise ValueError(f"Sum of y is not {sum_wording} which is necessary for Poisson "
                         "regression.")


def encode_classes(y: np.ndarray):
    """``(classes_, y_encoded, n_classes_)`` of 1-D ``y`` (an array, its class indices, an
    int) or of 2-D ``y`` (a list of per-output arrays, an int matrix, an intp array), as
    scikit-learn's classifiers store them."""
    if y.ndim == 1:
        classes, encoded = np.unique(y, return_inverse=True)
        return classes, encoded, int(classes.shape[0])
    classes = []
    encoded = np.zeros(y.shape, dtype=np.intp)
    for k in range(y.shape[1]):
        classes_k, encoded[:, k] = np.unique(y[:, k], return_inverse=True)
        classes.append(classes_k)
    return classes, encoded, np.array([c.shape[0] for c in classes], dtype=np.intp)


def split_outputs(values: np.ndarray, n_classes):
    """Class proportions ``(n_samples, n_outputs, max_n_classes)`` as ``predict_proba``
    returns them: one array for a single output, else a list with one per output."""
    if np.ndim(n_classes) == 0:
        return values[:, 0, :n_classes]
    return [values[:, k, :n] for k, n in enumerate(n_classes)]


def log_proba(proba):
    """Natural logarithm of ``proba`` (an array or a list of per-output arrays)."""
    if isinstance(proba, list):
        return [np.log(p) for p in proba]
    return np.log(proba)


def classes_of_proba(proba, classes):
    """Most probable class of each row (ties: the first class); ``proba`` and ``classes``
    as ``predict_proba`` and ``classes_`` (lists for several outputs)."""
    if not isinstance(proba, list):
        return classes.take(np.argmax(proba, axis=1))
    return np.column_stack([c.take(np.argmax(p, axis=1))
                            for p, c in zip(proba, classes, strict=True)])


class BaseDecisionTree(BaseEstimator):
    """Parameters and fit/predict plumbing shared by the classifier and the regressor."""

    _parameter_constraints: dict = {
        "splitter": [StrOptions(set(SPLITTERS))],
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "min_samples_split": [
            Interval(Integral, 2, None, closed="left"),
            Interval(RealNotInt, 0.0, 1.0, closed="right"),
        ],
        "min_samples_leaf": [
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0.0, 1.0, closed="neither"),
        ],
        "min_weight_fraction_leaf": [Interval(Real, 0.0, 0.5, closed="both")],
        "max_features": [
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0.0, 1.0, closed="right"),
            StrOptions({"sqrt", "log2"}),
            None,
        ],
        "random_state": ["random_state"],
        "max_leaf_nodes": [Interval(Integral, 2, None, closed="left"), None],
        "min_impurity_decrease": [Interval(Real, 0.0, None, closed="left")],
        "ccp_alpha": [Interval(Real, 0.0, None, closed="left")],
        "max_bins": [Interval(Integral, 2, MAX_BINS, closed="both"), None],
        "monotonic_cst": ["array-like", None],
        "categorical_features": ["array-like", StrOptions({"from_dtype"}), None],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------------ fitting
    def _growth_params(self, criterion: int, n_samples: int, total_weight: float,
                       n_features: int, n_outputs: int = 1, n_classes=1) -> GrowthParams:
        if isinstance(self.min_samples_leaf, Integral):
            min_samples_leaf = int(self.min_samples_leaf)
        else:
            min_samples_leaf = int(np.ceil(self.min_samples_leaf * n_samples))
        if isinstance(self.min_samples_split, Integral):
            min_samples_split = int(self.min_samples_split)
        else:
            min_samples_split = max(2, int(np.ceil(self.min_samples_split * n_samples)))
        min_samples_split = max(min_samples_split, 2 * min_samples_leaf)
        return GrowthParams(
            criterion=criterion,
            is_random=self.splitter == "random",
            max_bins=self.max_bins,
            max_features=resolve_max_features(self.max_features, n_features),
            max_depth=-1 if self.max_depth is None else int(self.max_depth),
            min_samples_split=min_samples_split,
            min_samples_leaf=min_samples_leaf,
            min_weight_leaf=float(self.min_weight_fraction_leaf * total_weight),
            min_impurity_decrease=float(self.min_impurity_decrease),
            max_leaf_nodes=-1 if self.max_leaf_nodes is None else int(self.max_leaf_nodes),
            monotonic_cst=resolve_monotonic_cst(
                getattr(self, "monotonic_cst", None), n_features, n_outputs, n_classes,
                criterion, isinstance(self, ClassifierMixin)),
        )

    def _validate_X_y(self, X, y, sample_weight):
        if sp.issparse(y):  # a TypeError, as scikit-learn's trees raise (forests: ValueError)
            raise TypeError("A sparse y (e.g. a sparse multilabel-indicator matrix) is not "
                            "supported; pass y as a dense array.")
        return validate_fit_arrays(self, X, y, sample_weight, multi_output=True)

    def _fit_encoded(self, X, y_encoded, sample_weight, n_classes: int, criterion: int):
        if not np.any(sample_weight > 0):
            raise ValueError("sample_weight is zero for every sample; nothing to fit")
        params = self._growth_params(criterion, X.shape[0], float(sample_weight.sum()),
                                     X.shape[1], _n_outputs(y_encoded), n_classes)
        self.max_features_ = params.max_features
        seed = int(check_random_state(self.random_state).randint(_SEED_BOUND))
        tree = fit_tree_arrays(X, y_encoded, sample_weight, n_classes, params, seed,
                               getattr(self, "is_categorical_", None))
        if self.ccp_alpha > 0.0:
            tree = prune_tree(tree, float(self.ccp_alpha))
        self.tree_ = tree
        self.n_outputs_ = tree.n_outputs
        return self

    def _fit_prepared(self, data: TreeData, y_encoded: np.ndarray, sample_weight: np.ndarray,
                      n_classes: int, criterion: int, *, missing_mask: np.ndarray,
                      classes: np.ndarray | None = None, n_samples: int | None = None,
                      seed: int | None = None):
        """Grow this unfitted tree on training data prepared once for many trees.

        The ensembles' shared path: ``data`` (presorted or binned by ``prepare_tree_data``)
        is read-only and shared; each tree brings its own ``sample_weight`` (bootstrap
        counts, boosting weights; rows of weight 0 are left out). The fitted attributes are
        those ``fit`` sets. Fractions in ``min_samples_leaf`` / ``min_samples_split`` refer to
        ``n_samples`` (default: the rows of ``data``); ``seed`` seeds the growth kernel
        (default: drawn from ``random_state`` as ``fit`` draws it).
        """
        params = self._growth_params(criterion, data.n_samples if n_samples is None
                                     else n_samples, float(sample_weight.sum()),
                                     data.n_features, _n_outputs(y_encoded), n_classes)
        if seed is None:
            seed = int(check_random_state(self.random_state).randint(_SEED_BOUND))
        tree = grow_tree_on(data, y_encoded, sample_weight, n_classes, params, int(seed))
        if self.ccp_alpha > 0.0:
            tree = prune_tree(tree, float(self.ccp_alpha))
        self.tree_ = tree
        self.n_features_in_ = data.n_features
        self.n_outputs_ = tree.n_outputs
        self.max_features_ = params.max_features
        self.missing_values_in_feature_mask_ = missing_mask
        if classes is not None:
            self.classes_ = classes
            self.n_classes_ = (int(n_classes) if np.ndim(n_classes) == 0
                               else np.asarray(n_classes, dtype=np.intp))
        return self

    # ------------------------------------------------------------------ prediction
    def _validate_X_predict(self, X):
        check_is_fitted(self)
        X = categorical_predict_input(self, X)
        return map_unknown_categories(self, tree_X(validate_data(
            self, X, dtype=np.float64, reset=False, **tree_X_options(X))))

    def apply(self, X):
        """Index of the leaf that each sample ends up in.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_leaves : ndarray of shape (n_samples,)
        """
        X = self._validate_X_predict(X)
        return self.tree_.apply(X)

    def decision_path(self, X):
        """Indicator matrix of the nodes each sample goes through.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        indicator : sparse matrix of shape (n_samples, n_nodes)
            Non-zero entry (i, j) means sample i visits node j.
        """
        X = self._validate_X_predict(X)
        return self.tree_.decision_path(X)

    def get_depth(self) -> int:
        """Depth of the tree: the longest root-to-leaf path (root alone: 0)."""
        check_is_fitted(self)
        return self.tree_.max_depth

    def get_n_leaves(self) -> int:
        """Number of leaves of the tree."""
        check_is_fitted(self)
        return self.tree_.n_leaves

    @property
    def feature_importances_(self) -> np.ndarray:
        """Normalised total impurity decrease brought by each feature (MDI)."""
        check_is_fitted(self)
        return self.tree_.compute_feature_importances()

    def cost_complexity_pruning_path(self, X, y, sample_weight=None):
        """Effective alphas and total leaf impurities of minimal cost-complexity pruning.

        Grows the full tree with this estimator's parameters (``ccp_alpha`` ignored) and
        returns the pruning sequence, as scikit-learn does.

        Returns
        -------
        ccp_path : sklearn.utils.Bunch
            ``ccp_alphas`` (increasing) and ``impurities`` (total leaf impurity of each
            pruned subtree).
        """
        from sklearn.base import clone
        from sklearn.utils import Bunch

        est = clone(self).set_params(ccp_alpha=0.0)
        est.fit(X, y, sample_weight=sample_weight)
        return Bunch(**_pruning_path(est.tree_))


@register_model_class
class DecisionTreeClassifier(ClassifierMixin, BaseDecisionTree):
    """A CART decision tree classifier, drop-in for scikit-learn's.

    Parameters
    ----------
    criterion : {"gini", "entropy", "log_loss"}, default="gini"
        Impurity measure; "log_loss" is an alias of "entropy" (base-2 Shannon entropy).
    splitter : {"best", "random"}, default="best"
        "best" evaluates every candidate threshold; "random" one uniform threshold per feature.
    max_depth : int, default=None
        Maximum depth; None grows until leaves are pure or other rules stop.
    min_samples_split : int or float, default=2
        Minimum samples (or fraction of samples) a node needs to be split.
    min_samples_leaf : int or float, default=1
        Minimum samples (or fraction) in each child of a split.
    min_weight_fraction_leaf : float, default=0.0
        Minimum fraction of the total sample weight in each child.
    max_features : int, float, {"sqrt", "log2"} or None, default=None
        Features drawn (without replacement) at each split; drawing continues past constant
        features until this many non-constant ones were evaluated.
    random_state : int, RandomState instance or None, default=None
        Seeds feature draws, random thresholds and binning.
    max_leaf_nodes : int, default=None
        Grow best-first (largest impurity decrease first) up to this many leaves.
    min_impurity_decrease : float, default=0.0
        Split only if the weighted impurity decrease is at least this.
    class_weight : dict, list of dict, "balanced" or None, default=None
        Weights multiplied into ``sample_weight``; for multi-output y a list of one dict per
        output (their weights multiply), as scikit-learn.
    ccp_alpha : float, default=0.0
        Minimal cost-complexity pruning parameter.
    monotonic_cst : array-like of int of shape (n_features,), default=None
        Monotonicity constraint per feature: 1 increasing, -1 decreasing, 0 none (on the
        prediction; for classifiers on the positive class's probability, binary only).
        Single output, exact finder (``max_bins=None``). Splits
        on a constrained feature must keep the children ordered and within the bounds
        inherited from their ancestors, and leaf values are clipped to them (scikit-learn's
        method).
    max_bins : int in [2, 255] or None, default=None
        None finds exact splits (all midpoints); an int bins each feature into at most this
        many quantile bins once per fit and finds splits on histograms, much faster on large
        data.
    categorical_features : array-like of {bool, int, str} or "from_dtype" or None, \
default=None
        Categorical features (histogram finder, ``max_bins`` set, dense X): a boolean mask,
        feature indices, feature names, or ``"from_dtype"`` for the pandas columns of
        ``category`` dtype. Their values are categories — non-negative integers (negative:
        missing), or pandas categories — and a split sends a set of categories left, found
        by sorting the node's categories by their target statistic. A column with a
        category of ``max_bins`` or more gets category bins: its ``max_bins - 1`` most
        frequent categories a bin each, the rest one shared bin (``category_bins_``).
        Categories not seen at fit are treated as missing at predict. None (default, as
        scikit-learn's trees): every feature is numeric.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,), or a list of n_outputs such arrays
    n_classes_ : int, or ndarray of shape (n_outputs,)
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when X has string column names.
    n_outputs_ : int
        Number of outputs (columns of a 2-D y).
    max_features_ : int
    missing_values_in_feature_mask_ : ndarray of shape (n_features_in_,)
        Which features had NaN in the training data.
    tree_ : Tree
        The fitted tree as flat arrays.
    feature_importances_ : ndarray of shape (n_features_in_,)
    is_categorical_ : ndarray of shape (n_features_in_,) or None
        Which features are categorical (None: none is).
    known_categories_ : list of (ndarray or None) or None
        The category values each categorical feature had at fit.
    category_bins_ : list of (ndarray or None) or None
        Per categorical feature: None when category ``c`` is bin ``c`` (every category
        below ``max_bins``), else the sorted categories with a bin of their own (``[i]`` is
        bin ``i``; the other categories seen at fit share bin ``len(category_bins_[j])``).
        None when no feature is categorical.
    pandas_categories_ : list of (ndarray or None) or None
        The pandas categories of each feature read from a ``category`` column.
    """

    _parameter_constraints: dict = {
        **BaseDecisionTree._parameter_constraints,
        "criterion": [StrOptions(set(CRITERIA_CLF))],
        "class_weight": [dict, list, StrOptions({"balanced"}), None],
    }

    def __init__(self, *, criterion="gini", splitter="best", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, min_weight_fraction_leaf=0.0,
                 max_features=None, random_state=None, max_leaf_nodes=None,
                 min_impurity_decrease=0.0, class_weight=None, ccp_alpha=0.0,
                 monotonic_cst=None, max_bins=None, categorical_features=None):
        self.criterion = criterion
        self.splitter = splitter
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_weight_fraction_leaf = min_weight_fraction_leaf
        self.max_features = max_features
        self.random_state = random_state
        self.max_leaf_nodes = max_leaf_nodes
        self.min_impurity_decrease = min_impurity_decrease
        self.class_weight = class_weight
        self.ccp_alpha = ccp_alpha
        self.monotonic_cst = monotonic_cst
        self.max_bins = max_bins
        self.categorical_features = categorical_features

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Build the tree from the training set (X, y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows; NaN is allowed (each split learns where NaN goes).
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Class labels (one column per output).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; None gives every sample weight 1.

        Returns
        -------
        self : DecisionTreeClassifier
        """
        X, y, sample_weight = self._validate_X_y(X, y, sample_weight)
        check_classification_targets(y)
        self.classes_, y_encoded, self.n_classes_ = encode_classes(y)
        if self.class_weight is not None:
            sample_weight = sample_weight * compute_sample_weight(self.class_weight, y)
        return self._fit_encoded(X, y_encoded, sample_weight, self.n_classes_,
                                 CRITERIA_CLF[self.criterion])

    def predict_proba(self, X):
        """Class probabilities: the class proportions of each sample's leaf.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), or a list of n_outputs such arrays
        """
        X = self._validate_X_predict(X)
        return split_outputs(self.tree_.predict(X), self.n_classes_)

    def predict_log_proba(self, X):
        """Natural logarithm of ``predict_proba`` (``-inf`` for empty classes)."""
        with np.errstate(divide="ignore"):
            return log_proba(self.predict_proba(X))

    def predict(self, X):
        """Majority class of each sample's leaf (ties: the first class in ``classes_``);
        shape (n_samples,) or (n_samples, n_outputs)."""
        X = self._validate_X_predict(X)
        if self.n_outputs_ > 1:
            return classes_of_proba(split_outputs(self.tree_.predict(X), self.n_classes_),
                                    self.classes_)
        # One output: each leaf's majority class once, not the argmax of every row's
        # proportions (the same class: the row's proportions are its leaf's).
        return self.classes_.take(self.tree_._majority_class().take(self.tree_.apply(X)))


@register_model_class
class DecisionTreeRegressor(RegressorMixin, BaseDecisionTree):
    """A CART decision tree regressor, drop-in for scikit-learn's.

    Parameters
    ----------
    criterion : {"squared_error", "absolute_error", "poisson"}, default="squared_error"
        "squared_error" minimises the weighted variance (leaves predict the mean);
        "absolute_error" the mean absolute deviation from the weighted median (leaves predict
        the weighted median; exact split finder only); "poisson" the half Poisson deviance
        (targets must be non-negative with a positive sum). With several outputs the
        impurity is the mean over outputs.
    splitter, max_depth, min_samples_split, min_samples_leaf, min_weight_fraction_leaf, \
max_features, random_state, max_leaf_nodes, min_impurity_decrease, ccp_alpha, \
monotonic_cst, max_bins, categorical_features
        As in :class:`DecisionTreeClassifier`.

    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
    n_outputs_ : int
    max_features_ : int
    tree_ : Tree
    feature_importances_ : ndarray of shape (n_features_in_,)
    """

    _parameter_constraints: dict = {
        **BaseDecisionTree._parameter_constraints,
        "criterion": [StrOptions(set(CRITERIA_REG))],
    }

    def __init__(self, *, criterion="squared_error", splitter="best", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, min_weight_fraction_leaf=0.0,
                 max_features=None, random_state=None, max_leaf_nodes=None,
                 min_impurity_decrease=0.0, ccp_alpha=0.0, monotonic_cst=None,
                 max_bins=None, categorical_features=None):
        self.criterion = map_friedman_mse(criterion)
        self.splitter = splitter
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_weight_fraction_leaf = min_weight_fraction_leaf
        self.max_features = max_features
        self.random_state = random_state
        self.max_leaf_nodes = max_leaf_nodes
        self.min_impurity_decrease = min_impurity_decrease
        self.ccp_alpha = ccp_alpha
        self.monotonic_cst = monotonic_cst
        self.max_bins = max_bins
        self.categorical_features = categorical_features

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = self.criterion == "poisson"
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Build the tree from the training set (X, y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows; NaN is allowed.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Real targets (finite).
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : DecisionTreeRegressor
        """
        if self.criterion == "poisson":
            # Before the shape checks, as scikit-learn (its tests rely on the order).
            check_poisson_target(y, sum_wording="positive")
        X, y, sample_weight = self._validate_X_y(X, y, sample_weight)
        y = np.asarray(y, dtype=np.float64)
        return self._fit_encoded(X, y, sample_weight, 1, CRITERIA_REG[self.criterion])

    def predict(self, X):
        """Mean target of each sample's leaf.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,) or (n_samples, n_outputs)
        """
        X = self._validate_X_predict(X)
        values = self.tree_.predict(X)[:, :, 0]
        return values[:, 0] if self.n_outputs_ == 1 else values


@register_model_class
class ExtraTreeClassifier(DecisionTreeClassifier):
    """An extremely randomised tree classifier, drop-in for scikit-learn's.

    A :class:`DecisionTreeClassifier` whose defaults are ``splitter="random"`` (one uniform
    random threshold per drawn feature) and ``max_features="sqrt"``; meant as the member of
    an ensemble. Parameters and attributes are those of :class:`DecisionTreeClassifier`.
    """

    def __init__(self, *, criterion="gini", splitter="random", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, min_weight_fraction_leaf=0.0,
                 max_features="sqrt", random_state=None, max_leaf_nodes=None,
                 min_impurity_decrease=0.0, class_weight=None, ccp_alpha=0.0,
                 monotonic_cst=None, max_bins=None, categorical_features=None):
        super().__init__(criterion=criterion, splitter=splitter, max_depth=max_depth,
                         min_samples_split=min_samples_split,
                         min_samples_leaf=min_samples_leaf,
                         min_weight_fraction_leaf=min_weight_fraction_leaf,
                         max_features=max_features, random_state=random_state,
                         max_leaf_nodes=max_leaf_nodes,
                         min_impurity_decrease=min_impurity_decrease,
                         class_weight=class_weight, ccp_alpha=ccp_alpha,
                         monotonic_cst=monotonic_cst, max_bins=max_bins,
                         categorical_features=categorical_features)


@register_model_class
class ExtraTreeRegressor(DecisionTreeRegressor):
    """An extremely randomised tree regressor, drop-in for scikit-learn's.

    A :class:`DecisionTreeRegressor` whose defaults are ``splitter="random"`` and
    ``max_features=1.0``. Parameters and attributes are those of
    :class:`DecisionTreeRegressor`.
    """

    def __init__(self, *, criterion="squared_error", splitter="random", max_depth=None,
                 min_samples_split=2, min_samples_leaf=1, min_weight_fraction_leaf=0.0,
                 max_features=1.0, random_state=None, max_leaf_nodes=None,
                 min_impurity_decrease=0.0, ccp_alpha=0.0, monotonic_cst=None,
                 max_bins=None, categorical_features=None):
        super().__init__(criterion=criterion, splitter=splitter, max_depth=max_depth,
                         min_samples_split=min_samples_split,
                         min_samples_leaf=min_samples_leaf,
                         min_weight_fraction_leaf=min_weight_fraction_leaf,
                         max_features=max_features, random_state=random_state,
                         max_leaf_nodes=max_leaf_nodes,
                         min_impurity_decrease=min_impurity_decrease, ccp_alpha=ccp_alpha,
                         monotonic_cst=monotonic_cst, max_bins=max_bins,
                         categorical_features=categorical_features)
