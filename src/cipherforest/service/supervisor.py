"""A parent process that holds the listening socket and restarts the server process to give
memory back to the operating system.

Sessions leave the server's memory (:mod:`.memory`), but the homomorphic library keeps what
it once allocated in its own memory pool for reuse, and never returns it: after a busy hour a
server that holds no session can still be as large as at its peak. Every session is on disk
after every message, so the cure is a restart: :func:`supervise` binds the socket, forks the
server process, and when that process exits with :data:`RESTART_EXIT_CODE` (it does so when
idle and grown, :class:`RestartWhenIdle`) forks a new one on the same socket. Connections
arriving in between wait in the socket's backlog; nothing is refused. The server process is
killed with its parent (``PR_SET_PDEATHSIG``), so a supervisor killed with SIGKILL leaves
no orphan serving the data directory.

Linux only (``/proc``, ``prctl``); elsewhere the server runs as a single process. Standard
library only: the parent imports nothing of the service, and stays small.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable

__all__ = ["RESTART_EXIT_CODE", "RestartWhenIdle", "can_supervise", "resident_bytes",
           "supervise"]

#: Exit code of a server process that stopped to be restarted (EX_TEMPFAIL).
RESTART_EXIT_CODE = 75
_PR_SET_PDEATHSIG = 1
_log = logging.getLogger("cipherforest.service")


def can_supervise() -> bool:
    """Whether this platform has what :func:`supervise` needs (fork, prctl, /proc)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and os.path.exists(
        "/proc/self/status")


def resident_bytes() -> int:
    """This process's resident memory (VmRSS) in bytes."""
    with open("/proc/self/status") as file:
        for line in file:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmRSS in /proc/self/status")


def _die_with_parent() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def supervise(host: str, port: int, run_server: Callable[[socket.socket], int]) -> int:
    """Bind ``host:port`` and run ``run_server(sock)`` in a forked process, again each time
    it returns :data:`RESTART_EXIT_CODE`; SIGTERM and SIGINT are passed on and end the
    loop. Returns the last server process's exit code."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    stopping = threading.Event()
    child = {"pid": None}

    def forward(signum, frame):
        stopping.set()
        if child["pid"] is not None:
            try:
                os.kill(child["pid"], signum)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while True:
        pid = os.fork()
        if pid == 0:  # the server process
            code = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                _die_with_parent()
                code = run_server(sock)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        child["pid"] = pid
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        child["pid"] = None
        code = os.waitstatus_to_exitcode(status)
        if code != RESTART_EXIT_CODE or stopping.is_set():
            sock.close()
            stopped = (0, RESTART_EXIT_CODE, -signal.SIGINT, -signal.SIGTERM)
            return 0 if stopping.is_set() and code in stopped else code


class RestartWhenIdle:
    """In the server process: a thread that calls ``stop()`` once ``idle_seconds()`` (how
    long the server has had nothing to do) reaches ``idle_for`` while its resident memory
    is more than ``grown_bytes`` above what it was when the thread started; ``requested``
    then tells the caller to exit with :data:`RESTART_EXIT_CODE`."""

    def __init__(self, idle_seconds: Callable[[], float], stop: Callable[[], None],
                 grown_bytes: int, idle_for: float, period: float = 5.0):
        self.idle_seconds, self.stop = idle_seconds, stop
        self.grown_bytes, self.idle_for, self.period = grown_bytes, idle_for, period
        self.base = resident_bytes()
        self.requested = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name="cipherforest-restart-when-idle")
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(self.period):
            idle = self.idle_seconds()
            grown = resident_bytes() - self.base
            if idle >= self.idle_for and grown > self.grown_bytes:
                _log.info("restarting the server process to give memory back: idle for "
                          "%.0f s and %.0f MB above its start", idle, grown / 1e6)
                self.requested = True
                self.stop()
                return

    def close(self) -> None:
        self._done.set()
        self._thread.join()
