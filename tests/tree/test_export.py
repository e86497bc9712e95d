"""export_text must print what scikit-learn prints; plot_tree draws one box per node."""

from __future__ import annotations

import sys

import matplotlib
import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.tree import export_text as sk_export_text

from cipherforest.tree._common import TREE_LEAF
from cipherforest.tree._export import export_text, plot_tree
from cipherforest.tree._tree import NODE_FIELDS, Tree

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Annotation  # noqa: E402


class FittedTree(BaseEstimator):
    """Stand-in for a cipherforest estimator: our Tree plus the fitted attributes."""

    def fit(self, X, y):
        return self


def wrap(sk_estimator=None, **attributes) -> FittedTree:
    """A FittedTree holding ``sk_estimator``'s tree as our Tree, plus ``attributes``."""
    est = FittedTree()
    if sk_estimator is not None:
        sk_tree = sk_estimator.tree_
        arrays = {name: getattr(sk_tree, name) for name in [*NODE_FIELDS, "value"]}
        est.tree_ = Tree(sk_tree.n_features, sk_tree.n_classes, arrays)
        est.n_outputs_ = sk_estimator.n_outputs_
        est.n_features_in_ = sk_estimator.n_features_in_
        est.criterion = sk_estimator.criterion
        if hasattr(sk_estimator, "classes_"):
            est.classes_ = sk_estimator.classes_
    for name, value in attributes.items():
        setattr(est, name, value)
    return est


def make_data(seed=0, n=300, n_features=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_features))
    score = X[:, 0] - X[:, 1] + 0.5 * rng.normal(size=n)
    return X, score, rng.uniform(0.2, 2.0, size=n)


def fitted_classifier(seed=0, labels=None, weighted=False, **params):
    X, score, w = make_data(seed)
    y = np.digitize(score, [-1.0, 0.5])
    if labels is not None:
        y = np.asarray(labels)[y]
    est = DecisionTreeClassifier(random_state=seed, **params)
    return est.fit(X, y, sample_weight=w if weighted else None)


def fitted_regressor(seed=0, n_outputs=1, **params):
    X, score, w = make_data(seed)
    y = score if n_outputs == 1 else np.column_stack([score * k for k in range(1, n_outputs + 1)])
    return DecisionTreeRegressor(random_state=seed, **params).fit(X, y, sample_weight=w)


OPTIONS = [
    {},
    {"max_depth": 2},
    {"max_depth": 0},
    {"spacing": 1, "decimals": 4},
    {"spacing": 5, "decimals": 0},
    {"show_weights": True},
    {"feature_names": ["alpha", "beta", "gamma", "delta"]},
]


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("labels", [None, ["low", "mid", "high"], [-1.0, 2.0, 7.0]])
def test_export_text_classifier_matches_sklearn(options, weighted, labels):
    sk_est = fitted_classifier(labels=labels, weighted=weighted, max_depth=6)
    ours = export_text(wrap(sk_est), **options)
    assert ours == sk_export_text(sk_est, **options)


@pytest.mark.parametrize("options", [*OPTIONS, {"class_names": ["a", "b", "c"]}])
def test_export_text_classifier_options(options):
    sk_est = fitted_classifier(seed=1)
    assert export_text(wrap(sk_est), **options) == sk_export_text(sk_est, **options)


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("n_outputs", [1, 2])
def test_export_text_regressor_matches_sklearn(options, n_outputs):
    sk_est = fitted_regressor(n_outputs=n_outputs, max_depth=5)
    ours = export_text(wrap(sk_est), **options)
    assert ours == sk_export_text(sk_est, **options)


def test_export_text_multi_output_classifier_matches_sklearn():
    X, score, _ = make_data(2)
    Y = np.column_stack([score > 0, np.digitize(score, [-1, 0, 1])])
    sk_est = DecisionTreeClassifier(random_state=0, max_depth=4).fit(X, Y)
    for options in ({}, {"show_weights": True}):
        assert export_text(wrap(sk_est), **options) == sk_export_text(sk_est, **options)


def test_export_text_single_leaf():
    sk_est = DecisionTreeClassifier().fit(np.zeros((5, 2)), [1, 1, 1, 1, 1])
    # One class: like sklearn, the class index is printed, not the label.
    assert export_text(wrap(sk_est)) == "|--- class: 0\n" == sk_export_text(sk_est)


def test_export_text_deep_tree_has_no_recursion_limit():
    n = 3000  # a caterpillar tree deeper than Python's recursion limit
    left = np.full(2 * n + 1, TREE_LEAF)
    right = np.full(2 * n + 1, TREE_LEAF)
    left[0:2 * n:2] = np.arange(1, 2 * n, 2)
    right[0:2 * n:2] = np.arange(2, 2 * n + 1, 2)
    internal = left != TREE_LEAF
    arrays = {
        "children_left": left, "children_right": right,
        "feature": np.where(internal, 0, -2), "threshold": np.where(internal, 0.5, -2.0),
        "impurity": np.zeros(2 * n + 1), "n_node_samples": np.ones(2 * n + 1),
        "weighted_n_node_samples": np.ones(2 * n + 1), "missing_go_to_left": np.zeros(2 * n + 1),
        "value": np.ones((2 * n + 1, 1, 1)),
    }
    est = wrap(tree_=Tree(1, [1], arrays), n_outputs_=1, criterion="squared_error")
    text = export_text(est, max_depth=5000)
    assert text.count("value: [1.00]") == n + 1


def test_export_text_uses_feature_names_in():
    sk_est = fitted_classifier(max_depth=3)
    names = np.array(["a", "b", "c", "d"], dtype=object)
    est = wrap(sk_est, feature_names_in_=names)
    assert export_text(est) == sk_export_text(sk_est, feature_names=list(names))
    assert export_text(est, feature_names=["w", "x", "y", "z"]) == sk_export_text(
        sk_est, feature_names=["w", "x", "y", "z"])


def test_export_text_nan_annotation_only_when_nan_seen():
    sk_est = fitted_classifier(max_depth=2)
    est = wrap(sk_est)
    plain = export_text(est)
    assert "NaN" not in plain
    est.missing_values_in_feature_mask_ = np.array([True, False, False, False])
    annotated = export_text(est)
    tree = est.tree_
    split_on_0 = np.flatnonzero(tree.feature == 0)
    assert annotated.count("(NaN: ") == split_on_0.size > 0
    side = "left" if tree.missing_go_to_left[split_on_0[0]] else "right"
    assert f"feature_0 <= {tree.threshold[split_on_0[0]]:.2f} (NaN: {side})" in annotated
    assert annotated.replace(" (NaN: left)", "").replace(" (NaN: right)", "") == plain


def test_export_text_errors():
    est = wrap(fitted_classifier())
    with pytest.raises(ValueError, match="feature_names must contain 4 elements"):
        export_text(est, feature_names=["a"])
    with pytest.raises(ValueError, match="class_names"):
        export_text(est, class_names=["a"])
    with pytest.raises(ValueError, match="spacing"):
        export_text(est, spacing=0)
    with pytest.raises(NotFittedError):
        export_text(FittedTree())


# ---------------------------------------------------------------------------- plot_tree
def drawn_node_count(tree: Tree, max_depth: int | None) -> int:
    depth = np.zeros(tree.node_count, dtype=int)
    for i in range(tree.node_count):
        if tree.children_left[i] != TREE_LEAF:
            depth[[tree.children_left[i], tree.children_right[i]]] = depth[i] + 1
    if max_depth is None:
        return tree.node_count
    # nodes down to max_depth, plus one "(...)" box per child of a cut internal node
    return int(np.sum(depth <= max_depth) + np.sum(depth == max_depth + 1))


@pytest.fixture
def ax():
    fig, ax = plt.subplots(figsize=(8, 6))
    yield ax
    plt.close(fig)


@pytest.mark.parametrize("max_depth", [None, 0, 1, 2])
def test_plot_tree_one_annotation_per_node(ax, max_depth):
    est = wrap(fitted_classifier(labels=["low", "mid", "high"], max_depth=4))
    anns = plot_tree(est, max_depth=max_depth, ax=ax)
    assert all(isinstance(a, Annotation) for a in anns)
    assert len(anns) == drawn_node_count(est.tree_, max_depth)
    assert len([a for a in ax.texts if isinstance(a, Annotation)]) == len(anns)
    tree = est.tree_
    root = anns[0].get_text()
    assert f"x[{tree.feature[0]}] <= {round(tree.threshold[0], 3)}" in root
    assert "gini = " in root and f"samples = {tree.n_node_samples[0]}" in root
    assert "class = " in root
    if max_depth == 0:
        assert [a.get_text() for a in anns[1:]] == ["(...)", "(...)"]


def test_plot_tree_texts_in_preorder(ax):
    sk_est = fitted_classifier(max_depth=3)
    est = wrap(sk_est)
    names = ["a", "b", "c", "d"]
    anns = plot_tree(est, feature_names=names, ax=ax, node_ids=True, fontsize=7)
    tree = est.tree_
    assert len(anns) == tree.node_count
    for node, ann in enumerate(anns):  # sklearn's depth-first builder numbers in preorder
        text = ann.get_text()
        assert text.startswith(f"node #{node}\n")
        assert ann.get_fontsize() == 7
        if tree.children_left[node] != TREE_LEAF:
            assert f"{names[tree.feature[node]]} <= {round(tree.threshold[node], 3)}" in text
        else:
            assert "<=" not in text
        counts = tree.value[node, 0] * tree.weighted_n_node_samples[node]
        assert f"value = [{', '.join(str(int(round(c))) for c in counts)}]" in text
        assert f"class = {sk_est.classes_[np.argmax(counts)]}" in text
    assert {t.get_text() for t in ax.texts} >= {"True  ", "  False"}


def test_plot_tree_regression_and_options(ax):
    est = wrap(fitted_regressor(max_depth=3))
    anns = plot_tree(est, filled=True, impurity=False, proportion=True, ax=ax)
    assert len(anns) == est.tree_.node_count
    root = anns[0].get_text()
    assert "squared_error" not in root and "samples = 100.0%" in root
    assert f"value = {round(est.tree_.value[0, 0, 0], 3)}" in root
    faces = {a.get_bbox_patch().get_facecolor() for a in anns}
    assert len(faces) > 1


@pytest.mark.parametrize("kind", ["multi_regression", "multi_classification", "classifier"])
def test_plot_tree_filled_variants(ax, kind):
    if kind == "multi_regression":
        est = wrap(fitted_regressor(n_outputs=2, max_depth=2))
    elif kind == "classifier":
        est = wrap(fitted_classifier(max_depth=2))
    else:
        X, score, _ = make_data(1)
        Y = np.column_stack([score > 0, score > 1])
        est = wrap(DecisionTreeClassifier(max_depth=2, random_state=0).fit(X, Y))
    anns = plot_tree(est, filled=True, class_names=True, ax=ax)
    assert len(anns) == est.tree_.node_count
    assert "value = [" in anns[0].get_text()


def test_plot_tree_default_axes_and_feature_names_in():
    est = wrap(fitted_classifier(max_depth=1),
                     feature_names_in_=np.array(["a", "b", "c", "d"], dtype=object))
    fig = plt.figure()
    try:
        anns = plot_tree(est)
        assert anns[0].axes is fig.gca()
        assert anns[0].get_text().startswith(
            f"{'abcd'[est.tree_.feature[0]]} <= ")
    finally:
        plt.close(fig)


def test_plot_tree_errors(ax, monkeypatch):
    with pytest.raises(NotFittedError):
        plot_tree(FittedTree(), ax=ax)
    est = wrap(fitted_classifier(max_depth=1))
    with pytest.raises(ValueError, match="class_names"):
        plot_tree(est, class_names=["only one"], ax=ax)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"cipherforest\[plot\]"):
        plot_tree(est, ax=ax)
