"""Gradient boosting of regression trees with the scikit-learn API.

The seed's algorithm, literally::

    H <- H0                                   (loss.init_raw: mean, median, quantile, prior)
    repeat:
        r_i <- -dl(y_i, H(x_i)) / dH          (loss.negative_gradient)
        h   <- regression tree fitted to r    (squared-error criterion)
        each leaf's value <- line search      (loss.leaf_values: closed form / Newton step)
        H   <- H + learning_rate * h

The feature matrix is prepared ONCE per fit (``prepare_tree_data``: presorted for the exact
finder, binned for ``max_bins``); every round grows its tree(s) on that shared data, weighted
by the sample weights (times the in-bag mask of stochastic boosting). The grower leaves the
in-bag rows partitioned by leaf, so each row's leaf is read off the partition instead of
walking the new tree again (``prepare_growth(..., return_leaves=True)``). On one thread, a
round's trees grow in one batch (``TreeGrowth``: the kernels back to back, then the trees
finished).

The fitted model is its public attributes: ``init_`` (the raw ``H0``, one value per tree of a
round), ``estimators_`` (a list of rounds, each a list of fitted
:class:`~cipherforest.tree.DecisionTreeRegressor` whose leaf values are the line-search
steps) and the parameters (``learning_rate``, ``loss``, ``alpha``).
"""

from __future__ import annotations

import dataclasses
import warnings
from concurrent.futures import ThreadPoolExecutor
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.model_selection import train_test_split
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    check_is_fitted,
    check_random_state,
    column_or_1d,
    validate_data,
)

from .._parallel import effective_n_jobs
from .._progress import ProgressBar
from .._registry import register_model_class
from .._sklearn_compat import (
    HasMethods,
    Interval,
    RealNotInt,
    StrOptions,
    _check_sample_weight,
    _fit_context,
)
from ..tree._categorical_input import (
    apply_category_bins,
    categorical_predict_input,
    check_categorical_values,
    map_unknown_categories,
    resolve_categorical_fit,
)
from ..tree._classes import DecisionTreeRegressor, tree_X, tree_X_options
from ..tree._common import (
    CRITERION_SQUARED_ERROR,
    MAX_BINS,
    TREE_LEAF,
)
from ..tree._fit import TreeGrowth, positive_rows, prepare_growth, prepare_tree_data
from ..tree._histogram import unit_weights
from ..tree._pruning import prune_tree
from ..tree._tree import Tree
from ..tree._weights import kernel_weights, unit_weight_view
from ._base import SEED_BOUND, draw_seeds, seeded_stream
from ._gb_losses import (
    CLASSIFICATION_LOSSES,
    REGRESSION_LOSSES,
    class_weight_sums,
    make_classification_loss,
    make_regression_loss,
    newton_tree_targets,
)
from ._gb_predict import PackedEnsemble, leaf_steps, pack_ensemble, raw_predict
from ._round_threads import RoundThreads

__all__ = ["GradientBoostingClassifier", "GradientBoostingRegressor"]


#: Memory a round's batch of trees may hold beyond one tree's (row orders and partition
#: scratch, up to 16 bytes a row each); above it the classes go in several batches.
BATCHED_ROUND_MAX_BYTES = 32 << 20
#: ``leaf_steps``' "no line search" and "no rows" (the grown values stand; no row is added).
_NO_LEAF_VALUES = np.zeros(0)
_NO_LEAVES = np.zeros(0, dtype=np.int32)


def _constant_tree(n_features: int, value: float) -> Tree:
    """A single-leaf tree (a round whose in-bag rows all have zero weight)."""
    arrays = {"children_left": [TREE_LEAF], "children_right": [TREE_LEAF], "feature": [-2],
              "threshold": [-2.0], "impurity": [0.0], "n_node_samples": [0],
              "weighted_n_node_samples": [0.0], "missing_go_to_left": [0],
              "value": np.full((1, 1, 1), value)}
    return Tree(n_features, np.array([1]), {k: np.asarray(v) for k, v in arrays.items()})


def _add_tree(raw_k: np.ndarray, tree: Tree, X: np.ndarray, learning_rate: float) -> None:
    """``raw_k += learning_rate * h(X)`` in place."""
    raw_k += learning_rate * tree.value[tree.apply(X), 0, 0]


# ----------------------------------------------------------------------------- estimators
def _stage_array(stages: list) -> np.ndarray:
    """Rounds of trees as scikit-learn's ``estimators_``: an object array of shape
    (n_rounds, trees per round)."""
    width = len(stages[0]) if stages else 0
    out = np.empty((len(stages), width), dtype=object)
    for i, stage in enumerate(stages):
        out[i, :] = stage
    return out


def _is_estimator(init) -> bool:
    """Whether ``init`` / ``init_`` is an estimator (not None, "zero" or an ``H0`` array)."""
    return hasattr(init, "fit")


def _fit_init_estimator(estimator, X, y, sample_weight, weights_given: bool):
    """Fit the ``init`` estimator on the (encoded) training targets, with the sample weights
    when some were given; one that does not take them is refused, as in scikit-learn."""
    if not weights_given:
        fitted = estimator.fit(X, y)
        return fitted if fitted is not None else estimator
    refused = ValueError(f"The initial estimator {type(estimator).__name__} does not support "
                         "sample weights.")
    try:
        fitted = estimator.fit(X, y, sample_weight=sample_weight)
    except TypeError as error:  # fit() got an unexpected keyword argument 'sample_weight'
        if "sample_weight" in str(error):
            raise refused from error
        raise
    except ValueError as error:  # a Pipeline wants step__sample_weight
        if "stepname__parameter" in str(error):
            raise refused from error
        raise
    return fitted if fitted is not None else estimator


class BaseGradientBoosting(BaseEstimator):
    """Fit loop, staged prediction and fitted state shared by classifier and regressor."""

    _parameter_constraints: dict = {
        "learning_rate": [Interval(Real, 0.0, None, closed="left")],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "subsample": [Interval(Real, 0.0, 1.0, closed="right")],
        "criterion": [StrOptions({"squared_error", "friedman_mse", "deprecated"})],
        "min_samples_split": [
            Interval(Integral, 2, None, closed="left"),
            Interval(RealNotInt, 0.0, 1.0, closed="right"),
        ],
        "min_samples_leaf": [
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0.0, 1.0, closed="neither"),
        ],
        "min_weight_fraction_leaf": [Interval(Real, 0.0, 0.5, closed="both")],
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "min_impurity_decrease": [Interval(Real, 0.0, None, closed="left")],
        "init": [StrOptions({"zero"}), None],
        "random_state": ["random_state"],
        "max_features": [
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0.0, 1.0, closed="right"),
            StrOptions({"sqrt", "log2"}),
            None,
        ],
        "verbose": ["verbose"],
        "max_leaf_nodes": [Interval(Integral, 2, None, closed="left"), None],
        "warm_start": ["boolean"],
        "validation_fraction": [Interval(Real, 0.0, 1.0, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left"), None],
        "tol": [Interval(Real, 0.0, None, closed="left")],
        "ccp_alpha": [Interval(Real, 0.0, None, closed="left")],
        "max_bins": [Interval(Integral, 2, MAX_BINS, closed="both"), None],
        "categorical_features": ["array-like", StrOptions({"from_dtype"}), None],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------------ hooks
    def _encode_y(self, y, sample_weight):  # pragma: no cover - abstract
        raise NotImplementedError

    def _loss(self):  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ fitting
    def _tree_template(self) -> DecisionTreeRegressor:
        return DecisionTreeRegressor(
            criterion="squared_error", max_depth=self.max_depth,
            min_samples_split=self.min_samples_split, min_samples_leaf=self.min_samples_leaf,
            min_weight_fraction_leaf=self.min_weight_fraction_leaf,
            max_features=self.max_features, max_leaf_nodes=self.max_leaf_nodes,
            min_impurity_decrease=self.min_impurity_decrease, ccp_alpha=self.ccp_alpha,
            max_bins=self.max_bins)

    def _clear_state(self) -> None:
        for name in ("estimators_", "init_", "train_score_", "oob_improvement_", "oob_scores_",
                     "oob_score_", "n_estimators_"):
            if hasattr(self, name):
                delattr(self, name)

    def _is_fitted(self) -> bool:
        return len(getattr(self, "estimators_", [])) > 0

    # False: an ``init`` estimator's parameters are validated by its own fit.
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, sample_weight=None, monitor=None):
        """Fit the boosted ensemble.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows; NaN is allowed (each split learns where NaN goes).
        y : array-like of shape (n_samples,)
            Targets: class labels (classifier) or real values (regressor).
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights; None gives every sample weight 1.
        monitor : callable, default=None
            Called after each round as ``monitor(i, self, locals())``; returning True stops
            the fit (as scikit-learn's).

        Returns
        -------
        self : estimator
        """
        if self.criterion != "deprecated":
            warnings.warn("The parameter `criterion` is deprecated and will be removed in "
                          "1.11 (as in scikit-learn); trees always use the squared-error "
                          "criterion.", FutureWarning, stacklevel=2)
        if not self.warm_start:
            self._clear_state()
        weights_given = sample_weight is not None
        X, categorical = resolve_categorical_fit(self, X)
        X, y = validate_data(self, X, y, dtype=np.float64, multi_output=True,
                             **tree_X_options(X))
        X = check_categorical_values(self, tree_X(X), categorical)
        y = column_or_1d(y, warn=True)
        if weights_given:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                                 ensure_non_negative=True)
        else:  # every weight 1, held without an array of ones (8 MB at 1M rows)
            sample_weight = unit_weight_view(X.shape[0])
        if not np.any(sample_weight > 0):
            raise ValueError("sample_weight is zero for every sample; nothing to fit")
        y = self._encode_y(y, sample_weight)
        loss = self._loss()

        if self.n_iter_no_change is not None:
            X_train, X_val, y_train, y_val, w_train, w_val = train_test_split(
                X, y, sample_weight, random_state=self.random_state,
                test_size=self.validation_fraction,
                # Stratified on float class indices, as scikit-learn (its error message for
                # a class of one member names them: "[1.0]").
                stratify=(y.astype(np.float64) if isinstance(self, ClassifierMixin)
                          else None))
            if (isinstance(self, ClassifierMixin)
                    and np.unique(y_train).shape[0] != self.n_classes_):
                raise ValueError("The training data after the early stopping split is missing "
                                 "some classes. Try using another random seed.")
        else:
            X_train, y_train, w_train = X, y, sample_weight
            X_val = y_val = w_val = None

        if not self._is_fitted():
            if _is_estimator(self.init):
                self.init_ = _fit_init_estimator(clone(self.init), X_train, y_train, w_train,
                                                 weights_given)
            else:
                self.init_ = (np.zeros(loss.n_trees) if self.init == "zero"
                              else loss.init_raw(y_train, w_train))
            self.estimators_ = []
            self.train_score_ = np.zeros(0)
            begin = 0
            raw = self._initial_raw(X_train)
        else:
            begin = len(self.estimators_)
            if self.n_estimators < begin:
                raise ValueError(f"n_estimators={self.n_estimators} must be larger or equal to "
                                 f"len(estimators_)={begin} when warm_start==True")
            raw = self._raw_predict_validated(X_train)
            self.estimators_ = [list(stage) for stage in self.estimators_]  # rounds get added
        self._resize_scores(begin)
        n_stages = self._fit_stages(X_train, y_train, w_train, raw, X_val, y_val, w_val, loss,
                                    begin, monitor)
        self.estimators_ = _stage_array(self.estimators_[:n_stages])
        self._packed = pack_ensemble(self.estimators_,
                                     getattr(self, "known_categories_", None),
                                     getattr(self, "category_bins_", None))
        self.train_score_ = self.train_score_[:n_stages]
        if self.subsample < 1.0:
            self.oob_improvement_ = self.oob_improvement_[:n_stages]
            self.oob_scores_ = self.oob_scores_[:n_stages]
            self.oob_score_ = float(self.oob_scores_[-1])
        self.n_estimators_ = n_stages
        return self

    def _resize_scores(self, begin: int) -> None:
        """Size the per-round score arrays to ``n_estimators``, keeping the first ``begin``."""
        def resized(name):
            out = np.zeros(self.n_estimators)
            old = getattr(self, name, None)
            if old is not None:
                out[:begin] = old[:begin]
            return out

        self.train_score_ = resized("train_score_")
        if self.subsample < 1.0:
            self.oob_improvement_ = resized("oob_improvement_")
            self.oob_scores_ = resized("oob_scores_")
        else:  # a warm start without subsampling: out-of-bag scores no longer cover all rounds
            for name in ("oob_improvement_", "oob_scores_", "oob_score_"):
                if hasattr(self, name):
                    delattr(self, name)

    def _fit_stages(self, X, y, sample_weight, raw, X_val, y_val, w_val, loss, begin, monitor):
        """Run rounds ``begin..n_estimators-1``; return the number of rounds kept."""
        n_samples, n_features = X.shape
        # Class-major (Fortran order): tree k reads and updates column k of raw and of the
        # gradient, contiguous then; in C order each column strides over every row's K values
        # and a tree touches all of both arrays. A no-op for one tree per round.
        raw = np.asfortranarray(raw)
        rng = check_random_state(self.random_state)
        bin_seed = int(rng.randint(SEED_BOUND))
        stage_seeds = draw_seeds(rng, self.n_estimators)  # round i's seed ignores begin
        data = prepare_tree_data(X, self.max_bins, bin_seed,
                                 categorical=getattr(self, "is_categorical_", None))
        template = self._tree_template()
        base_params = template._growth_params(CRITERION_SQUARED_ERROR, n_samples,
                                              float(sample_weight.sum()), n_features)
        self.max_features_ = base_params.max_features
        tree_params = template.get_params()
        do_oob = self.subsample < 1.0
        n_inbag = max(1, int(self.subsample * n_samples))
        raw_val = None
        if self.n_iter_no_change is not None:
            raw_val = self._raw_predict_validated(X_val)
            loss_history = np.full(self.n_iter_no_change, np.inf)

        bar = ProgressBar(self.n_estimators - begin, "boosting") if self.verbose > 0 else None
        # Second-order splits: each tree grows on targets g / h weighted by w h (see
        # newton_tree_targets).
        second_order = getattr(self, "split_gain", "first_order") == "second_order"
        # Trees of a round grown in one batch hold a row order and partition scratch each
        # (and their targets and weights under second-order splits).
        batch_trees = max(1, BATCHED_ROUND_MAX_BYTES // ((32 if second_order else 16)
                                                         * n_samples))
        # Threads grow a round's trees side by side (multiclass) or build the histograms of
        # its one tree's large nodes with it (binary, regression), and share the rows of the
        # gradient-and-loss pass; none of this changes the model.
        n_threads = effective_n_jobs(getattr(self, "n_jobs", None))
        pool = ThreadPoolExecutor(max_workers=n_threads) if n_threads > 1 else None
        # While the host takes CPU time from this machine, rounds' wall times decide whether
        # the threads still pay (see _round_threads).
        round_threads = RoundThreads() if pool is not None else None
        self._round_threads = round_threads
        i = begin - 1
        next_gradient = None
        # The rows of positive weight, shared by every tree of a round (and by every round
        # without subsampling); their number alone when that is every row (no id array).
        positive = sample_weight > 0
        if np.all(positive):
            weighted_rows = n_samples
            # Whether the weights are all 1 (then so are every round's in-bag rows'): the
            # trees need not read the weights to find out.
            unit_weight = bool(np.all(sample_weight == 1.0))
        else:
            weighted_rows = positive_rows(positive)
            unit_weight = bool(unit_weights(sample_weight, weighted_rows))
        del positive
        try:
            for i in range(begin, self.n_estimators):
                stage_rng = seeded_stream(stage_seeds[i])  # used within the round only
                if do_oob:
                    inbag = np.zeros(n_samples, dtype=bool)
                    inbag[stage_rng.permutation(n_samples)[:n_inbag]] = True
                    stage_weight = sample_weight * inbag
                else:
                    stage_weight = sample_weight
                stage_loss = loss.for_stage(y, raw, sample_weight)
                if do_oob and i == 0:
                    initial_oob = stage_loss(y[~inbag], raw[~inbag], sample_weight[~inbag])
                params = base_params
                if self.min_weight_fraction_leaf > 0:
                    params = dataclasses.replace(params, min_weight_leaf=float(
                        self.min_weight_fraction_leaf * stage_weight.sum()))
                if next_gradient is None:
                    neg_gradient = np.asfortranarray(stage_loss.negative_gradient(y, raw))
                else:  # computed with the previous round's training loss
                    neg_gradient, next_gradient = next_gradient, None
                seeds = [int(stage_rng.randint(SEED_BOUND)) for _ in range(loss.n_trees)]
                stage_rows = positive_rows(stage_weight > 0) if do_oob else weighted_rows
                round_pool = (pool if round_threads is not None and round_threads.threaded()
                              else None)
                tree_pool = round_pool if loss.n_trees > 1 else None
                # One tree per round: its large nodes' histograms are shared with the threads
                # instead.
                root_pool = round_pool if tree_pool is None else None

                def start_class_tree(k, neg_gradient=neg_gradient, stage_weight=stage_weight,
                                     params=params, seeds=seeds, stage_rows=stage_rows,
                                     root_pool=root_pool):
                    target, weight, unit = neg_gradient[:, k], stage_weight, unit_weight
                    if second_order:
                        target, weight = newton_tree_targets(y, target,
                                                             kernel_weights(stage_weight),
                                                             loss.hessian)
                        unit = False
                        if self.min_weight_fraction_leaf > 0:  # a fraction of the hessian
                            params = dataclasses.replace(params, min_weight_leaf=float(
                                self.min_weight_fraction_leaf * weight.sum()))
                    return self._start_tree(data, target, weight, stage_rows, unit, params,
                                            seeds[k], root_pool, n_threads)

                def finish_class_tree(k, growth, neg_gradient=neg_gradient,
                                      stage_weight=stage_weight, stage_loss=stage_loss):
                    # Tree k reads and updates only column k of raw: rounds' trees are
                    # independent, so threads and batches give the same model.
                    return self._finish_tree(growth, X, y, raw, neg_gradient[:, k],
                                             stage_weight, sample_weight, stage_loss, k)

                def fit_class_tree(k):
                    growth = start_class_tree(k)
                    return finish_class_tree(k, growth if growth is None else growth.run())

                if tree_pool is None:
                    # In batches of classes: the batch's kernels back to back, then its trees
                    # finished (see TreeGrowth); each tree's rows held until then.
                    trees = []
                    for first in range(0, loss.n_trees, batch_trees):
                        growths = [start_class_tree(k) for k in
                                   range(first, min(first + batch_trees, loss.n_trees))]
                        for growth in growths:
                            if growth is not None:
                                growth.run()
                        trees += [finish_class_tree(first + j, growth)
                                  for j, growth in enumerate(growths)]
                        # Each growth holds its row ids and the leaves (row-length arrays):
                        # freed now, not while the next batch is prepared (peak memory).
                        del growths, growth
                else:
                    trees = list(tree_pool.map(fit_class_tree, range(loss.n_trees)))
                stage = []
                for k, tree in enumerate(trees):
                    if raw_val is not None:
                        _add_tree(raw_val[:, k], tree, X_val, self.learning_rate)
                    stage.append(self._wrap_tree(tree, tree_params, n_features,
                                                   self.max_features_, stage_seeds[i]))
                self.estimators_.append(stage)

                if do_oob:
                    self.train_score_[i] = stage_loss(y[inbag], raw[inbag],
                                                      sample_weight[inbag])
                    self.oob_scores_[i] = stage_loss(y[~inbag], raw[~inbag],
                                                     sample_weight[~inbag])
                    previous = initial_oob if i == 0 else self.oob_scores_[i - 1]
                    self.oob_improvement_[i] = previous - self.oob_scores_[i]
                elif stage_loss is loss and hasattr(loss, "gradient_and_loss"):
                    # One pass: this round's training loss and the next round's gradient,
                    # written over this round's (its trees are grown).
                    next_gradient, self.train_score_[i] = loss.gradient_and_loss(
                        y, raw, sample_weight, round_pool, out=neg_gradient)
                else:
                    self.train_score_[i] = stage_loss(y, raw, sample_weight)
                if round_threads is not None:
                    round_threads.round_done()
                if bar is not None:
                    bar.update()
                if monitor is not None and monitor(i, self, locals()):
                    break
                if raw_val is not None:
                    # Stop unless the validation loss beats one of the last n_iter_no_change
                    # by more than tol (scikit-learn's rule).
                    val_loss = stage_loss(y_val, raw_val, w_val)
                    if np.any(val_loss + self.tol < loss_history):
                        loss_history[i % loss_history.shape[0]] = val_loss
                    else:
                        break
        finally:
            if bar is not None:
                bar.close()
            if pool is not None:
                pool.shutdown()
        return i + 1

    @staticmethod
    def _start_tree(data, neg_gradient_k, stage_weight, tree_rows, unit_weight, params, seed,
                    root_pool=None, n_threads=1) -> TreeGrowth | None:
        """A round's tree on one class's negative gradient, prepared to grow (None when no
        row has positive weight); ``tree_rows``: the rows of positive ``stage_weight``, as
        ``positive_rows`` gives them, or their number when that is every row;
        ``unit_weight``: whether their weights are all 1; ``root_pool``: threads sharing its
        large nodes' histograms."""
        n_tree_rows = tree_rows if isinstance(tree_rows, int) else tree_rows.shape[0]
        if n_tree_rows == 0:
            return None
        return prepare_growth(data, neg_gradient_k, stage_weight, 1, params, seed,
                              return_leaves=True, pool=root_pool, pool_threads=n_threads,
                              row_shards=True, rows=tree_rows, unit_weight=unit_weight)

    def _finish_tree(self, growth, X, y, raw, neg_gradient_k, stage_weight, sample_weight,
                     loss, k) -> Tree:
        """The tree ``growth`` grew (``_start_tree``, then run), its leaves set by line
        search, added to ``raw[:, k]``; a constant 0 tree for ``growth`` None."""
        if growth is None:
            return _constant_tree(X.shape[1], 0.0)
        tree, leaves = growth.finish()
        if self.ccp_alpha > 0.0:
            tree = prune_tree(tree, float(self.ccp_alpha))
            leaves = np.where(stage_weight > 0, tree.apply(X), -1).astype(np.int32)
        # Every row has a leaf (none of weight 0): the leaves need no gathers below.
        all_rows = growth.samples.shape[0] == leaves.shape[0]
        values = _NO_LEAF_VALUES
        if not loss.tree_values_are_optimal:
            if all_rows:  # no gathers in the common case (no subsampling, no zero weights)
                values = loss.leaf_values(leaves, y, raw[:, k], neg_gradient_k, sample_weight,
                                          k, tree.node_count)
            else:
                rows = np.flatnonzero(leaves >= 0)
                values = loss.leaf_values(leaves[rows], y[rows], raw[rows, k],
                                          neg_gradient_k[rows], sample_weight[rows], k,
                                          tree.node_count)
        # Under all_rows every row's step is added here, else none (the rows are split below).
        step = leaf_steps(tree.children_left, tree.value, values, float(self.learning_rate),
                          raw[:, k], leaves if all_rows else _NO_LEAVES)
        if not all_rows:
            rows = leaves >= 0
            raw[rows, k] += step[leaves[rows]]
            others = np.flatnonzero(~rows)  # out-of-bag rows and rows of zero weight
            raw[others, k] += step[tree.apply(X[others])]
        return tree

    @staticmethod
    def _wrap_tree(tree: Tree, tree_params: dict, n_features: int, max_features: int,
                   seed: int) -> DecisionTreeRegressor:
        """A fitted ``DecisionTreeRegressor`` holding ``tree`` (what ``estimators_`` lists)."""
        est = DecisionTreeRegressor(**{**tree_params, "random_state": int(seed)})
        est.tree_ = tree
        est.n_features_in_ = n_features
        est.n_outputs_ = 1
        est.max_features_ = max_features
        return est

    # ------------------------------------------------------------------ prediction
    def _validate_X_predict(self, X, map_unknown: bool = True):
        check_is_fitted(self)
        X = categorical_predict_input(self, X)
        X = tree_X(validate_data(self, X, dtype=np.float64, reset=False, **tree_X_options(X)))
        return map_unknown_categories(self, X) if map_unknown else apply_category_bins(self, X)

    def _initial_raw(self, X: np.ndarray) -> np.ndarray:
        """``H0`` of every row, shape (n_samples, n_trees): the constant ``init_``, or the
        predictions of the fitted ``init`` estimator through the loss's link."""
        if not _is_estimator(self.init_):
            return np.tile(np.asarray(self.init_, dtype=np.float64), (X.shape[0], 1))
        if isinstance(self, ClassifierMixin):
            eps = np.finfo(np.float64).eps
            proba = np.clip(np.asarray(self.init_.predict_proba(X), dtype=np.float64), eps,
                            1.0 - eps)
            return np.ascontiguousarray(self._loss().raw_from_proba(proba))
        return np.asarray(self.init_.predict(X), dtype=np.float64).reshape(X.shape[0], 1)

    def _packed_trees(self) -> PackedEnsemble:
        """All trees as one node table, built once per ``estimators_`` (at the end of fit, or
        on the first prediction of a loaded model)."""
        packed = self.__dict__.get("_packed")
        known = getattr(self, "known_categories_", None)
        if packed is None or packed.source is not self.estimators_ or packed.known is not known:
            packed = pack_ensemble(self.estimators_, known,
                                   getattr(self, "category_bins_", None))
            self._packed = packed
        return packed

    def _raw_predict_validated(self, X: np.ndarray) -> np.ndarray:
        n_threads = effective_n_jobs(getattr(self, "n_jobs", None))
        init = self._initial_raw(X) if _is_estimator(self.init_) else self.init_
        if not sp.issparse(X):
            X = np.ascontiguousarray(X, dtype=np.float64)
        return raw_predict(self._packed_trees(), X, init, self.learning_rate, n_threads)

    def _raw_predict(self, X) -> np.ndarray:
        check_is_fitted(self)
        # Unseen categories: folded into the packed trees' bitsets (no copy of X), unless an
        # ``init`` estimator reads X too.
        folded = self._packed_trees().folded and not _is_estimator(self.init_)
        return self._raw_predict_validated(self._validate_X_predict(X, map_unknown=not folded))

    def _staged_raw_predict(self, X):
        X = self._validate_X_predict(X)
        raw = self._initial_raw(X)
        for stage in self.estimators_:
            for k, est in enumerate(stage):
                _add_tree(raw[:, k], est.tree_, X, self.learning_rate)
            yield raw.copy()

    def apply(self, X):
        """Leaf index of every sample in every tree.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_leaves : ndarray of shape (n_samples, n_estimators_, n_trees_per_iteration_)
        """
        X = self._validate_X_predict(X)
        leaves = np.zeros((X.shape[0], len(self.estimators_), len(self.estimators_[0])),
                          dtype=np.intp)
        for i, stage in enumerate(self.estimators_):
            for k, est in enumerate(stage):
                leaves[:, i, k] = est.tree_.apply(X)
        return leaves

    @property
    def feature_importances_(self) -> np.ndarray:
        """Mean impurity decrease (MDI) over all trees, normalised to sum to 1.

        Trees that are a single leaf are left out; all zeros if every tree is one.
        """
        check_is_fitted(self)
        per_tree = [est.tree_.compute_feature_importances(normalize=False)
                    for stage in self.estimators_ for est in stage
                    if est.tree_.node_count > 1]
        if not per_tree:
            return np.zeros(self.n_features_in_)
        mean = np.mean(per_tree, axis=0)
        return mean / mean.sum()


_COMMON_PARAMS_DOC = """\
    learning_rate : float, default=0.1
        Shrinks each tree's contribution: ``H <- H + learning_rate * h``.
    n_estimators : int, default=100
        Number of boosting rounds.
    subsample : float in (0, 1], default=1.0
        Fraction of the rows drawn (without replacement) for each round (stochastic gradient
        boosting); below 1.0, trees and line searches use the in-bag rows only and
        ``oob_improvement_`` / ``oob_scores_`` are recorded.
    criterion : {"squared_error", "friedman_mse"}, default="deprecated"
        Deprecated, as in scikit-learn 1.9 (setting it warns with ``FutureWarning``): the
        trees always split on the squared-error decrease, which ranks splits exactly as
        Friedman's improvement score, so both names give the same trees.
    min_samples_split, min_samples_leaf, min_weight_fraction_leaf, max_depth, \
min_impurity_decrease, max_features, max_leaf_nodes, ccp_alpha
        Per-tree rules, as in :class:`~cipherforest.tree.DecisionTreeRegressor`
        (``max_depth`` defaults to 3 here).
    init : estimator, {None, "zero"}, default=None
        None starts from the constant minimising the loss (mean, median, quantile, log of the
        class priors); "zero" starts from raw predictions 0; an estimator (with ``fit`` and
        ``predict``, classifiers ``predict_proba``) is fitted on the training rows (with
        ``sample_weight`` when given) and its predictions, through the loss's link (log-odds
        for classifiers), are the starting raw predictions, as in scikit-learn.
    random_state : int, RandomState instance or None, default=None
        Seeds subsampling, feature draws, binning and the early-stopping split.
    verbose : int, default=0
        Show a progress bar on stderr when > 0.
    warm_start : bool, default=False
        Reuse the fitted rounds and add rounds up to ``n_estimators``.
    validation_fraction : float, default=0.1
        Held-out fraction for early stopping (used when ``n_iter_no_change`` is set).
    n_iter_no_change : int, default=None
        Stop when the validation loss has not improved by ``tol`` on any of the last
        ``n_iter_no_change`` rounds.
    tol : float, default=1e-4
        Improvement tolerance of early stopping.
    max_bins : int in [2, 255] or None, default=None
        None finds exact splits; an int bins X once per fit into at most this many bins per
        feature and grows every round's trees on histograms (much faster on large data).
    categorical_features : array-like of {bool, int, str} or "from_dtype" or None, \
default=None
        Categorical features (with ``max_bins``; see
        :class:`cipherforest.DecisionTreeClassifier`): each round's trees split them by
        sets of categories sorted by ``sum of gradients / (count + 10)``, categories with
        fewer than 10 rows in a node going right (scikit-learn's ``HistGradientBoosting``).
        None (default, as scikit-learn's ``GradientBoosting*``): every feature is numeric.
"""

_COMMON_ATTRIBUTES_DOC = """\
    n_estimators_ : int
        Rounds actually fitted (fewer than ``n_estimators`` after early stopping).
    estimators_ : ndarray of DecisionTreeRegressor, shape (n_estimators_, n_trees_per_round)
        ``estimators_[i, k]``: round ``i``'s tree for output ``k``; leaf values are the
        line-search steps (before ``learning_rate``).
    init_ : ndarray of shape (n_trees_per_iteration_,) or estimator
        The initial raw prediction ``H0``, or the fitted ``init`` estimator.
    train_score_ : ndarray of shape (n_estimators_,)
        Loss on the (in-bag) training rows after each round.
    oob_improvement_ : ndarray of shape (n_estimators_,)
        Decrease of the out-of-bag loss brought by each round (``subsample < 1`` only).
    oob_scores_ : ndarray of shape (n_estimators_,)
        Out-of-bag loss after each round (``subsample < 1`` only).
    oob_score_ : float
        Last out-of-bag loss (``subsample < 1`` only).
    n_trees_per_iteration_ : int
    max_features_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when X has string column names.
    feature_importances_ : ndarray of shape (n_features_in_,)
    is_categorical_, known_categories_, category_bins_, pandas_categories_ : as
        :class:`cipherforest.DecisionTreeClassifier`'s
"""


@register_model_class
class GradientBoostingClassifier(ClassifierMixin, BaseGradientBoosting):
    __doc__ = f"""Gradient boosting classifier, drop-in for scikit-learn's.

    Parameters
    ----------
    loss : {{"log_loss", "exponential"}}, default="log_loss"
        "log_loss": binary (sigmoid, one tree per round) or multiclass (softmax, one tree per
        class and round) log loss; "exponential": AdaBoost's loss, binary only.
{_COMMON_PARAMS_DOC}
    n_jobs : int or None, default=None
        Threads growing a round's trees with more than two classes (one tree per class; they
        are independent), sharing the large nodes of a binary tree with ``max_bins`` (see
        below), sharing the rows of each round's gradient pass and predicting blocks of
        rows. None means 1, -1 all cores. The model, its ``train_score_`` and its
        predictions do not depend on it. (scikit-learn's GradientBoostingClassifier has no
        such parameter.) With ``max_bins``, a tree of at least 20,000 rows keeps its rows in
        two fixed halves (row shards) whatever ``n_jobs`` is, and a second thread
        partitions and histograms one half of each node of at least 10,000 rows; a bin's
        gradient sum is then the sum of the two halves' sums, so such trees can differ from
        a one-shard tree in the last bits of their sums (their splits are the same unless
        two candidates tie to within rounding).
    split_gain : {{"first_order", "second_order"}}, default="first_order"
        How a tree ranks its splits. "first_order" (scikit-learn's GradientBoosting): the
        squared-error decrease of the negative gradients ``g``. "second_order" (LightGBM's,
        XGBoost's and scikit-learn's HistGradientBoosting's, without their L2 term): the
        gain ``G_L^2 / H_L + G_R^2 / H_R`` of the children's sums of ``w g`` and of the
        loss's hessians ``w h`` (``h = p (1 - p)`` for log loss, at least 1e-16), so rows
        whose probability is already near 0 or 1 weigh less; ``min_weight_fraction_leaf``
        is then a fraction of the hessian sum. The leaves' values are the same Newton steps
        either way (``sum w g / sum w h`` per leaf, times ``(K - 1) / K`` for ``K > 2``
        classes). With many classes it scores better (docs/estimators.md, "Second-order
        splits"); the default keeps scikit-learn's trees. Not supported by the
        data-parallel fit (``fit_data_parallel``, Dask).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    n_classes_ : int
{_COMMON_ATTRIBUTES_DOC}"""

    _parameter_constraints: dict = {
        **BaseGradientBoosting._parameter_constraints,
        "init": [StrOptions({"zero"}), None, HasMethods(["fit", "predict_proba"])],
        "loss": [StrOptions(set(CLASSIFICATION_LOSSES))],
        "n_jobs": [Integral, None],
        "split_gain": [StrOptions({"first_order", "second_order"})],
    }

    def __init__(self, *, loss="log_loss", learning_rate=0.1, n_estimators=100, subsample=1.0,
                 criterion="deprecated", min_samples_split=2, min_samples_leaf=1,
                 min_weight_fraction_leaf=0.0, max_depth=3, min_impurity_decrease=0.0,
                 init=None, random_state=None, max_features=None, verbose=0,
                 max_leaf_nodes=None, warm_start=False, validation_fraction=0.1,
                 n_iter_no_change=None, tol=1e-4, ccp_alpha=0.0, max_bins=None, n_jobs=None,
                 categorical_features=None, split_gain="first_order"):
        self.n_jobs = n_jobs
        self.split_gain = split_gain
        self.loss = loss
        self.learning_rate = learning_rate
        self.n_estimators = n_estimators
        self.subsample = subsample
        self.criterion = criterion
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_weight_fraction_leaf = min_weight_fraction_leaf
        self.max_depth = max_depth
        self.min_impurity_decrease = min_impurity_decrease
        self.init = init
        self.random_state = random_state
        self.max_features = max_features
        self.verbose = verbose
        self.max_leaf_nodes = max_leaf_nodes
        self.warm_start = warm_start
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.ccp_alpha = ccp_alpha
        self.max_bins = max_bins
        self.categorical_features = categorical_features

    def _encode_y(self, y, sample_weight):
        check_classification_targets(y)
        # Not np.unique(return_inverse=True): its temporaries (several arrays of n int64)
        # stayed in the heap for the rest of a fit (dev/fit_memory.py).
        classes = np.unique(y)
        encoded = np.searchsorted(classes, y)
        if self._is_fitted() and self.warm_start and not np.array_equal(classes, self.classes_):
            raise ValueError("warm_start needs the same classes as the first fit")
        self.classes_ = classes
        self.n_classes_ = int(classes.shape[0])
        present = np.count_nonzero(class_weight_sums(encoded, sample_weight, classes.shape[0]))
        if present < 2:
            raise ValueError(f"y contains {present} class after sample_weight trimmed classes "
                             "with zero weights, while a minimum of 2 classes are required.")
        self.n_trees_per_iteration_ = 1 if self.n_classes_ == 2 else self.n_classes_
        # Class indices in the narrowest integer type (the losses' arithmetic promotes them to
        # float64 exactly): 1 byte per row instead of 8 at the fit's peak memory.
        return encoded.astype(np.int8 if self.n_classes_ <= np.iinfo(np.int8).max
                              else np.int32)

    def _loss(self):
        return make_classification_loss(self.loss, self.n_classes_)

    def decision_function(self, X):
        """Raw predictions ``H(x)``: shape (n_samples,) for two classes, else
        (n_samples, n_classes).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        score : ndarray
        """
        raw = self._raw_predict(X)
        return raw.ravel() if raw.shape[1] == 1 else raw

    def staged_decision_function(self, X):
        """Yield ``decision_function``'s raw predictions after each round (shape
        (n_samples, n_trees_per_iteration_))."""
        yield from self._staged_raw_predict(X)

    def predict_proba(self, X):
        """Class probabilities (sigmoid or softmax of the raw predictions).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        raw = self._raw_predict(X)
        return self._loss().raw_to_proba(raw)

    def predict_log_proba(self, X):
        """Natural logarithm of ``predict_proba``."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def staged_predict_proba(self, X):
        """Yield ``predict_proba`` after each round."""
        for raw in self._staged_raw_predict(X):
            yield self._loss().raw_to_proba(raw)

    def _classes_from_raw(self, raw: np.ndarray) -> np.ndarray:
        if raw.shape[1] == 1:
            return self.classes_.take((raw[:, 0] >= 0).astype(np.intp))
        return self.classes_.take(np.argmax(raw, axis=1))

    def predict(self, X):
        """Most probable class of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        return self._classes_from_raw(self._raw_predict(X))

    def staged_predict(self, X):
        """Yield ``predict`` after each round."""
        for raw in self._staged_raw_predict(X):
            yield self._classes_from_raw(raw)


@register_model_class
class GradientBoostingRegressor(RegressorMixin, BaseGradientBoosting):
    __doc__ = f"""Gradient boosting regressor, drop-in for scikit-learn's.

    Parameters
    ----------
    loss : {{"squared_error", "absolute_error", "huber", "quantile"}}, default="squared_error"
        Loss to minimise; leaf values are its exact line search (mean, median, ``alpha``
        quantile of the residuals, Huber's one-step estimate).
{_COMMON_PARAMS_DOC}
    alpha : float in (0, 1), default=0.9
        Quantile of "quantile", and quantile of the absolute residuals giving Huber's delta.
    n_jobs : int or None, default=None
        Threads sharing a tree's large nodes with ``max_bins`` (as in
        GradientBoostingClassifier: two fixed row shards from 20,000 rows on, whatever
        ``n_jobs`` is), sharing the rows of each round's gradient pass and predicting blocks
        of rows. None means 1, -1 all cores. The model, its ``train_score_`` and its
        predictions do not depend on it. (scikit-learn's GradientBoostingRegressor has no
        such parameter.)

    Attributes
    ----------
{_COMMON_ATTRIBUTES_DOC}"""

    _parameter_constraints: dict = {
        **BaseGradientBoosting._parameter_constraints,
        "init": [StrOptions({"zero"}), None, HasMethods(["fit", "predict"])],
        "loss": [StrOptions(set(REGRESSION_LOSSES))],
        "alpha": [Interval(Real, 0.0, 1.0, closed="neither")],
        "n_jobs": [Integral, None],
    }

    def __init__(self, *, loss="squared_error", learning_rate=0.1, n_estimators=100,
                 subsample=1.0, criterion="deprecated", min_samples_split=2,
                 min_samples_leaf=1, min_weight_fraction_leaf=0.0, max_depth=3,
                 min_impurity_decrease=0.0, init=None, random_state=None, max_features=None,
                 alpha=0.9, verbose=0, max_leaf_nodes=None, warm_start=False,
                 validation_fraction=0.1, n_iter_no_change=None, tol=1e-4, ccp_alpha=0.0,
                 max_bins=None, n_jobs=None, categorical_features=None):
        self.n_jobs = n_jobs
        self.loss = loss
        self.learning_rate = learning_rate
        self.n_estimators = n_estimators
        self.subsample = subsample
        self.criterion = criterion
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.min_weight_fraction_leaf = min_weight_fraction_leaf
        self.max_depth = max_depth
        self.min_impurity_decrease = min_impurity_decrease
        self.init = init
        self.random_state = random_state
        self.max_features = max_features
        self.alpha = alpha
        self.verbose = verbose
        self.max_leaf_nodes = max_leaf_nodes
        self.warm_start = warm_start
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.ccp_alpha = ccp_alpha
        self.max_bins = max_bins
        self.categorical_features = categorical_features

    def _encode_y(self, y, sample_weight):
        self.n_trees_per_iteration_ = 1
        return np.asarray(y, dtype=np.float64)

    def _loss(self):
        return make_regression_loss(self.loss, self.alpha)

    def predict(self, X):
        """Predicted targets ``H(x)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        return self._raw_predict(X)[:, 0]

    def staged_predict(self, X):
        """Yield ``predict`` after each round."""
        for raw in self._staged_raw_predict(X):
            yield raw[:, 0]

    def apply(self, X):
        """Leaf index of every sample in every tree.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_leaves : ndarray of shape (n_samples, n_estimators_)
            As scikit-learn's regressor (one tree per round).
        """
        return super().apply(X)[:, :, 0]
