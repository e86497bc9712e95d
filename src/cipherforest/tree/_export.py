"""Human-readable views of a fitted tree: a text report and a matplotlib drawing.

Both work on any fitted estimator exposing ``tree_`` (a :class:`~cipherforest.tree._tree.Tree`);
an estimator with ``classes_`` is treated as a classifier. A split on a feature listed in the
estimator's optional ``missing_values_in_feature_mask_`` (bool per feature: NaN seen during
fit) is annotated with the side NaN values go to; without that attribute nothing is added,
and ``export_text`` prints exactly what ``sklearn.tree.export_text`` prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from io import StringIO
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._common import TREE_LEAF, TREE_UNDEFINED

_PLOT_IMPORT_ERROR = (
    "plot_tree requires matplotlib, which is not installed; install it with "
    "`pip install 'cipherforest[plot]'`"
)


# ---------------------------------------------------------------------------- helpers
def _is_classifier(decision_tree: Any) -> bool:
    return hasattr(decision_tree, "classes_")


def _check_single_tree(decision_tree: Any, function: str) -> None:
    """Reject ensembles with a message saying what to pass; then require a fitted tree."""
    is_ensemble = not hasattr(decision_tree, "tree_") and (
        hasattr(decision_tree, "estimators_") or hasattr(decision_tree, "n_estimators"))
    if is_ensemble:
        # scikit-learn rejects ensembles too; say which object to pass instead.
        raise TypeError(
            f"{function} shows one decision tree, but got the ensemble "
            f"{type(decision_tree).__name__}; pass one of its fitted trees, an element of "
            f"its estimators_ (e.g. {function}(model.estimators_[0]) for a forest, "
            f"{function}(model.estimators_[0, 0]) for gradient boosting)")
    check_is_fitted(decision_tree, "tree_")


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _feature_names(decision_tree: Any, feature_names: Any, n_features: int) -> list | None:
    """The user's names, else ``feature_names_in_``, else None; length-checked."""
    if feature_names is None:
        feature_names = getattr(decision_tree, "feature_names_in_", None)
    if feature_names is None:
        return None
    names = list(np.asarray(feature_names, dtype=object).ravel())
    if len(names) != n_features:
        raise ValueError(f"feature_names must contain {n_features} elements, got {len(names)}")
    return names


def _nan_seen(decision_tree: Any, n_features: int) -> np.ndarray:
    """Per-feature mask of the features that had missing values during fit."""
    mask = getattr(decision_tree, "missing_values_in_feature_mask_", None)
    if mask is None:
        return np.zeros(n_features, dtype=bool)
    return np.broadcast_to(np.asarray(mask, dtype=bool), (n_features,))


def _nan_note(tree: Any, node: int, nan_seen: np.ndarray) -> str:
    if not nan_seen[tree.feature[node]]:
        return ""
    return " (NaN: left)" if tree.missing_go_to_left[node] else " (NaN: right)"


def _subtree_depth(tree: Any, node: int) -> int:
    """Number of levels of the subtree rooted at ``node`` (a leaf has 1)."""
    deepest = 1
    stack = [(node, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if tree.children_left[node] != TREE_LEAF:
            stack.append((tree.children_left[node], depth + 1))
            stack.append((tree.children_right[node], depth + 1))
    return deepest


# ---------------------------------------------------------------------------- text
def export_text(
    decision_tree: Any,
    *,
    feature_names: Sequence[str] | np.ndarray | None = None,
    class_names: Sequence | np.ndarray | None = None,
    max_depth: int = 10,
    spacing: int = 3,
    decimals: int = 2,
    show_weights: bool = False,
) -> str:
    """Text report of the rules of a fitted decision tree, as ``sklearn.tree.export_text``.

    Parameters
    ----------
    decision_tree : estimator
        A fitted tree estimator (attribute ``tree_``; ``classes_`` for classifiers).
    feature_names : array-like of str of shape (n_features,), default=None
        Feature names. Defaults to ``feature_names_in_`` when the estimator has it,
        otherwise ``"feature_0"``, ``"feature_1"``, ...
    class_names : array-like of shape (n_classes,), default=None
        Names of the classes in ascending order; defaults to ``classes_``. Classifiers only.
    max_depth : int, default=10
        Only the first ``max_depth`` levels are printed; deeper branches are summarised as
        ``truncated branch of depth d``.
    spacing : int, default=3
        Number of characters per indentation level.
    decimals : int, default=2
        Number of decimals of thresholds and values.
    show_weights : bool, default=False
        Print the weighted class counts of each leaf (classifiers).

    Returns
    -------
    report : str
        One line per branch and leaf, e.g. ``"|--- feature_1 <= 0.50\\n|   |--- class: 1\\n"``.
        A split on a feature that had NaN during fit (see the module docstring) gets
        ``" (NaN: left)"`` or ``" (NaN: right)"`` appended to its ``<=`` line.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If the estimator is not fitted.
    TypeError
        If given an ensemble (forest, boosting, bagging) instead of one of its trees.
    ValueError
        If ``feature_names`` or ``class_names`` have the wrong length, or an integer
        parameter is out of range.
    """
    _check_single_tree(decision_tree, "export_text")
    max_depth = _check_int("max_depth", max_depth, 0)
    spacing = _check_int("spacing", spacing, 1)
    decimals = _check_int("decimals", decimals, 0)
    tree = decision_tree.tree_
    is_clf = _is_classifier(decision_tree)
    if is_clf:
        if class_names is None:
            class_names = decision_tree.classes_
        elif len(class_names) != len(decision_tree.classes_):
            raise ValueError(
                "When `class_names` is an array, it should contain as many items as "
                f"`decision_tree.classes_`. Got {len(class_names)} while the tree was fitted "
                f"with {len(decision_tree.classes_)} classes.")
    names = _feature_names(decision_tree, feature_names, tree.n_features)
    nan_seen = _nan_seen(decision_tree, tree.n_features)

    def feature_name(node: int) -> str:
        f = int(tree.feature[node])
        return f"feature_{f}" if names is None else str(names[f])

    def leaf_text(node: int) -> str:
        if tree.n_outputs == 1:
            value = tree.value[node][0]
        else:
            value = tree.value[node].T[0]
        if not is_clf:
            return " value: [" + ", ".join(f"{v:.{decimals}f}" for v in value) + "]"
        class_name = np.argmax(value)
        if tree.n_classes[0] != 1 and tree.n_outputs == 1:
            class_name = class_names[class_name]
        text = ""
        if show_weights:
            weight = tree.weighted_n_node_samples[node]
            text = " weights: [" + ", ".join(f"{v * weight:.{decimals}f}" for v in value) + "]"
        return text + " class: " + str(class_name)

    report = StringIO()
    # Iterative preorder walk; each entry is (node, depth) with the root at depth 1.
    stack: list[tuple[Any, ...]] = [("node", 0, 1)]
    while stack:
        item = stack.pop()
        if item[0] == "line":
            report.write(item[1])
            continue
        _, node, depth = item
        indent = ("|" + " " * spacing) * depth
        indent = indent[:-spacing] + "-" * spacing
        if depth <= max_depth + 1:
            if tree.feature[node] != TREE_UNDEFINED:
                name = feature_name(node)
                threshold = f"{tree.threshold[node]:.{decimals}f}"
                note = _nan_note(tree, node, nan_seen)
                report.write(f"{indent} {name} <= {threshold}{note}\n")
                stack.append(("node", tree.children_right[node], depth + 1))
                stack.append(("line", f"{indent} {name} >  {threshold}\n"))
                stack.append(("node", tree.children_left[node], depth + 1))
            else:
                report.write(f"{indent}{leaf_text(node)}\n")
        else:
            subtree_depth = _subtree_depth(tree, node)
            if subtree_depth == 1:
                report.write(f"{indent}{leaf_text(node)}\n")
            else:
                report.write(f"{indent} truncated branch of depth {subtree_depth}\n")
    return report.getvalue()


# ---------------------------------------------------------------------------- plot
def _format_number(x: float, precision: int) -> str:
    return str(round(float(x), precision))


def _format_values(values: np.ndarray, precision: int) -> str:
    rounded = np.round(values)
    # Counts rebuilt as proportion * weight are off by an ulp or so; print them as integers.
    if np.all(np.abs(values - rounded) <= 1e-9 * np.maximum(1.0, np.abs(values))):
        return "[" + ", ".join(str(int(v)) for v in rounded) + "]"
    return "[" + ", ".join(_format_number(v, precision) for v in values) + "]"


class _NodeLabeller:
    """Builds the text of each box of ``plot_tree``."""

    def __init__(self, decision_tree: Any, feature_names: Any, class_names: Any,
                 impurity: bool, node_ids: bool, proportion: bool, precision: int = 3):
        self.tree = decision_tree.tree_
        self.is_clf = _is_classifier(decision_tree) and self.tree.n_classes[0] != 1
        self.feature_names = _feature_names(decision_tree, feature_names, self.tree.n_features)
        self.nan_seen = _nan_seen(decision_tree, self.tree.n_features)
        criterion = getattr(decision_tree, "criterion", None)
        self.criterion = criterion if isinstance(criterion, str) else "impurity"
        if class_names is None and self.is_clf and self.tree.n_outputs == 1:
            class_names = decision_tree.classes_
        elif class_names is not None and not isinstance(class_names, bool):
            if len(class_names) < self.tree.max_n_classes:
                raise ValueError(f"class_names must contain {self.tree.max_n_classes} "
                                 f"elements, got {len(class_names)}")
        self.class_names = class_names
        self.impurity = impurity
        self.node_ids = node_ids
        self.proportion = proportion
        self.precision = precision

    def split_text(self, node: int) -> str:
        tree = self.tree
        f = int(tree.feature[node])
        name = f"x[{f}]" if self.feature_names is None else str(self.feature_names[f])
        threshold = _format_number(tree.threshold[node], self.precision)
        return f"{name} <= {threshold}{_nan_note(tree, node, self.nan_seen)}"

    def __call__(self, node: int) -> str:
        tree, precision = self.tree, self.precision
        lines = []
        if self.node_ids:
            lines.append(f"node #{node}")
        if tree.children_left[node] != TREE_LEAF:
            lines.append(self.split_text(node))
        if self.impurity:
            lines.append(f"{self.criterion} = {_format_number(tree.impurity[node], precision)}")
        if self.proportion:
            share = 100.0 * tree.n_node_samples[node] / tree.n_node_samples[0]
            lines.append(f"samples = {round(share, 1)}%")
        else:
            lines.append(f"samples = {tree.n_node_samples[node]}")
        value = tree.value[node]
        if self.is_clf and not self.proportion:
            value = value * tree.weighted_n_node_samples[node]
        if tree.n_outputs == 1 and not self.is_clf:
            lines.append(f"value = {_format_number(value[0, 0], precision)}")
        elif tree.n_outputs == 1:
            lines.append(f"value = {_format_values(value[0], precision)}")
        elif self.is_clf:
            rows = ", ".join(_format_values(row, precision) for row in value)
            lines.append(f"value = [{rows}]")
        else:
            lines.append(f"value = {_format_values(value[:, 0], precision)}")
        if self.is_clf and tree.n_outputs == 1 and self.class_names is not False:
            k = int(np.argmax(tree.value[node][0]))
            if self.class_names is True:
                lines.append(f"class = y[{k}]")
            elif self.class_names is not None:
                lines.append(f"class = {self.class_names[k]}")
        return "\n".join(lines)


class _FillColors:
    """Node colours of ``plot_tree(filled=True)``: hue = majority class (classification) or
    a single hue whose intensity grows with the value (regression) or purity (multi-output)."""

    _REGRESSION_RGB = (0.90, 0.51, 0.22)

    def __init__(self, tree: Any, is_clf: bool):
        import matplotlib as mpl

        self.tree = tree
        self.is_clf = is_clf and tree.n_outputs == 1
        cmap = mpl.colormaps["tab10" if tree.max_n_classes <= 10 else "tab20"]
        self.class_rgb = [cmap(k % cmap.N)[:3] for k in range(tree.max_n_classes)]
        if tree.n_outputs == 1 and not is_clf:
            scores = tree.value[:, 0, 0]
        else:
            scores = -tree.impurity
        self.scores = scores
        self.low, self.high = float(np.min(scores)), float(np.max(scores))

    def __call__(self, node: int) -> tuple[float, float, float]:
        if self.is_clf:
            proba = np.sort(self.tree.value[node, 0])[::-1]
            rgb = self.class_rgb[int(np.argmax(self.tree.value[node, 0]))]
            top, second = proba[0], (proba[1] if proba.shape[0] > 1 else 0.0)
            alpha = 0.0 if second >= 1.0 else (top - second) / (1.0 - second)
        else:
            rgb = self._REGRESSION_RGB
            span = self.high - self.low
            alpha = 0.0 if span == 0 else (self.scores[node] - self.low) / span
        return tuple(alpha * c + (1.0 - alpha) for c in rgb)


def _layout(tree: Any, max_depth: int | None) -> list[tuple[int, int, int, float]]:
    """Boxes to draw in preorder as ``(node, parent_index, depth, x)``.

    ``node == -1`` is a placeholder for a branch cut by ``max_depth``; ``parent_index`` is
    the position of the parent box in the list (-1 for the root). The drawn leaves get
    consecutive x positions from left to right and each parent sits midway between its
    two children.
    """
    boxes: list[list] = []
    children: list[list[int]] = []
    stack = [(0, -1, 0)]
    while stack:
        node, parent, depth = stack.pop()
        index = len(boxes)
        boxes.append([node, parent, depth, 0.0])
        children.append([])
        if parent >= 0:
            children[parent].append(index)
        if node == -1 or tree.children_left[node] == TREE_LEAF:
            continue
        if max_depth is not None and depth >= max_depth:
            stack.extend([(-1, index, depth + 1), (-1, index, depth + 1)])
        else:
            stack.append((int(tree.children_right[node]), index, depth + 1))
            stack.append((int(tree.children_left[node]), index, depth + 1))
    next_x = 0.0
    for index in range(len(boxes)):  # preorder visits the leaves from left to right
        if not children[index]:
            boxes[index][3] = next_x
            next_x += 1.0
    for index in reversed(range(len(boxes))):  # children come after their parent
        if children[index]:
            boxes[index][3] = sum(boxes[c][3] for c in children[index]) / len(children[index])
    return [tuple(box) for box in boxes]


def plot_tree(
    decision_tree: Any,
    *,
    max_depth: int | None = None,
    feature_names: Sequence[str] | np.ndarray | None = None,
    class_names: Sequence | np.ndarray | bool | None = None,
    filled: bool = False,
    impurity: bool = True,
    node_ids: bool = False,
    proportion: bool = False,
    fontsize: float | None = None,
    ax: Any = None,
) -> list:
    """Draw a fitted decision tree with matplotlib.

    Parameters
    ----------
    decision_tree : estimator
        A fitted tree estimator (attribute ``tree_``; ``classes_`` for classifiers).
    max_depth : int, default=None
        Depth of the deepest nodes drawn; the branches below are drawn as ``(...)`` boxes.
        None draws the whole tree.
    feature_names : array-like of str of shape (n_features,), default=None
        Feature names; defaults to ``feature_names_in_`` if present, else ``x[i]``.
    class_names : array-like, bool or None, default=None
        Names of the classes in ascending order for the ``class = ...`` line of
        single-output classifiers. None uses ``classes_``, True uses ``y[k]`` and False
        omits the line.
    filled : bool, default=False
        Colour the boxes by majority class (classification), value (regression) or purity
        (multi-output).
    impurity : bool, default=True
        Show the impurity of each node.
    node_ids : bool, default=False
        Show the id of each node.
    proportion : bool, default=False
        Show samples as a percentage of the root and class values as fractions rather than
        weighted counts.
    fontsize : float, default=None
        Font size of the boxes; None fits the text to the axes.
    ax : matplotlib.axes.Axes, default=None
        Axes to draw into (it is cleared); defaults to the current axes.

    Returns
    -------
    annotations : list of matplotlib.text.Annotation
        One box per drawn node, in depth-first preorder (left child first), including the
        ``(...)`` boxes of truncated branches. The ``True`` / ``False`` edge labels are
        plain texts, not part of the list.

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    sklearn.exceptions.NotFittedError
        If the estimator is not fitted.
    TypeError
        If given an ensemble (forest, boosting, bagging) instead of one of its trees.
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError(_PLOT_IMPORT_ERROR) from exc
    _check_single_tree(decision_tree, "plot_tree")
    if max_depth is not None:
        max_depth = _check_int("max_depth", max_depth, 0)
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.gca()
    tree = decision_tree.tree_
    labeller = _NodeLabeller(decision_tree, feature_names, class_names, impurity, node_ids,
                             proportion)
    colors = _FillColors(tree, labeller.is_clf) if filled else None

    boxes = _layout(tree, max_depth)
    n_cols = max(box[3] for box in boxes) + 1.0
    n_rows = max(box[2] for box in boxes) + 1.0

    def position(box: tuple) -> tuple[float, float]:
        return (box[3] + 0.5) / n_cols, (n_rows - box[2] - 0.5) / n_rows

    ax.clear()
    ax.set_axis_off()
    text_color = matplotlib.rcParams["text.color"]
    common: dict[str, Any] = {"xycoords": "axes fraction", "ha": "center", "va": "center"}
    if fontsize is not None:
        common["fontsize"] = fontsize
    annotations = []
    edge_labels = []
    for index, box in enumerate(boxes):
        node, parent, depth = box[0], box[1], box[2]
        if node == -1:
            text, face = "(...)", "lightgrey"
        else:
            text = labeller(node)
            face = colors(node) if colors is not None else ax.get_facecolor()
        kwargs = dict(common, bbox={"fc": face, "ec": text_color}, zorder=100 - depth)
        xy = position(box)
        if parent < 0:
            annotations.append(ax.annotate(text, xy, **kwargs))
            continue
        parent_xy = position(boxes[parent])
        kwargs["arrowprops"] = {"arrowstyle": "<-", "edgecolor": text_color}
        annotations.append(ax.annotate(text, parent_xy, xytext=xy, **kwargs))
        if parent == 0:
            middle = ((parent_xy[0] + xy[0]) / 2, (parent_xy[1] + xy[1]) / 2)
            # In preorder the root's left child is box 1.
            label, ha = ("True  ", "right") if index == 1 else ("  False", "left")
            edge_labels.append(ax.text(*middle, label, ha=ha, va="center",
                                       transform=ax.transAxes, fontsize=fontsize))

    if fontsize is None:
        _fit_fontsize(ax, annotations + edge_labels, annotations, n_cols, n_rows)
    return annotations


def _fit_fontsize(ax: Any, texts: list, boxes: list, n_cols: float, n_rows: float) -> None:
    """Shrink or grow the font so that the widest / tallest box fits its grid cell."""
    get_renderer = getattr(ax.figure.canvas, "get_renderer", None)
    if get_renderer is None:
        return
    renderer = get_renderer()
    extents = []
    for ann in boxes:
        ann.update_bbox_position_size(renderer)
        patch = ann.get_bbox_patch()
        if patch is not None:
            extents.append(patch.get_window_extent(renderer))
    if not extents:
        return
    width = max(extent.width for extent in extents)
    height = max(extent.height for extent in extents)
    axes_box = ax.get_window_extent(renderer)
    scale = min(axes_box.width / n_cols / width, axes_box.height / n_rows / height)
    size = boxes[0].get_fontsize() * scale
    for text in texts:
        text.set_fontsize(size)
