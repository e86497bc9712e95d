"""What the server trains, per ``setup``'s ``learner``: :data:`SERVER_LEARNERS`.

A learner says which split selections it takes, what privatised labels an ``"rr"`` setup
carries (``y_rr``) and how they are checked, and how the trees are grown on them without
rounds. Everything a learner grows from is the cipher matrix, the forest seed and ``y_rr``,
so its guarantee is the client's randomization's (post-processing). A new learner (private
boosting, say) adds an entry here and its name to :data:`..params.LEARNERS`; the messages,
sessions, persistence and prediction by leaf ids stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..messages import Message, ProtocolError
from ..params import LEARNERS, SPLIT_SELECTIONS
from ..planner import ForestGrowth
from .growth import grow_rr_forest

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
        ``(growth, y_rr, n_jobs)``: grows every tree of ``growth`` on ``y_rr``.
    """

    name: str
    selections: tuple[str, ...]
    needs_classes: bool
    read_labels: Callable[[Message, int, int], np.ndarray]
    grow: Callable[[ForestGrowth, np.ndarray, int | None], None]


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


def _grow_regression(growth: ForestGrowth, y_rr: np.ndarray, n_jobs: int | None) -> None:
    grow_rr_forest(growth, tie_broken_targets(y_rr, growth.spec.random_state), n_jobs,
                   regression=True)


SERVER_LEARNERS: dict[str, ServerLearner] = {
    "classifier": ServerLearner("classifier", SPLIT_SELECTIONS, True, _class_labels,
                                grow_rr_forest),
    "regressor": ServerLearner("regressor", ("rr", "blind"), False, _targets,
                               _grow_regression),
}
assert tuple(SERVER_LEARNERS) == LEARNERS
