"""What the server trains, per ``setup``'s ``learner``: :data:`SERVER_LEARNERS`.

A learner says which split selections it takes, what privatised labels an ``"rr"`` setup
carries (``y_rr``) and how they are checked, and how the trees are grown on them without
rounds. Everything a learner grows from is the cipher matrix, the forest seed and ``y_rr``,
so its guarantee is the client's randomization's (post-processing). A new learner adds an
entry here and its name to :data:`..params.LEARNERS`; the messages, sessions, persistence
and prediction by leaf ids stay as they are.

``"gradient_boosting"``: the server boosts on ``ỹ`` (:func:`...boosting_kernels.boost_on_targets`,
the simulator's loop: the same trees for the same seed) and keeps only the trees' structure;
its own leaf values steer its next gradients and are dropped. The session's trees are the
boosted trees, round-major (``n_estimators`` of the setup counts them all: a multiple of the
trees per round), so routing, the training leaf ids of ``trained``, prediction by leaf ids
and persistence are the forests' own. ``"gradient_boosting_regressor"`` boosts one
squared-error tree a round on the privatised targets of the regressor's release.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...boosting_kernels import boost_on_targets, boosting_seeds, corrected_targets, n_trees
from ..messages import Message, ProtocolError
from ..params import CLASSIFIER_SELECTIONS, LEARNERS, ForestSpec
from ..planner import ForestGrowth
from .growth import grow_rr_forest, set_tree_structure

__all__ = ["SERVER_LEARNERS", "TIE_BREAK_SHARE", "ServerLearner", "tie_broken_targets"]


@dataclass(frozen=True)
class ServerLearner:
    """One learner's server side.

    Attributes
    ----------
    name : str
    selections : tuple of str
        The split selections it trains with.
    needs_classes : bool
        Whether ``setup`` must state ``n_classes`` (label ciphertexts, class counts).
    read_labels : callable
        ``(message, n_rows, n_classes) -> ndarray``: the validated ``y_rr`` of an ``"rr"``
        setup (:class:`ProtocolError` otherwise).
    grow : callable
        ``(growth, y_rr, n_classes, n_jobs)``: grows every tree of ``growth`` on ``y_rr``.
    check_setup : callable
        ``(spec, n_classes)``: refuses (:class:`ProtocolError`) forest fields the learner
        cannot train with.
    """

    name: str
    selections: tuple[str, ...]
    needs_classes: bool
    read_labels: Callable[[Message, int, int], np.ndarray]
    grow: Callable[[ForestGrowth, np.ndarray, int, int | None], None]
    check_setup: Callable[[ForestSpec, int], None] = lambda spec, n_classes: None


def _class_labels(message: Message, n_rows: int, n_classes: int) -> np.ndarray:
    y_rr = message.array("y_rr", "int64", 1)
    if y_rr.shape[0] != n_rows or (y_rr.size and (y_rr.min() < 0 or y_rr.max() >= n_classes)):
        raise ProtocolError(f"setup: y_rr must hold one class index in [0, {n_classes}) "
                            f"per row ({n_rows} rows)")
    return y_rr


def _targets(message: Message, n_rows: int, n_classes: int) -> np.ndarray:
    y_rr = message.array("y_rr", "float64", 1)
    if y_rr.shape[0] != n_rows or not np.all(np.isfinite(y_rr)):
        raise ProtocolError(f"setup: y_rr must hold one finite privatised target per row "
                            f"({n_rows} rows)")
    return y_rr


def _grow_classification(growth: ForestGrowth, y_rr: np.ndarray, n_classes: int,
                         n_jobs: int | None) -> None:
    grow_rr_forest(growth, y_rr, n_jobs)


#: A tie-breaking jitter's width, as a share of the least gap between distinct targets.
TIE_BREAK_SHARE = 1e-3


def tie_broken_targets(y_rr: np.ndarray, seed: int) -> np.ndarray:
    """``y_rr`` plus a jitter drawn from the forest seed, uniform over a thousandth of the
    least gap between its distinct values (``y_rr`` itself if it holds one value).

    RR-on-bins reports a few values (two at ε = 2), so a tree grown on them stops wherever
    a node's ỹ are equal, in nodes far larger than the signal needs; the leaf values being
    the client's means of the true targets, a finer partition below those nodes is what
    the forest needs. The jitter keeps every split on unequal ỹ (its share of a node's
    squared error is a millionth of a gap's) and lets the grower go on splitting where ỹ
    are equal. It depends on the public seed alone: post-processing of ỹ.
    """
    values = np.unique(y_rr)
    if values.shape[0] < 2:
        return y_rr
    width = TIE_BREAK_SHARE * float(np.diff(values).min())
    return y_rr + width * np.random.default_rng([seed, 1]).random(y_rr.shape[0])


def _grow_regression(growth: ForestGrowth, y_rr: np.ndarray, n_classes: int,
                     n_jobs: int | None) -> None:
    grow_rr_forest(growth, tie_broken_targets(y_rr, growth.spec.random_state), n_jobs,
                   regression=True)


def _check_boosting(spec: ForestSpec, n_classes: int) -> None:
    width = n_trees(n_classes) if spec.learner == "gradient_boosting" else 1
    if spec.n_estimators % width:
        raise ProtocolError(f"setup: a gradient_boosting session of {n_classes} classes "
                            f"grows {width} trees per round; n_estimators={spec.n_estimators} "
                            "is not a multiple of it")
    if spec.bootstrap:
        raise ProtocolError("setup: gradient boosting fits every tree on every row "
                            "(bootstrap must be false)")


def _grow_boosting(growth: ForestGrowth, y_rr: np.ndarray, n_classes: int,
                   n_jobs: int | None) -> None:
    """Boost the session's trees on ``y_rr``: class indices (log loss) or, for
    ``"gradient_boosting_regressor"``, privatised targets (squared error)."""
    from ....core import DecisionTreeRegressor  # loaded on first use

    spec = growth.spec
    if spec.learner == "gradient_boosting":
        width, loss = n_trees(n_classes), "log_loss"
        targets = corrected_targets(y_rr, n_classes, spec.rr_epsilon,
                                    correct=spec.noise_correction == "unbiased")
    else:
        width, loss = 1, "squared_error"
        targets = np.asarray(y_rr, dtype=np.float64)[:, None]

    def new_tree() -> DecisionTreeRegressor:
        return DecisionTreeRegressor(
            criterion="squared_error", max_depth=None if spec.max_depth < 0 else spec.max_depth,
            min_samples_split=spec.min_samples_split, min_samples_leaf=spec.min_samples_leaf,
            max_features=spec.max_features, max_bins=spec.max_bins)

    seeds = boosting_seeds(spec.random_state, spec.n_estimators // width, width)
    _, rounds = boost_on_targets(growth.X, targets, new_tree, spec.learning_rate, seeds,
                                 spec.max_bins, loss)
    fitted = [tree for trees in rounds for tree in trees]
    for tree, estimator in zip(growth.trees, fitted, strict=True):
        set_tree_structure(tree, estimator.tree_)


SERVER_LEARNERS: dict[str, ServerLearner] = {
    "classifier": ServerLearner("classifier", CLASSIFIER_SELECTIONS, True, _class_labels,
                                _grow_classification),
    "regressor": ServerLearner("regressor", ("rr", "blind", "paper"), False, _targets,
                               _grow_regression),
    "gradient_boosting": ServerLearner("gradient_boosting", ("rr",), True, _class_labels,
                                       _grow_boosting, _check_boosting),
    "gradient_boosting_regressor": ServerLearner("gradient_boosting_regressor", ("rr",), False,
                                                 _targets, _grow_boosting, _check_boosting),
}
assert tuple(SERVER_LEARNERS) == LEARNERS
