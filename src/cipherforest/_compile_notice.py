"""One line on stderr when numba starts compiling cipherforest's kernels.

The first fit in a fresh environment compiles the kernels (they are cached on disk
afterwards, next to the sources or in ``NUMBA_CACHE_DIR``); without a word, that pause
looks like a hang. numba's ``numba:compile`` event fires only on real compilation, never
when a kernel is loaded from the cache, so warm processes print nothing.
"""

from __future__ import annotations

import sys
import threading

from numba.core import event

_MESSAGE = ("cipherforest: compiling numba kernels for first use (once per installation; "
            "later runs load them from numba's cache)\n")


class CompileNotice(event.Listener):
    """Writes :data:`_MESSAGE` once per process, on the first compilation of a kernel from
    a module under ``package``."""

    def __init__(self, package: str):
        self.prefix = package + "."
        self.shown = False
        self._lock = threading.Lock()

    def on_start(self, ev: event.Event) -> None:
        if self.shown:
            return
        function = getattr(ev.data.get("dispatcher"), "py_func", None)
        # A function made by exec() or by a foreign tool may have no module (None).
        if not (getattr(function, "__module__", None) or "").startswith(self.prefix):
            return
        with self._lock:
            if self.shown:
                return
            self.shown = True
        sys.stderr.write(_MESSAGE)
        sys.stderr.flush()

    def on_end(self, ev: event.Event) -> None:
        pass


NOTICE = CompileNotice("cipherforest")
event.register("numba:compile", NOTICE)
