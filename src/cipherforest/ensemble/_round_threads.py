"""Whether a boosting round runs on the fit's threads or on the calling thread alone.

Threads never change a boosting model (every pass sums in a fixed order), only its speed,
and on a virtual machine whose host is contended they can cost speed: the hypervisor then
takes CPU time from the guest ("steal", Linux ``/proc/stat``), capping what two busy threads
get together, and time a thread spends waiting for the other (the node hand-offs, the
round's last tree) is lost. In one run with 28 % of the CPUs taken, two-thread fits of 100k
rows took 4.9-6.2 s and one-thread fits 3.0-3.6 s (``benchmarks/ensembles.py --paired``);
on a quiet host two threads win by 1.2-1.7×.

``RoundThreads`` lets the rounds' own wall times decide, but only while the host takes
CPU time: it reads the guest's steal share every ``STEAL_WINDOW_S`` seconds, and while that
share is at least ``STEAL_PROBE_SHARE`` it now and then runs ``PROBE_ROUNDS`` rounds on the
calling thread (a probe). A probe whose median round takes under ``SWITCH_MARGIN`` times
the median of the last ``RECENT_ROUNDS`` threaded rounds switches the fit to one thread;
from then on it probes threaded rounds the same way (whatever the steal) and switches back
when they win. Round times on a contended host scatter widely, hence medians and a wide margin:
with one-round probes and a 0.9 margin, fits at 8-19 % steal switched on noise and took
1.10× the fits that kept their threads (``dev/round_threads.py``). Probes are spaced
``MIN_PROBE_GAP`` rounds apart, the gap doubling (up to ``MAX_PROBE_GAP``) after each probe
that does not win. Where ``/proc/stat`` cannot be read, or while the host takes less, every
round uses the threads.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from statistics import median

#: Steal share (of all CPUs' time) from which probes of one-thread rounds start: at 5-23 %
#: two threads won or tied in every run, one thread won at 21-28 %, and a probe that loses
#: costs its rounds' extra time (dev/round_threads.py).
STEAL_PROBE_SHARE = 0.20
#: Shortest window over which the steal share is read (``/proc/stat`` counts in 10 ms ticks).
STEAL_WINDOW_S = 0.5
#: Rounds of one probe, and of the current mode whose median a probe's median is compared
#: with.
PROBE_ROUNDS = 3
RECENT_ROUNDS = 5
#: A probe switches the fit only if its median round took less than this share of the
#: recent rounds' median.
SWITCH_MARGIN = 0.8
#: Rounds between probes: the first gap, and its bound as it doubles.
MIN_PROBE_GAP = 4
MAX_PROBE_GAP = 64


def read_steal_ticks() -> tuple[int, int] | None:
    """``(steal, total)`` CPU ticks of all CPUs since boot (Linux ``/proc/stat``), or None
    where that cannot be read."""
    try:
        with open("/proc/stat", "rb") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != b"cpu":
        return None
    ticks = [int(value) for value in fields[1:9]]  # user .. steal (guest is within user)
    return ticks[7], sum(ticks)


class RoundThreads:
    """Chooses, round by round, between the threads and the calling thread alone (see the
    module docstring).

    Call ``threaded()`` before a round and ``round_done()`` after it. ``steal_ticks`` and
    ``clock`` can be replaced (tests).
    """

    def __init__(self, steal_ticks: Callable[[], tuple[int, int] | None] = read_steal_ticks,
                 clock: Callable[[], float] = time.perf_counter):
        self._steal_ticks = steal_ticks
        self._clock = clock
        self._last_ticks = steal_ticks()
        self._window_start = clock()
        self.contended = False  # the host took at least STEAL_PROBE_SHARE in the last window
        self.use_threads = True  # the current mode
        self._recent: deque[float] = deque(maxlen=RECENT_ROUNDS)  # current mode's rounds
        self._gap = MIN_PROBE_GAP
        self._rounds_since_probe = 0
        self._probe: list[float] | None = None  # the running probe's round times
        self._round_start = 0.0
        self.probes = 0
        self.switches = 0
        self.single_thread_rounds = 0

    def threaded(self) -> bool:
        """Whether the next round runs on the threads."""
        self._read_steal()
        if (self._probe is None and (self.contended or not self.use_threads)
                and len(self._recent) == RECENT_ROUNDS
                and self._rounds_since_probe >= self._gap):
            self._probe = []
        self._round_start = self._clock()
        threads = self.use_threads == (self._probe is None)
        if not threads:
            self.single_thread_rounds += 1
        return threads

    def round_done(self) -> None:
        """Record the wall time of the round started by the last ``threaded()``."""
        seconds = self._clock() - self._round_start
        if self._probe is None:
            self._recent.append(seconds)
            self._rounds_since_probe += 1
            return
        self._probe.append(seconds)
        if len(self._probe) < PROBE_ROUNDS:
            return
        self.probes += 1
        self._rounds_since_probe = 0
        if median(self._probe) < SWITCH_MARGIN * median(self._recent):
            self.use_threads = not self.use_threads
            self.switches += 1
            self._recent.clear()
            self._recent.extend(self._probe)
            self._gap = MIN_PROBE_GAP
        else:
            self._gap = min(2 * self._gap, MAX_PROBE_GAP)
        self._probe = None

    def _read_steal(self) -> None:
        now = self._clock()
        if self._last_ticks is None or now - self._window_start < STEAL_WINDOW_S:
            return
        ticks = self._steal_ticks()
        if ticks is None:
            self._last_ticks = None
            self.contended = False
            return
        steal, total = ticks[0] - self._last_ticks[0], ticks[1] - self._last_ticks[1]
        if total > 0:
            self.contended = steal >= STEAL_PROBE_SHARE * total
        self._last_ticks = ticks
        self._window_start = now

