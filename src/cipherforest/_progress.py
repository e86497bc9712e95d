"""The one-line progress bar of long fits (ensembles with ``verbose > 0``, the private
forest's upload and rounds) and of the command line client's uploads and rounds."""

from __future__ import annotations

import sys
import time

__all__ = ["ProgressBar"]


class ProgressBar:
    """A one-line text progress bar on stderr, shown for fits with ``verbose > 0``.

    ``total=None`` draws a counter without a bar (work whose length is not known ahead);
    ``note`` (:meth:`update`) is shown after the counts. With a ``unit`` the counts are shown
    divided by ``scale`` with one decimal and the unit (bytes as ``unit="MB", scale=1e6``).
    """

    def __init__(self, total: int | None, desc: str = "", stream=None, width: int = 30,
                 unit: str = "", scale: float = 1.0):
        self.total = None if total is None else max(1, total)
        self.desc = desc
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.unit, self.scale = unit, scale
        self.done = 0
        self.note = ""
        self.start = time.perf_counter()
        self._drawn = 0
        self._draw()

    def update(self, n: int = 1, note: str | None = None) -> None:
        """Advance by ``n`` steps (replace the note if one is given) and redraw."""
        self.done += n
        if self.total is not None:
            self.done = min(self.total, self.done)
        if note is not None:
            self.note = note
        self._draw()

    def close(self) -> None:
        """Finish the line."""
        self.stream.write("\n")
        self.stream.flush()

    def _count(self, n: int) -> str:
        return f"{n / self.scale:.1f}" if self.unit else str(n)

    def _draw(self) -> None:
        elapsed = time.perf_counter() - self.start
        unit = f" {self.unit}" if self.unit else ""
        if self.total is None:
            line = f"\r{self.desc} {self._count(self.done)}{unit} {elapsed:.1f}s"
        else:
            filled = int(self.width * self.done / self.total)
            line = (f"\r{self.desc} [{'#' * filled}{'.' * (self.width - filled)}] "
                    f"{self._count(self.done)}/{self._count(self.total)}{unit} {elapsed:.1f}s")
        if self.note:
            line += f" {self.note}"
        # Blanks over what a longer previous line left on the terminal.
        self.stream.write(line + " " * max(0, self._drawn - len(line)))
        self._drawn = len(line)
        self.stream.flush()
