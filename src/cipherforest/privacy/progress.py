"""The progress bar of a private fit: when :class:`PrivateForestClient` draws it, what it
counts.

A fit has two stages a user waits for: the label upload (the client encrypts the label
packs, the server expands each into its lane rotations, one key switch per row) and the
training on the server — one round per tree level in the modes where the client chooses the
splits (``"gini"``, ``"dp"``), one request in which the server grows every tree in the
others (``"rr"``, ``"blind"``). :class:`FitProgress` draws one line per stage on stderr
(:class:`cipherforest.core.ProgressBar`): rows uploaded, then rounds answered (a bar when
``max_depth`` bounds them, a counter otherwise) or trees grown.

By default (``progress=None``) the bar is drawn only on a terminal and only for a fit
expected to take more than :data:`AUTO_SECONDS`, estimated before the upload from the rows,
trees and rounds planned (:func:`expected_fit_seconds`). It only reads what the protocol
already reports, so it changes nothing in the fit, and it lives for one call of ``fit``:
nothing of it is kept on the estimator.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .._progress import ProgressBar
from .protocol import Message
from .protocol.selections import selection

__all__ = ["AUTO_SECONDS", "FitProgress", "expected_fit_seconds", "fit_progress",
           "shows_progress"]

#: A fit expected to take longer than this draws its progress by default.
AUTO_SECONDS = 10.0

# The cost model, in seconds on a 2-core AMD EPYC with two server processes
# (benchmarks/private_forest.py, 2026-12-03: "rr" on breast cancer's 426 rows, 10/50/100
# trees 4.0/6.6/8.7 s, on 1,500 synthetic rows 10/100 trees 10.7/43.1 s; "gini" 10 trees on
# breast cancer 35.6 s in 23 rounds). Only its order of magnitude matters: it tells a fit of
# a few seconds from one of a minute. (It underestimates large fits, whose time grows faster
# than the rows — 6,000 rows, 100 trees: 322 s against 156 — which are long either way.)
UPLOAD_SECONDS_PER_ROW = 6e-3  # keys, label packs, the server's lane rotations
GROWTH_SECONDS_PER_DRAW = 2e-4  # "rr"/"blind": per (tree, bootstrap draw), leaf sums
ROUND_SECONDS = 0.5  # "gini"/"dp": per round, whatever its size
ROUND_SECONDS_PER_DRAW = 2e-4  # per (tree, bootstrap draw) and round: the running sums
#: The same in plan-only rounds (``round_counts: false``): planning and replaying the plan,
#: the client's own counts (benchmarks/gini_time.py: 22,500 rows, 100 trees, 28 rounds, 145 s).
PLAN_ROUND_SECONDS_PER_DRAW = 2.5e-6
#: Rounds assumed without ``max_depth``: the trees grow until nodes are too small to split,
#: which took 23-25 rounds on breast cancer (10-100 trees, 2026-12-03) and 40 on pendigits.
UNBOUNDED_ROUNDS = 20


def planned_rounds(meta: Mapping[str, Any]) -> int | None:
    """Query rounds a fit with ``setup`` fields ``meta`` will take, when known ahead: 0
    without rounds, ``max_depth`` when it bounds them, else None."""
    if not selection(meta["split_selection"]).asks_rounds:
        return 0
    if meta["max_round_bytes"] is not None:  # a round may serve only some trees
        return None
    return meta["max_depth"]


def expected_fit_seconds(meta: Mapping[str, Any], n_rows: int) -> float:
    """A rough estimate of a fit's seconds from its ``setup`` fields and training rows."""
    draws = int(meta["n_estimators"]) * int(meta["n_draws"])
    seconds = UPLOAD_SECONDS_PER_ROW * n_rows
    if not selection(meta["split_selection"]).asks_rounds:
        return seconds + GROWTH_SECONDS_PER_DRAW * draws
    rounds = planned_rounds(meta)
    if rounds is None:  # a byte cap makes more rounds than levels: an underestimate
        rounds = UNBOUNDED_ROUNDS if meta["max_depth"] is None else int(meta["max_depth"])
    per_draw = (ROUND_SECONDS_PER_DRAW if meta.get("round_counts", True)
                else PLAN_ROUND_SECONDS_PER_DRAW)
    return seconds + rounds * (ROUND_SECONDS + per_draw * draws)


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):  # closed, detached or not a file
        return False


def shows_progress(progress: bool | None, verbose: int, stream, expected_seconds: float,
                   ) -> bool:
    """Whether a fit draws its progress: ``progress`` if given; by default (None) on a
    terminal, without ``verbose`` lines, for a fit expected to exceed :data:`AUTO_SECONDS`."""
    if progress is not None:
        return bool(progress)
    return (not verbose and expected_seconds > AUTO_SECONDS and stream is not None
            and _is_terminal(stream))


class FitProgress:
    """The bars of one fit on ``stream``: :meth:`uploads`, then :meth:`training` with
    :meth:`answered` for each round and :meth:`trained`, then :meth:`close`.

    Parameters
    ----------
    meta : mapping
        The ``setup`` message's fields (trees, rounds planned, split selection).
    n_rows : int
        Training rows.
    stream : text stream or None
        None: draw nothing (every method passes).
    """

    def __init__(self, meta: Mapping[str, Any], n_rows: int, stream):
        self.meta = meta
        self.n_rows = n_rows
        self.stream = stream
        self.bar: ProgressBar | None = None

    def _start(self, total: int | None, what: str) -> None:
        self.close()
        if self.stream is not None:
            self.bar = ProgressBar(total, f"PrivateForestClient {what}", stream=self.stream)

    def uploads(self, labels: Iterable[Message], rows_per_message: int
                ) -> Iterable[Message]:
        """``labels`` as they are sent, counting the rows once each message is taken (no
        bar for a session that takes no label ciphertexts)."""
        if self.stream is None or self.meta.get("label_ciphertexts") is False:
            return labels
        return self._counted(labels, rows_per_message)

    def _counted(self, labels: Iterable[Message], rows_per_message: int
                 ) -> Iterator[Message]:
        self._start(self.n_rows, "label rows")
        bar = self.bar
        for message in labels:
            yield message  # resumed when the next message is asked for: this one was sent
            bar.update(min(rows_per_message, self.n_rows - bar.done))

    def training(self) -> None:
        """The server trains: rounds answered, or the trees grown in one request."""
        rounds = planned_rounds(self.meta)
        if rounds == 0:
            self._start(int(self.meta["n_estimators"]), "trees grown on the server")
        else:
            self._start(rounds, "rounds answered")

    def answered(self, answer: Message) -> None:
        """One round answered (``ClientSession.train``'s ``on_answer``)."""
        if self.bar is not None:
            self.bar.update(1, f"{answer.arrays['node'].shape[0]} nodes decided")

    def trained(self) -> None:
        """The forest is trained: a bar of trees fills up."""
        if self.bar is not None and planned_rounds(self.meta) == 0:
            self.bar.update(int(self.meta["n_estimators"]))

    def close(self) -> None:
        """End the current line."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def fit_progress(progress: bool | None, verbose: int, setup: Message) -> FitProgress:
    """The progress of a fit about to upload ``setup``: drawn on stderr or silent, as
    :func:`shows_progress` decides."""
    stream = sys.stderr
    n_rows = setup.arrays["X"].shape[0]
    shown = shows_progress(progress, verbose, stream, expected_fit_seconds(setup.meta, n_rows))
    return FitProgress(setup.meta, n_rows, stream if shown else None)
