"""The progress bar of a private fit (:mod:`cipherforest.privacy.progress`).

Proves: by default the bar is drawn only on a terminal, without ``verbose``, for a fit
expected to take more than ``AUTO_SECONDS``; ``progress=True``/``False`` override that; the
bar counts what the protocol did (rows uploaded, rounds answered, trees grown); a fit draws
the same forest and predictions with and without it; nothing of it stays on the estimator.
"""

from __future__ import annotations

import io
import os
import random
import secrets
import sys

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError

from cipherforest.core import ProgressBar
from cipherforest.privacy import PrivateForestClient, progress
from cipherforest.privacy.protocol import PARAMETERS, forest_meta

TREE_FIELDS = ("children_left", "children_right", "feature", "threshold", "n_node_samples")


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class Detached(io.StringIO):
    def isatty(self) -> bool:
        raise ValueError("underlying buffer has been detached")


def _meta(n_rows: int, **params) -> dict:
    """The setup fields of a fit on ``n_rows`` rows × 10 features."""
    all_params = {name: p.default for name, p in PARAMETERS.items()}
    all_params.update(random_state=0, **params)
    return forest_meta(all_params, n_rows, 10)


def _drawn(stream: io.StringIO) -> list[str]:
    """The bar's lines as last drawn (each ``\\r`` redraws the line)."""
    return [line.split("\r")[-1].rstrip() for line in stream.getvalue().split("\n")
            if "PrivateForestClient" in line]


# ---------------------------------------------------------------------- the rule
@pytest.mark.parametrize(("setting", "verbose", "stream", "seconds", "shown"), [
    (None, 0, Terminal(), 30.0, True),
    (None, 0, Terminal(), 5.0, False),  # a short fit
    (None, 0, io.StringIO(), 30.0, False),  # not a terminal (a log, a pipe, a notebook)
    (None, 0, Detached(), 30.0, False),
    (None, 0, None, 30.0, False),  # no stderr at all (pythonw)
    (None, 1, Terminal(), 30.0, False),  # verbose prints its own lines
    (True, 0, io.StringIO(), 0.1, True),
    (True, 1, None, 0.1, True),
    (False, 0, Terminal(), 1e6, False),
])
def test_shows_progress_rule(setting, verbose, stream, seconds, shown):
    assert progress.shows_progress(setting, verbose, stream, seconds) is shown


def test_estimate_orders_fits_by_their_work():
    estimate = progress.expected_fit_seconds
    small = _meta(124, n_estimators=5)  # a wine-sized default fit: a few seconds
    assert estimate(small, 124) < progress.AUTO_SECONDS
    # The paper's selection asks one round per level: a minute on breast cancer.
    gini = _meta(426, n_estimators=10, split_selection="gini")
    assert estimate(gini, 426) > 2 * progress.AUTO_SECONDS
    assert estimate(_meta(426, n_estimators=10, split_selection="gini", max_depth=2),
                     426) < estimate(gini, 426)
    # More trees, more rows: more time, in every mode.
    for selection in ("rr", "blind", "gini"):
        base = estimate(_meta(1000, n_estimators=10, split_selection=selection), 1000)
        assert estimate(_meta(1000, n_estimators=100, split_selection=selection),
                        1000) > base
        assert estimate(_meta(4000, n_estimators=10, split_selection=selection), 4000) > base
    assert estimate(_meta(6000, n_estimators=100), 6000) > progress.AUTO_SECONDS
    # Plan-only rounds (the default client's gini/dp): no running sums, far less per draw.
    counted = _meta(20000, n_estimators=100, split_selection="gini", max_depth=20)
    assert estimate({**counted, "round_counts": False}, 20000) < estimate(counted, 20000) / 10


def test_planned_rounds():
    assert progress.planned_rounds(_meta(100)) == 0  # rr: the server grows every tree
    assert progress.planned_rounds(_meta(100, split_selection="blind")) == 0
    assert progress.planned_rounds(_meta(100, split_selection="gini", max_depth=5)) == 5
    assert progress.planned_rounds(_meta(100, split_selection="gini")) is None
    assert progress.planned_rounds(_meta(100, split_selection="gini", max_depth=5,
                                         max_round_bytes=1 << 20)) is None


def test_progress_parameter_is_validated(wine):
    X_train, _, y_train, _ = wine
    with pytest.raises(InvalidParameterError, match="progress"):
        PrivateForestClient(2, progress="yes").fit(X_train, y_train)


# ---------------------------------------------------------------------- a fit's bar
def test_default_bar_only_on_a_terminal_for_a_long_fit(wine, monkeypatch):
    X_train, _, y_train, _ = wine
    # This fit is expected to take about a second: no bar on a terminal.
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    PrivateForestClient(2, random_state=0, max_depth=3).fit(X_train, y_train)
    assert _drawn(terminal) == []
    # Every fit counts as long: the bar on a terminal, never on another stream.
    monkeypatch.setattr(progress, "AUTO_SECONDS", 0.0)
    PrivateForestClient(2, random_state=0, max_depth=3).fit(X_train, y_train)
    # The default (rr, leaf ids) sends no label ciphertext: one stage only.
    assert len(_drawn(terminal)) == 1
    assert _drawn(terminal)[0].startswith("PrivateForestClient trees grown on the server "
                                          f"[{'#' * 30}] 2/2 ")
    PrivateForestClient(2, random_state=0, max_depth=3,
                        prediction_reply="leaves").fit(X_train, y_train)
    n = X_train.shape[0]
    assert _drawn(terminal)[1].startswith(f"PrivateForestClient label rows [{'#' * 30}] "
                                          f"{n}/{n} ")
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    PrivateForestClient(2, random_state=0, max_depth=3).fit(X_train, y_train)
    assert _drawn(log) == []
    PrivateForestClient(2, random_state=0, max_depth=3, progress=True).fit(X_train, y_train)
    assert len(_drawn(log)) == 1


def test_bar_counts_uploads_and_rounds(wine, monkeypatch):
    X_train, _, y_train, _ = wine
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    # The paper's flow uploads label ciphertexts (plan-only rounds, the default, none).
    client = PrivateForestClient(2, random_state=1, split_selection="gini", label_chunk=1,
                                 label_pack_rows=40, decide_from="server",
                                 progress=True).fit(X_train, y_train)
    n = X_train.shape[0]
    text = stream.getvalue()
    uploads = [part for part in text.split("\r") if "label rows" in part]
    # Drawn empty, then once per labels message of 40 rows.
    assert [part.split("] ")[1].split()[0] for part in uploads] == [
        f"{min(n, 40 * i)}/{n}" for i in range(-(-n // 40) + 1)]
    last = _drawn(stream)[-1]
    assert last.startswith(f"PrivateForestClient rounds answered {client.fit_stats_.rounds} ")
    assert last.endswith(" nodes decided") and client.fit_stats_.rounds > 3
    # With max_depth the rounds are known ahead: a bar.
    stream.truncate(0)
    stream.seek(0)
    client = PrivateForestClient(2, random_state=1, split_selection="gini", max_depth=3,
                                 progress=True).fit(X_train, y_train)
    assert client.fit_stats_.rounds == 3
    assert _drawn(stream)[-1].startswith(f"PrivateForestClient rounds answered [{'#' * 30}] "
                                         "3/3 ")


def _fit(data, monkeypatch, **params):
    """A fit whose client draws every secret (GIPE keys and jitter, the randomized
    response) from one seeded stream instead of the OS: two fits see the same ciphers."""
    source = random.Random(11)
    monkeypatch.setattr(os, "urandom", source.randbytes)
    monkeypatch.setattr(secrets, "SystemRandom", lambda: random.Random(source.random()))
    X_train, X_test, y_train, _ = data
    client = PrivateForestClient(3, random_state=4, **params).fit(X_train, y_train)
    trees = client.server_.tree_arrays(client.session_)
    return client, trees, client.predict(X_test), client.predict_proba(X_test)


@pytest.mark.parametrize("selection", ["gini", "rr"])
def test_same_forest_with_and_without_the_bar(wine, monkeypatch, selection):
    """The bar reads the protocol and changes nothing: from the same secrets, the same
    trees, rounds and predictions (probabilities up to CKKS noise: the homomorphic keys
    still come from SEAL's own generator)."""
    params = ({"split_selection": "gini", "reveal_leaves": True, "max_depth": 5}
              if selection == "gini" else {})
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    shown, shown_trees, shown_pred, shown_proba = _fit(wine, monkeypatch, progress=True,
                                                       **params)
    # It was drawn: rounds (gini, plan-only) or trees grown (rr); neither sends a label
    # ciphertext, so one stage only.
    assert len(_drawn(stream)) == 1
    stream.truncate(0)
    stream.seek(0)
    silent, silent_trees, silent_pred, silent_proba = _fit(wine, monkeypatch, progress=False,
                                                           **params)
    assert stream.getvalue() == ""
    assert len(shown_trees) == len(silent_trees) == 3
    for got, expected in zip(shown_trees, silent_trees, strict=True):
        for name in TREE_FIELDS:
            np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    assert shown.fit_stats_.rounds == silent.fit_stats_.rounds
    np.testing.assert_array_equal(shown_pred, silent_pred)
    np.testing.assert_allclose(shown_proba, silent_proba, rtol=0, atol=1e-6)


def test_nothing_of_the_bar_stays_on_the_estimator(wine, monkeypatch):
    X_train, _, y_train, _ = wine
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    client = PrivateForestClient(2, random_state=0, progress=True).fit(X_train, y_train)
    held = [*vars(client).values(), *vars(client.client_session_).values()]
    assert not any(isinstance(value, (progress.FitProgress, ProgressBar, io.IOBase))
                   for value in held)
    assert clone(client).get_params()["progress"] is True


# ---------------------------------------------------------------------- the line
def test_counter_and_note_redraw_one_line():
    stream = io.StringIO()
    bar = ProgressBar(None, "work", stream=stream)
    bar.update(1, "a long note here")
    bar.update(1, "short")
    bar.close()
    draws = stream.getvalue().split("\r")[1:]
    assert [d.split()[1] for d in draws] == ["0", "1", "2"]
    # A shorter line blanks what the longer one left.
    assert len(draws[2].rstrip("\n")) >= len(draws[1]) and draws[2].endswith("\n")
    assert "short" in draws[2] and "long" not in draws[2]
