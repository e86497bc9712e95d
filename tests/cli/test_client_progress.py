"""The command line client's progress (``cli.client.TransportProgress``): the transport's
``progress(what, done, total)`` calls drawn with the package's one-line bar — one line per
phase, uploads in MB against their total, rounds counted."""

from __future__ import annotations

import io

from cipherforest.cli.client import TransportProgress
from cipherforest.core import ProgressBar


def _last_frame(line: str) -> str:
    """What a terminal shows of a line redrawn with carriage returns."""
    return line.rsplit("\r", 1)[-1].rstrip()


def test_uploads_in_mb_then_rounds_counted_one_line_per_phase():
    stream = io.StringIO()
    progress = TransportProgress(stream)
    for done in (4_000_000, 8_000_000, 9_500_000):
        progress("upload setup", done, 9_500_000)
    progress("upload labels", 1_000_000, 2_000_000)
    for round_ in range(1, 4):
        progress("round", round_, None)
    progress.close()
    lines = stream.getvalue().split("\n")
    assert lines[-1] == ""  # close() ended the last line
    frames = [_last_frame(line) for line in lines[:-1]]
    assert len(frames) == 3
    assert frames[0].startswith("upload setup")
    assert f"[{'#' * 30}] 9.5/9.5 MB" in frames[0]
    assert f"[{'#' * 15}{'.' * 15}] 1.0/2.0 MB" in frames[1]
    assert frames[2].startswith("round") and " 3 MB" not in frames[2]
    assert frames[2].split()[1] == "3"


def test_close_without_progress_writes_nothing():
    stream = io.StringIO()
    TransportProgress(stream).close()
    assert stream.getvalue() == ""


def test_the_shared_bar_shows_scaled_counts_only_with_a_unit():
    stream = io.StringIO()
    bar = ProgressBar(2_500_000, "bytes", stream=stream, unit="MB", scale=1e6)
    bar.update(1_250_000)
    assert "1.2/2.5 MB" in _last_frame(stream.getvalue())
    plain = io.StringIO()
    ProgressBar(40, "trees", stream=plain).update(10)
    assert " 10/40 " in _last_frame(plain.getvalue())
