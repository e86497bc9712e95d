"""Root splits checked against a brute-force evaluation of the textbook split formulas.

The oracle is a direct Python transcription of the definitions in the project's seed notes
(``trees-and-ensembles``):

* Gini ``G(S) = sum_k p_k (1 - p_k)``, entropy ``H(S) = -sum_k p_k log2 p_k`` and, for
  regression, the mean squared deviation from the mean, with ``p_k`` and the mean weighted by
  the sample weights;
* the gain of a split ``dI = I(S) - |S_L|/|S| I(S_L) - |S_R|/|S| I(S_R)``, where ``|.|`` is
  the total sample weight;
* candidate thresholds are the midpoints of consecutive distinct values and ``x <= t`` goes
  left; with NaN in a feature each threshold is tried with NaN left and NaN right, plus the
  split "every observed value left, NaN right".

Using hypothesis, small datasets with many ties in ``X`` are fitted with ``max_depth=1`` and
the tree's root split is compared with the oracle: the best gain must agree within 1e-9, the
split the tree chose (feature, threshold, NaN side) must achieve that best gain on the data,
its threshold must be one of the candidate midpoints, and the children recorded in ``tree_``
must be exactly the partition that split induces. Ties between equally good splits may be
broken either way, so only the gain (not the feature) of the chosen split is compared.

Proves: the exact split finder is an exhaustive arg-max of the textbook gain for every
criterion, with and without sample weights and missing values; the histogram finder finds the
same best gain when a feature has fewer distinct values than bins; pure nodes stay leaves.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cipherforest import DecisionTreeClassifier, DecisionTreeRegressor

TOL = 1e-9
GRID = (-1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.5)

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------------- oracle
def impurity(y: np.ndarray, w: np.ndarray, criterion: str) -> float:
    """Textbook impurity of the node holding samples ``y`` with weights ``w``."""
    total = w.sum()
    if criterion in ("gini", "entropy"):
        p = np.array([w[y == k].sum() for k in np.unique(y)]) / total
        if criterion == "gini":
            return float(np.sum(p * (1.0 - p)))
        p = p[p > 0]
        return float(-np.sum(p * np.log2(p)))
    mean = np.sum(w * y) / total
    return float(np.sum(w * (y - mean) ** 2) / total)


def gain(y: np.ndarray, w: np.ndarray, goes_left: np.ndarray, criterion: str) -> float:
    """``dI = I(S) - |S_L|/|S| I(S_L) - |S_R|/|S| I(S_R)`` (weights as sizes)."""
    total, w_left, w_right = w.sum(), w[goes_left].sum(), w[~goes_left].sum()
    return (impurity(y, w, criterion)
            - w_left / total * impurity(y[goes_left], w[goes_left], criterion)
            - w_right / total * impurity(y[~goes_left], w[~goes_left], criterion))


def midpoints(column: np.ndarray) -> np.ndarray:
    """Midpoints of consecutive distinct non-missing values (the candidate thresholds)."""
    distinct = np.unique(column[~np.isnan(column)])
    return distinct[:-1] / 2.0 + distinct[1:] / 2.0


def partition(column: np.ndarray, threshold: float, nan_left: bool) -> np.ndarray:
    """Rows that go left: ``x <= threshold``, and NaN iff ``nan_left``."""
    missing = np.isnan(column)
    return np.where(missing, nan_left, column <= threshold)


def candidate_splits(X: np.ndarray):
    """Every ``(feature, threshold, nan_left, goes_left)`` the seed rules allow."""
    for j in range(X.shape[1]):
        column = X[:, j]
        has_nan = bool(np.isnan(column).any())
        for t in midpoints(column):
            for nan_left in (False, True) if has_nan else (False,):
                yield j, t, nan_left, partition(column, t, nan_left)
        if has_nan and not np.isnan(column).all():
            yield j, np.inf, False, partition(column, np.inf, False)


def brute_force_best_gain(X, y, w, criterion) -> float | None:
    """Largest gain over every candidate split with two non-empty children (None: none)."""
    gains = [gain(y, w, left, criterion) for _, _, _, left in candidate_splits(X)
             if 0 < left.sum() < len(left)]
    return max(gains) if gains else None


# ----------------------------------------------------------------------------- data
@st.composite
def datasets(draw, task: str, weighted: bool, with_nan: bool = False):
    """Small ``(X, y, sample_weight)`` with values on a coarse grid, so X has many ties."""
    n_samples = draw(st.integers(5, 40))
    n_features = draw(st.integers(1, 4))
    values = st.sampled_from(GRID + ((np.nan,) if with_nan else ()))
    X = draw(hnp.arrays(np.float64, (n_samples, n_features), elements=values))
    if task == "classification":
        n_classes = draw(st.integers(2, 4))
        y = draw(hnp.arrays(np.int64, n_samples, elements=st.integers(0, n_classes - 1)))
    else:
        y = draw(hnp.arrays(np.float64, n_samples,
                            elements=st.integers(-5, 5).map(float) | st.floats(-10, 10)))
    w = np.ones(n_samples)
    if weighted:
        w = draw(hnp.arrays(np.float64, n_samples, elements=st.floats(0.1, 10.0)))
    return X, y, w


def fit_stump(X, y, w, criterion, max_bins=None):
    cls = DecisionTreeRegressor if criterion == "squared_error" else DecisionTreeClassifier
    return cls(criterion=criterion, max_depth=1, random_state=0, max_bins=max_bins).fit(
        X, y, sample_weight=w)


def tree_root_gain(tree) -> float:
    """Root gain computed from ``tree_``'s impurities and weighted node sizes."""
    w = tree.weighted_n_node_samples
    imp = tree.impurity
    left, right = tree.children_left[0], tree.children_right[0]
    return imp[0] - w[left] / w[0] * imp[left] - w[right] / w[0] * imp[right]


def check_root_split(X, y, w, criterion, max_bins=None):
    """Assert that the fitted stump's root split is a best split according to the oracle."""
    est = fit_stump(X, y, w, criterion, max_bins)
    tree = est.tree_
    best = brute_force_best_gain(X, y, w, criterion)
    root_impurity = impurity(y, w, criterion)

    if best is None:  # every feature constant (or NaN only): nothing to split on
        assert tree.node_count == 1
        return
    if root_impurity == 0.0 and criterion != "squared_error":
        assert tree.node_count == 1, "a pure node must stay a leaf"
        return
    if tree.node_count == 1:
        # Only acceptable for a node that is pure up to rounding of the variance, or whose
        # best split has no positive gain (a zero-gain split may be rejected when rounding
        # makes its computed decrease slightly negative, as in scikit-learn).
        assert (criterion == "squared_error" and root_impurity == 0.0) or best <= TOL
        return

    assert tree.node_count == 3
    assert tree.impurity[0] == pytest.approx(root_impurity, abs=TOL)
    ours = tree_root_gain(tree)
    assert ours == pytest.approx(best, abs=TOL), "tree's root gain is not the best gain"

    # The split stored in tree_ must be a candidate and must induce the recorded children.
    feature, threshold = tree.feature[0], tree.threshold[0]
    column = X[:, feature]
    nan_left = bool(tree.missing_go_to_left[0])
    if np.isinf(threshold):
        assert np.isnan(column).any() and not nan_left, "threshold inf is the NaN-right split"
    else:
        assert threshold in set(midpoints(column)), "threshold is not a midpoint"
    goes_left = partition(column, threshold, nan_left)
    left, right = tree.children_left[0], tree.children_right[0]
    assert tree.n_node_samples[left] == goes_left.sum()
    assert tree.n_node_samples[right] == (~goes_left).sum()
    np.testing.assert_allclose(tree.weighted_n_node_samples[[left, right]],
                               [w[goes_left].sum(), w[~goes_left].sum()], rtol=1e-12)
    assert gain(y, w, goes_left, criterion) == pytest.approx(best, abs=TOL), (
        "the chosen (feature, threshold, NaN side) does not achieve the best gain")
    # Children impurities are the textbook ones.
    assert tree.impurity[left] == pytest.approx(
        impurity(y[goes_left], w[goes_left], criterion), abs=TOL)
    assert tree.impurity[right] == pytest.approx(
        impurity(y[~goes_left], w[~goes_left], criterion), abs=TOL)


def task_of(criterion: str) -> str:
    return "regression" if criterion == "squared_error" else "classification"


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("criterion", ["gini", "entropy", "squared_error"])
def test_root_split_is_brute_force_best(criterion, weighted):
    @SETTINGS
    @given(data=datasets(task_of(criterion), weighted))
    def run(data):
        check_root_split(*data, criterion)

    run()


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("criterion", ["gini", "entropy", "squared_error"])
def test_root_split_with_missing_values_is_brute_force_best(criterion, weighted):
    @SETTINGS
    @given(data=datasets(task_of(criterion), weighted, with_nan=True))
    def run(data):
        check_root_split(*data, criterion)

    run()


@pytest.mark.parametrize("with_nan", [False, True], ids=["no_nan", "nan"])
@pytest.mark.parametrize("criterion", ["gini", "entropy", "squared_error"])
def test_histogram_root_split_is_brute_force_best(criterion, with_nan):
    """With fewer distinct values than bins, bin boundaries are exactly the midpoints."""
    @SETTINGS
    @given(data=datasets(task_of(criterion), weighted=True, with_nan=with_nan))
    def run(data):
        check_root_split(*data, criterion, max_bins=255)

    run()


@pytest.mark.parametrize("max_bins", [None, 255], ids=["exact", "hist"])
@pytest.mark.parametrize("criterion", ["gini", "entropy", "squared_error"])
def test_every_node_split_is_brute_force_best(criterion, max_bins):
    """Deeper nodes too: in a fully grown tree each split is the best one for the training
    rows that reach the node (found by routing them through the tree), and a leaf is pure,
    has no candidate split, or has no split of positive gain (a split of zero gain may be
    rejected when rounding makes its computed decrease slightly negative, as in
    scikit-learn)."""
    cls = DecisionTreeRegressor if criterion == "squared_error" else DecisionTreeClassifier

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=datasets(task_of(criterion), weighted=True, with_nan=True))
    def run(data):
        X, y, w = data
        est = cls(criterion=criterion, random_state=0, max_bins=max_bins).fit(X, y, w)
        tree = est.tree_
        path = est.decision_path(X).tocsc()
        for node in range(tree.node_count):
            rows = path[:, node].nonzero()[0]
            best = brute_force_best_gain(X[rows], y[rows], w[rows], criterion)
            if tree.children_left[node] == -1:
                assert (best is None or best <= TOL
                        or impurity(y[rows], w[rows], criterion) <= TOL)
                continue
            left, right = tree.children_left[node], tree.children_right[node]
            weights, imp = tree.weighted_n_node_samples, tree.impurity
            ours = (imp[node] - weights[left] / weights[node] * imp[left]
                    - weights[right] / weights[node] * imp[right])
            assert best is not None and ours == pytest.approx(best, abs=TOL)

    run()


@pytest.mark.parametrize("criterion", ["gini", "entropy", "squared_error"])
def test_constant_labels_give_single_leaf(criterion):
    """All labels equal: the best gain is 0 and the root stays a leaf."""
    @SETTINGS
    @given(data=datasets(task_of(criterion), weighted=criterion != "squared_error"),
           label=st.integers(-3, 3))
    def run(data, label):
        X, _, w = data
        y = np.full(X.shape[0], label, dtype=np.int64 if criterion != "squared_error"
                    else np.float64)
        best = brute_force_best_gain(X, y, w, criterion)
        assert best is None or best <= 0.0
        assert fit_stump(X, y, w, criterion).tree_.node_count == 1

    run()


@pytest.mark.parametrize("criterion", ["gini", "entropy"])
def test_zero_gain_impure_root_is_split_like_sklearn(criterion):
    """An impure node whose best gain is exactly 0 is still split, as scikit-learn does.

    (Only a pure node or a node without any candidate split becomes a leaf; a zero gain is
    not a stopping rule unless ``min_impurity_decrease > 0``.)
    """
    from sklearn.tree import DecisionTreeClassifier as SkTree

    X = np.array([[0.0], [0.0], [1.0], [1.0]])
    y = np.array([0, 1, 0, 1])
    assert brute_force_best_gain(X, y, np.ones(4), criterion) == 0.0
    ours = DecisionTreeClassifier(criterion=criterion, random_state=0).fit(X, y).tree_
    theirs = SkTree(criterion=criterion, random_state=0).fit(X, y).tree_
    assert ours.node_count == theirs.node_count == 3
    assert ours.threshold[0] == theirs.threshold[0] == 0.5
    assert tree_root_gain(ours) == 0.0
    stopped = DecisionTreeClassifier(criterion=criterion, min_impurity_decrease=1e-12).fit(X, y)
    assert stopped.tree_.node_count == 1


def test_log_loss_is_entropy():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 5, size=(60, 3)).astype(float)
    y = rng.integers(0, 3, size=60)
    a = DecisionTreeClassifier(criterion="entropy", random_state=1).fit(X, y).tree_
    b = DecisionTreeClassifier(criterion="log_loss", random_state=1).fit(X, y).tree_
    for name, array in a.arrays().items():
        np.testing.assert_array_equal(array, b.arrays()[name], err_msg=name)
    # Base-2: a balanced binary node has entropy exactly 1.
    assert DecisionTreeClassifier(criterion="entropy").fit(
        [[0.0], [1.0]], [0, 1]).tree_.impurity[0] == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize("criterion", ["gini", "entropy", "squared_error"])
def test_hand_computed_root_split(criterion):
    """A worked example whose best split is unique: feature 1 at 1.5."""
    X = np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 2.0], [1.0, 3.0], [1.0, 1.0], [0.0, 2.0]])
    y = np.array([0, 0, 1, 1, 0, 1])
    est = fit_stump(X, y.astype(float) if criterion == "squared_error" else y,
                    np.ones(6), criterion)
    tree = est.tree_
    assert (tree.feature[0], tree.threshold[0]) == (1, 1.5)
    expected_root = {"gini": 0.5, "entropy": 1.0, "squared_error": 0.25}[criterion]
    assert tree.impurity[0] == pytest.approx(expected_root, abs=1e-15)
    assert tree_root_gain(tree) == pytest.approx(expected_root, abs=1e-15)
