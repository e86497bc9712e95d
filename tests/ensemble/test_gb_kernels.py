"""Compiled kernels of gradient boosting against the plain numpy / tree-by-tree versions."""

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_classification, make_regression

from _helpers.data import with_nan
from cipherforest.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
from cipherforest.ensemble import _gb_losses as gb_losses
from cipherforest.ensemble._gb_losses import (
    HESSIAN_ABS_GRADIENT,
    HESSIAN_BINOMIAL,
    HESSIAN_MULTINOMIAL,
    BinomialLoss,
    MultinomialLoss,
    SquaredError,
    leaf_sums,
    newton_leaf_values,
    safe_ratio,
)
from cipherforest.ensemble._gb_predict import (
    PREDICT_BLOCK_ROWS,
    leaf_steps,
    pack_ensemble,
    predict_block_rows,
    raw_predict,
    split_features,
)
from cipherforest.tree._common import TREE_LEAF


def tree_by_tree(model, X):
    """Raw predictions the plain way: every tree's ``apply``, added in round order."""
    raw = np.tile(model.init_, (X.shape[0], 1))
    for stage in model.estimators_:
        for k, est in enumerate(stage):
            raw[:, k] += model.learning_rate * est.tree_.value[est.tree_.apply(X), 0, 0]
    return raw


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("max_bins", [None, 32])
def test_classifier_raw_is_bitwise_tree_by_tree(n_classes, max_bins):
    rng = np.random.default_rng(0)
    X, y = make_classification(400, 6, n_informative=4, n_classes=n_classes, random_state=0)
    X = with_nan(X, rng)
    model = GradientBoostingClassifier(n_estimators=15, max_leaf_nodes=7, max_depth=None,
                                       max_bins=max_bins, random_state=0).fit(X, y)
    X_test = with_nan(rng.normal(size=(PREDICT_BLOCK_ROWS + 37, 6)), rng)
    expected = tree_by_tree(model, X_test)
    got = model._raw_predict(X_test)
    assert np.array_equal(got, expected)
    decision = model.decision_function(X_test)
    assert np.array_equal(decision, expected.ravel() if n_classes == 2 else expected)


def test_wide_rows_predict_in_short_blocks_bitwise_tree_by_tree():
    """784 features: blocks of 32 rows (the block's values stay in L2); more rows than a
    block, and a last block shorter than one group of rows."""
    assert predict_block_rows(20) == PREDICT_BLOCK_ROWS
    assert predict_block_rows(784) == 32
    assert predict_block_rows(100_000) == 8
    X, y = make_classification(300, 784, n_informative=10, n_classes=3, random_state=0)
    model = GradientBoostingClassifier(n_estimators=5, max_leaf_nodes=7, max_depth=None,
                                       max_bins=32, random_state=0).fit(X, y)
    X_test = np.random.default_rng(2).normal(size=(32 * 3 + 5, 784))
    assert np.array_equal(model._raw_predict(X_test), tree_by_tree(model, X_test))


def test_regressor_raw_is_bitwise_tree_by_tree_with_deep_unbalanced_trees():
    X, y = make_regression(300, 4, noise=5.0, random_state=1)
    y = np.exp(y / 100)  # skewed target: unbalanced trees of different depths
    model = GradientBoostingRegressor(n_estimators=10, max_depth=6, random_state=0).fit(X, y)
    X_test = np.random.default_rng(1).normal(size=(50, 4))
    assert np.array_equal(model.predict(X_test), tree_by_tree(model, X_test)[:, 0])


def test_threads_and_blocks_do_not_change_predictions():
    X, y = make_classification(20_000, 5, n_classes=3, n_informative=3, random_state=0)
    model = GradientBoostingClassifier(n_estimators=5, max_depth=3, max_bins=64,
                                       random_state=0).fit(X, y)
    packed = pack_ensemble(model.estimators_)
    one = raw_predict(packed, X, model.init_, model.learning_rate, n_threads=1)
    two = raw_predict(packed, X, model.init_, model.learning_rate, n_threads=2)
    assert np.array_equal(one, two)
    assert np.array_equal(one, tree_by_tree(model, X))
    model.set_params(n_jobs=2)
    assert np.array_equal(model.predict_proba(X),
                          model.set_params(n_jobs=1).predict_proba(X))


def test_csr_rows_predict_bitwise_tree_by_tree():
    """CSR rows gathered onto the features the trees test, in blocks (more rows than a
    block, a last block shorter than a group): the dense rows' raw predictions, bit for
    bit, on one thread or two; an all-zero row and rows of only untested features too."""
    rng = np.random.default_rng(3)
    X = sp.random(400, 3000, density=0.02, format="csr", random_state=3,
                  data_rvs=lambda n: np.round(rng.normal(size=n), 2))
    y = (X[:, :30].sum(axis=1).A.ravel() > 0).astype(int) + (X[:, 30].toarray().ravel() > 0)
    model = GradientBoostingClassifier(n_estimators=8, max_leaf_nodes=7, max_depth=None,
                                       max_bins=32, random_state=0).fit(X, y)
    packed = model._packed_trees()
    features, _ = split_features(packed)
    assert 0 < features.shape[0] < 3000
    block = predict_block_rows(features.shape[0])
    X_test = sp.random(3 * block + 5, 3000, density=0.02, format="csr", random_state=4)
    X_test = sp.vstack([X_test, sp.csr_matrix((1, 3000))]).tolil()
    X_test[1, :] = 0.0
    untested = np.setdiff1d(np.arange(3000), features)[:5]
    X_test[2, untested] = 1.0
    X_test = X_test.tocsr()
    expected = tree_by_tree(model, X_test.toarray())
    assert np.array_equal(model._raw_predict(X_test), expected)
    two = raw_predict(packed, X_test, model.init_, model.learning_rate, n_threads=2)
    assert np.array_equal(two, expected)


def test_single_leaf_trees_predict_their_value():
    X = np.zeros((30, 2))
    y = np.arange(30, dtype=float)
    model = GradientBoostingRegressor(n_estimators=3, random_state=0).fit(X, y)
    assert all(est.tree_.node_count == 1 for est in model.estimators_[:, 0])
    assert np.array_equal(model.predict(X), tree_by_tree(model, X)[:, 0])


def test_packed_table_follows_a_new_ensemble():
    X, y = make_regression(200, 3, random_state=0)
    model = GradientBoostingRegressor(n_estimators=3, warm_start=True, random_state=0)
    first = model.fit(X, y).predict(X)
    model.set_params(n_estimators=6).fit(X, y)  # warm start: new estimators_
    assert not np.array_equal(model.predict(X), first)
    assert np.array_equal(model.predict(X), tree_by_tree(model, X)[:, 0])


# ----------------------------------------------------------------- fused gradient and loss
@pytest.mark.parametrize("loss", [SquaredError(), BinomialLoss(), MultinomialLoss(4)])
def test_gradient_and_loss_match_the_separate_methods(loss):
    rng = np.random.default_rng(3)
    n = 500
    raw = rng.normal(scale=5.0, size=(n, loss.n_trees))
    raw[:5, 0] = [40.0, -40.0, 0.0, 700.0, -700.0]  # saturated sigmoid / softmax
    if isinstance(loss, SquaredError):
        y = rng.normal(size=n)
    else:
        y = rng.integers(0, max(2, loss.n_trees), size=n).astype(float)
    w = rng.uniform(0.0, 2.0, size=n)
    neg_gradient, value = loss.gradient_and_loss(y, raw, w)
    np.testing.assert_allclose(neg_gradient, loss.negative_gradient(y, raw), rtol=1e-12,
                               atol=1e-15)
    assert value == pytest.approx(loss(y, raw, w), rel=1e-12)


@pytest.mark.parametrize("loss", [SquaredError(), BinomialLoss(), MultinomialLoss(3)])
def test_gradient_and_loss_into_the_last_rounds_array(loss):
    """``out``: the fit loop's last gradient array is overwritten with the same values a new
    array gets; an array of another shape is not used."""
    rng = np.random.default_rng(4)
    n = 300
    raw = rng.normal(size=(n, loss.n_trees))
    y = (rng.normal(size=n) if isinstance(loss, SquaredError)
         else rng.integers(0, max(2, loss.n_trees), size=n).astype(np.int8))
    w = rng.uniform(0.5, 2.0, size=n)
    fresh, fresh_loss = loss.gradient_and_loss(y, raw, w)
    last_round = np.full((n, loss.n_trees), 7.0)
    reused, reused_loss = loss.gradient_and_loss(y, raw, w, out=last_round)
    assert reused is last_round
    np.testing.assert_array_equal(reused, fresh)
    assert reused_loss == fresh_loss
    wrong_shape = np.zeros((n + 1, loss.n_trees))
    other, _ = loss.gradient_and_loss(y, raw, w, out=wrong_shape)
    assert other is not wrong_shape and not wrong_shape.any()
    np.testing.assert_array_equal(other, fresh)


def test_multinomial_loss_is_the_same_bit_for_bit_in_class_major_order():
    """Boosting keeps raw and the gradient in Fortran (class-major) order; every multinomial
    method gives what it gives on C-ordered raw, bit for bit (NumPy's row sums over
    non-contiguous values round differently, which changed subsampled models), and the
    fused pass writes a gradient in raw's order into the last round's array of that order."""
    rng = np.random.default_rng(5)
    n, n_classes = 400, 10
    loss = MultinomialLoss(n_classes)
    raw = rng.normal(scale=3.0, size=(n, n_classes))
    y = rng.integers(0, n_classes, size=n).astype(np.int8)
    w = rng.uniform(0.5, 2.0, size=n)
    class_major = np.asfortranarray(raw)
    assert np.array_equal(loss.negative_gradient(y, class_major),
                          loss.negative_gradient(y, raw))
    assert loss(y, class_major, w) == loss(y, raw, w)
    gradient, value = loss.gradient_and_loss(y, raw, w)
    last_round = np.asfortranarray(np.full((n, n_classes), 7.0))
    gradient_f, value_f = loss.gradient_and_loss(y, class_major, w, out=last_round)
    assert gradient_f is last_round and value_f == value
    assert np.array_equal(gradient_f, gradient)


@pytest.mark.parametrize("n_rows", [3_000, 30_000])  # one shard; two shards
def test_given_rows_grow_the_same_tree_and_stay_unchanged(n_rows):
    """Boosting hands grow_tree_on the rows of positive weight it found once per round: the
    same tree and leaves as when the grower finds them, and the caller's array is not the
    one the grower reorders."""
    from cipherforest.tree._common import CRITERION_SQUARED_ERROR
    from cipherforest.tree._fit import grow_tree_on, positive_rows, prepare_tree_data

    X, target = make_regression(n_rows, 6, random_state=1)
    weight = np.ones(n_rows)
    weight[::7] = 0.0
    data = prepare_tree_data(X, 64, 0)
    params = GradientBoostingRegressor(max_bins=64, max_leaf_nodes=15, max_depth=None)\
        ._tree_template()._growth_params(CRITERION_SQUARED_ERROR, n_rows, weight.sum(), 6)
    rows = positive_rows(weight > 0)
    given = rows.copy()
    tree, leaves = grow_tree_on(data, target, weight, 1, params, 3, return_leaves=True,
                                row_shards=True, rows=given)
    found_tree, found_leaves = grow_tree_on(data, target, weight, 1, params, 3,
                                            return_leaves=True, row_shards=True)
    assert np.array_equal(given, rows)
    assert np.array_equal(leaves, found_leaves) and (leaves[::7] == -1).all()
    for name in ("children_left", "feature", "threshold", "value"):
        assert np.array_equal(getattr(tree, name), getattr(found_tree, name))


@pytest.mark.parametrize("n_rows", [3_000, 30_000])  # one shard; two shards
@pytest.mark.parametrize("weighted", [False, True])
def test_unit_weight_told_grows_the_tree_the_grower_finds(n_rows, weighted):
    """Boosting tells grow_tree_on whether the positive weights are all 1 (once per fit)
    instead of each tree reading them: told or found, the same tree and leaves, with
    min_samples_leaf counting rows (not weight) under weights of 2."""
    from cipherforest.tree._common import CRITERION_SQUARED_ERROR
    from cipherforest.tree._fit import grow_tree_on, positive_rows, prepare_tree_data

    X, target = make_regression(n_rows, 6, random_state=3)
    weight = np.where(np.arange(n_rows) % 3 == 0, 2.0, 1.0) if weighted else np.ones(n_rows)
    weight[::11] = 0.0
    data = prepare_tree_data(X, 64, 0)
    params = GradientBoostingRegressor(max_bins=64, max_leaf_nodes=15, max_depth=None,
                                       min_samples_leaf=n_rows // 40)._tree_template()\
        ._growth_params(CRITERION_SQUARED_ERROR, n_rows, weight.sum(), 6)
    rows = positive_rows(weight > 0)
    grown = [grow_tree_on(data, target, weight, 1, params, 5, return_leaves=True,
                          row_shards=True, rows=rows, unit_weight=hint)
             for hint in (None, not weighted)]
    (tree, leaves), (told_tree, told_leaves) = grown
    assert np.array_equal(leaves, told_leaves)
    for name in ("children_left", "feature", "threshold", "value", "n_node_samples"):
        assert np.array_equal(getattr(tree, name), getattr(told_tree, name))
    assert tree.n_node_samples[tree.children_left == -1].min() >= n_rows // 40
    if weighted:  # the hint is used: a wrong one (rows of weight 2 counted as 1) differs
        wrong, _ = grow_tree_on(data, target, weight, 1, params, 5, return_leaves=True,
                                row_shards=True, rows=rows, unit_weight=True)
        assert not np.array_equal(wrong.threshold, tree.threshold)


def test_fused_train_scores_equal_the_plain_ones():
    X, y = make_classification(300, 5, n_informative=3, n_classes=3, random_state=0)
    model = GradientBoostingClassifier(n_estimators=8, random_state=0).fit(X, y)
    loss = model._loss()
    raw = np.tile(model.init_, (X.shape[0], 1))
    for i, stage in enumerate(model.estimators_):
        for k, est in enumerate(stage):
            raw[:, k] += model.learning_rate * est.tree_.predict(X)[:, 0, 0]
        assert model.train_score_[i] == pytest.approx(loss(y.astype(float), raw, np.ones(300)),
                                                      rel=1e-12)


def test_packed_depths_are_the_deepest_leaf_of_each_tree():
    from cipherforest.tree._tree import node_depths

    X, y = make_regression(300, 4, random_state=2)
    model = GradientBoostingRegressor(n_estimators=6, max_leaf_nodes=9, max_depth=None,
                                      random_state=0).fit(X, y)
    packed = pack_ensemble(model.estimators_)
    expected = [node_depths(est.tree_.children_left, est.tree_.children_right).max()
                for est in model.estimators_[:, 0]]
    assert packed.depths.tolist() == expected


@pytest.mark.parametrize("hessian", [HESSIAN_BINOMIAL, HESSIAN_MULTINOMIAL,
                                     HESSIAN_ABS_GRADIENT])
def test_newton_leaf_values_equal_the_bincount_formulation(hessian):
    rng = np.random.default_rng(1)
    n, n_nodes = 3000, 13
    leaf = rng.integers(0, n_nodes, size=n).astype(np.intp)
    leaf[leaf == 5] = 6  # node 5 has no rows: its step is 0
    y = rng.integers(0, 2, size=n).astype(float)
    matrix = rng.uniform(-1.0, 1.0, size=(n, 3))  # a strided column, as raw[:, k] is
    neg_grad = matrix[:, 1]
    w = rng.uniform(0.0, 3.0, size=n)
    if hessian == HESSIAN_BINOMIAL:
        prob = y - neg_grad
        h = w * prob * (1 - prob)
    elif hessian == HESSIAN_MULTINOMIAL:
        h = w * np.abs(neg_grad) * (1 - np.abs(neg_grad))
    else:
        h = w * np.abs(neg_grad)
    scale = 0.75
    expected = scale * safe_ratio(leaf_sums(leaf, w * neg_grad, n_nodes),
                                  leaf_sums(leaf, h, n_nodes))
    got = newton_leaf_values(leaf, y, neg_grad, w, n_nodes, hessian, scale)
    assert np.array_equal(got, expected)  # bit for bit
    assert got[5] == 0.0 and np.count_nonzero(got) == n_nodes - 1


@pytest.mark.parametrize("line_search", [True, False])
@pytest.mark.parametrize("with_rows", [True, False])
def test_leaf_steps_equal_the_numpy_update(line_search, with_rows):
    # The NumPy formulation the fit used before the kernel, on a small grown tree's layout:
    # node 0 splits into 1 (leaf) and 2, which splits into leaves 3 and 4.
    rng = np.random.default_rng(2)
    children_left = np.array([1, TREE_LEAF, 3, TREE_LEAF, TREE_LEAF], dtype=np.int32)
    value = rng.normal(size=(5, 1, 1))
    leaf_values = rng.normal(size=5) if line_search else np.zeros(0)
    raw = np.asfortranarray(rng.normal(size=(500, 3)))  # class-major, as during a fit
    leaves = rng.choice(np.array([1, 3, 4], dtype=np.int32), size=500)
    expected_value, expected_raw = value.copy(), raw.copy()
    if line_search:
        is_leaf = children_left == TREE_LEAF
        expected_value[is_leaf, 0, 0] = leaf_values[is_leaf]
    expected_step = 0.1 * expected_value[:, 0, 0]
    if with_rows:
        expected_raw[:, 2] += expected_step[leaves]
    step = leaf_steps(children_left, value, leaf_values, 0.1, raw[:, 2],
                      leaves if with_rows else np.zeros(0, dtype=np.int32))
    assert np.array_equal(step, expected_step)  # bit for bit
    assert np.array_equal(value, expected_value)
    assert np.array_equal(raw, expected_raw)
    assert value[0, 0, 0] == expected_value[0, 0, 0]  # internal nodes keep their value


@pytest.mark.parametrize("n_classes", [2, 3])
def test_threads_do_not_change_the_chunked_gradient_pass(monkeypatch, n_classes):
    monkeypatch.setattr(gb_losses, "GRADIENT_CHUNK_ROWS", 64)  # many chunks on 500 rows
    monkeypatch.setattr(gb_losses, "POOL_MIN_PASS_NS", 0)  # shared however small
    X, y = make_classification(500, 6, n_informative=4, n_classes=n_classes, random_state=0)
    fits = [GradientBoostingClassifier(n_estimators=6, max_leaf_nodes=7, max_depth=None,
                                       max_bins=32, random_state=0, n_jobs=n_jobs).fit(X, y)
            for n_jobs in (1, 2)]
    assert np.array_equal(fits[0].train_score_, fits[1].train_score_)
    assert np.array_equal(fits[0].decision_function(X), fits[1].decision_function(X))
    loss = fits[0]._loss()
    raw = fits[0]._raw_predict(X)
    assert fits[0].train_score_[-1] == pytest.approx(loss(y.astype(float), raw, np.ones(500)),
                                                     rel=1e-12)


@pytest.mark.parametrize("n_rows", [1, 700, 4096, 8244, 100_000, 131_072, 1_000_000])
def test_gradient_chunks_depend_on_the_rows_only(n_rows):
    """At most GRADIENT_CHUNK_ROWS rows per chunk; below four full chunks, four chunks of at
    least MIN_GRADIENT_CHUNK_ROWS rows (one chunk for fewer rows than that)."""
    rows = gb_losses.gradient_chunk_rows(n_rows)
    n_chunks = -(-n_rows // rows)
    assert gb_losses.MIN_GRADIENT_CHUNK_ROWS <= rows <= gb_losses.GRADIENT_CHUNK_ROWS
    if n_rows >= 4 * gb_losses.GRADIENT_CHUNK_ROWS:
        assert rows == gb_losses.GRADIENT_CHUNK_ROWS
    elif n_rows >= 4 * gb_losses.MIN_GRADIENT_CHUNK_ROWS:
        assert n_chunks == 4
    else:
        assert n_chunks == -(-n_rows // gb_losses.MIN_GRADIENT_CHUNK_ROWS)


def test_chunked_pass_sums_chunks_in_order_on_any_pool(monkeypatch):
    monkeypatch.setattr(gb_losses, "GRADIENT_CHUNK_ROWS", 100)
    monkeypatch.setattr(gb_losses, "POOL_MIN_PASS_NS", 0)
    rng = np.random.default_rng(4)
    n = 1050
    y = rng.integers(0, 2, size=n).astype(float)
    raw = rng.normal(scale=3.0, size=(n, 1))
    w = rng.uniform(0.5, 2.0, size=n)
    serial_gradient, serial_loss = BinomialLoss().gradient_and_loss(y, raw, w)
    with ThreadPoolExecutor(3) as pool:
        pooled_gradient, pooled_loss = BinomialLoss().gradient_and_loss(y, raw, w, pool)
    assert np.array_equal(serial_gradient, pooled_gradient)
    assert serial_loss == pooled_loss
    assert serial_loss == pytest.approx(BinomialLoss()(y, raw, w), rel=1e-12)


class _CountingPool(ThreadPoolExecutor):
    """A thread pool that counts the tasks submitted to it."""

    def __init__(self, max_workers):
        super().__init__(max_workers)
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


@pytest.mark.parametrize(("n_rows", "row_ns", "pool_threads", "helpers"), [
    (1050, 1.0, 3, 0),      # 1,050 ns in all: the calling thread alone
    (1050, 400.0, 3, 2),    # 420,000 ns: the caller and the pool's other two threads
    (1050, 400.0, 8, 7),    # as many helpers as the pool has threads beside the caller
    (250, 1e9, 8, 2),       # never more helpers than chunks beside the caller's
    (90, 1e9, 3, 0),        # one chunk: nothing to share
])
def test_chunked_pass_shares_only_passes_worth_a_thread(monkeypatch, n_rows, row_ns,
                                                        pool_threads, helpers):
    monkeypatch.setattr(gb_losses, "GRADIENT_CHUNK_ROWS", 100)
    monkeypatch.setattr(gb_losses, "MIN_GRADIENT_CHUNK_ROWS", 100)
    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, size=n_rows).astype(float)
    raw = rng.normal(scale=3.0, size=n_rows)
    w = rng.uniform(0.5, 2.0, size=n_rows)
    ran = []

    def kernel(y, raw, w, neg_gradient, begin, end):
        ran.append(begin)
        return gb_losses._binomial_gradient_loss(y, raw, w, neg_gradient, begin, end)

    serial_gradient = np.empty(n_rows)
    serial = gb_losses.chunked_gradient_and_loss(kernel, y, raw, w, serial_gradient)
    ran.clear()
    gradient = np.empty(n_rows)
    with _CountingPool(pool_threads) as pool:
        loss = gb_losses.chunked_gradient_and_loss(kernel, y, raw, w, gradient, pool, row_ns)
    assert pool.submitted == helpers
    assert sorted(ran) == list(range(0, n_rows, 100))  # every chunk ran once
    assert loss == serial
    assert np.array_equal(gradient, serial_gradient)


def test_a_thread_reuses_its_histogram_pool_without_changing_trees():
    from cipherforest.tree import _fit
    from cipherforest.tree._common import CRITERION_GINI, CRITERION_SQUARED_ERROR
    from cipherforest.tree._fit import GrowthParams, grow_tree_on, prepare_tree_data
    from cipherforest.tree._node_features import feature_histograms_pay

    rng = np.random.default_rng(7)
    X, y = make_regression(900, 6, noise=1.0, random_state=2)
    X = with_nan(X, rng)
    data = prepare_tree_data(X, 48, 0)
    labels = (y > np.median(y)).astype(float)
    cases = [  # (target, weights, n_classes, params): pools of different shapes and sizes
        (y, np.ones(900), 1, GrowthParams(CRITERION_SQUARED_ERROR, False, 48, 6, -1, 2, 3,
                                          0.0, 0.0, 20)),
        (y, rng.integers(0, 3, 900).astype(float), 1,
         GrowthParams(CRITERION_SQUARED_ERROR, False, 48, 6, -1, 2, 3, 0.0, 0.0, 40)),
        (y, np.ones(900), 1, GrowthParams(CRITERION_SQUARED_ERROR, False, 48, 6, -1, 2, 1,
                                          0.0, 0.0, -1)),  # depth-first: the pool grows
        (labels, np.ones(900), 2, GrowthParams(CRITERION_GINI, False, 48, 3, 6, 2, 1, 0.0,
                                               0.0, -1)),
        (y, np.ones(900), 1, GrowthParams(CRITERION_SQUARED_ERROR, False, 48, 6, -1, 2, 3,
                                          0.0, 0.0, 20)),
    ]
    for target, weight, n_classes, params in cases * 2:
        kept = grow_tree_on(data, target, weight, n_classes, params, 3)
        pool, lo, hi = _fit._THREAD_STATE.hist_pool
        # Trees drawing well under all features build one feature's histogram at a time
        # (one slot); the others hold at least four.
        slots = 1 if feature_histograms_pay(data.n_features, params.max_features) else 4
        assert pool.shape[0] >= slots and not pool.any()  # kept for the next tree, all zero
        del _fit._THREAD_STATE.hist_pool
        fresh = grow_tree_on(data, target, weight, n_classes, params, 3)
        for name in ("threshold", "feature", "children_left", "value", "impurity"):
            assert np.array_equal(getattr(kept, name), getattr(fresh, name))


def test_hand_offs_that_lose_time_are_skipped_for_doubling_runs_of_trees():
    from cipherforest.tree._node_threads import MAX_SKIPPED_TREES, HandOffGovernor

    governor = HandOffGovernor()

    def skipped_run():
        n = 0
        while not governor.hand_off_next_tree():
            n += 1
        return n

    assert skipped_run() == 0
    runs = []
    for _ in range(7):  # every probing tree loses time again
        governor.report(-1e-4)
        runs.append(skipped_run())
    assert runs == [1, 2, 4, 8, 16, 16, 16] and MAX_SKIPPED_TREES == 16
    governor.report(2e-4)  # the probe paid: hand off in every tree again
    assert skipped_run() == 0
    governor.report(-1e-4)
    assert skipped_run() == 1
    governor.report(5.0, posted=4, taken_back=2)  # half the steps found no thread: fine
    assert skipped_run() == 0
    governor.report(5.0, posted=4, taken_back=3)  # most found none: the worker had no core
    assert skipped_run() == 1


def test_binomial_pass_is_the_two_sided_sigmoid_bit_for_bit():
    rng = np.random.default_rng(9)
    n = 2000
    y = rng.integers(0, 2, size=n).astype(float)
    raw = np.concatenate([rng.normal(scale=4.0, size=n - 4), [0.0, -0.0, 40.0, -40.0]])[:, None]
    w = rng.uniform(0.5, 2.0, size=n)
    gradient, loss = BinomialLoss().gradient_and_loss(y, raw, w)
    r = raw[:, 0]
    e = np.array([math.exp(-abs(v)) for v in r])  # libm's exp, as the kernel (NumPy's own
    # vectorised exp can differ in the last bit)
    # The stable sigmoid, each side its own division (what the compiled pass must equal).
    p = np.where(r >= 0.0, 1.0 / (1.0 + e), e / (1.0 + e))
    assert np.array_equal(gradient[:, 0], y - p)
    assert loss == pytest.approx(BinomialLoss()(y, raw, w), rel=1e-12)


def _half_binomial_oracle(y, r, w):
    """The weighted half binomial loss summed exactly (``math.fsum``) from libm's ``log1p``
    row by row: what ``_add_log1p``'s products and logarithms must stay close to."""
    terms = [wi * (max(ri, 0.0) - yi * ri + math.log1p(math.exp(-abs(ri))))
             for yi, ri, wi in zip(y.tolist(), r.tolist(), w.tolist(), strict=True)]
    return math.fsum(terms)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 1500), scale=st.sampled_from([0.5, 4.0, 30.0]),
       weights=st.sampled_from(["unit", "mixed", "none unit"]), seed=st.integers(0, 2**16))
def test_binomial_loss_by_log_products_equals_the_log1p_sum(n, scale, weights, seed):
    """Unit-weight rows' log1p terms are summed as logarithms of products (512 factors a
    product, a series below 2^-10); the loss stays within 1e-12 of the exact sum of
    libm's log1p terms, for raw scores from near 0 to saturated (|r| ~ 100), across product
    boundaries and with weights other than 1 mixed in; the gradient is untouched."""
    rng = np.random.default_rng(seed)
    r = rng.normal(scale=scale, size=n)
    y = rng.integers(0, 2, size=n).astype(float)
    w = {"unit": np.ones(n), "none unit": rng.uniform(0.5, 2.0, size=n),
         "mixed": np.where(rng.random(n) < 0.3, rng.uniform(0.0, 3.0, size=n), 1.0)}[weights]
    expected = _half_binomial_oracle(y, r, w)
    gradient = np.empty(n)
    total, weight = gb_losses._binomial_gradient_loss(y, r, w, gradient, 0, n)
    assert total == pytest.approx(expected, rel=1e-12, abs=1e-300)
    assert weight == pytest.approx(math.fsum(w.tolist()), rel=1e-12)
    mean = gb_losses._mean_half_binomial(y, r, w)
    assert mean == pytest.approx(expected / math.fsum(w.tolist()), rel=1e-12)
    e = np.array([math.exp(-abs(v)) for v in r])
    assert np.array_equal(gradient, y - np.where(r >= 0.0, 1.0 / (1.0 + e), e / (1.0 + e)))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 1200), n_classes=st.sampled_from([3, 10, 130]),
       scale=st.sampled_from([0.5, 5.0, 40.0]), unit=st.booleans(), seed=st.integers(0, 2**16))
def test_multinomial_loss_by_log_products_equals_the_log_sum(n, n_classes, scale, unit, seed):
    """Unit-weight rows' log(norm) terms are summed as logarithms of products of norms (up
    to 1000 // bits(K) a product, across their boundaries here): the loss stays within
    1e-12 of the exact sum of the per-row terms top + log(norm) - raw[label]; the gradient
    is the one computed before (softmax, one division per class)."""
    rng = np.random.default_rng(seed)
    raw = rng.normal(scale=scale, size=(n, n_classes))
    y = rng.integers(0, n_classes, size=n).astype(np.int32)
    w = np.ones(n) if unit else rng.uniform(0.0, 2.0, size=n)
    top = raw.max(axis=1)
    exps = np.exp(raw - top[:, None])
    norm = exps.sum(axis=1)
    terms = w * (top + np.log(norm) - raw[np.arange(n), y])
    gradient = np.empty((n, n_classes))
    total, weight = gb_losses._multinomial_gradient_loss(y, raw, w, gradient, 0, n)
    assert total == pytest.approx(math.fsum(terms.tolist()), rel=1e-12, abs=1e-12)
    assert weight == pytest.approx(math.fsum(w.tolist()), rel=1e-12)
    expected = -(exps / norm[:, None])
    expected[np.arange(n), y] += 1.0
    # NumPy sums each norm in another order (pairwise): the probabilities differ by up to
    # ~K rounding steps relative, which 1 - p at the label keeps in absolute terms.
    np.testing.assert_allclose(gradient, expected, rtol=1e-13,
                               atol=4 * n_classes * np.finfo(np.float64).eps)


def test_binomial_loss_keeps_the_tiny_terms_of_a_confident_model():
    """A model sure of every row (|r| between 7 and 40: each log1p term between 4e-18 and
    1e-3, on either side of the series threshold) reports its small loss to 1e-12,
    not the 0 that products of 1 + e rounded to 1 would give."""
    n = 3000
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, size=n).astype(float)
    r = np.where(y == 1.0, 1.0, -1.0) * rng.uniform(7.0, 40.0, size=n)
    w = np.ones(n)
    expected = _half_binomial_oracle(y, r, w)
    assert 0.0 < expected < 1.0
    total, _ = gb_losses._binomial_gradient_loss(y, r, w, np.empty(n), 0, n)
    assert total == pytest.approx(expected, rel=1e-12)
