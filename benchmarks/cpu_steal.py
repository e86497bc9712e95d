"""Run a command while the CPUs are taken from it at random moments, as a hypervisor's CPU
steal does, so that the fits' sensitivity to steal can be measured on demand.

On a shared virtual machine the host deschedules a virtual CPU now and then (``/proc/stat``'s
steal time): a thread on it stops for a few milliseconds without the guest knowing. Threads
that wait for each other (a fork-join, a spin-wait hand-off) then wait for the stopped one,
while one thread alone only loses the stolen time. This script imitates that inside the
guest: one process per CPU, pinned to it at the highest real-time priority (``SCHED_FIFO``,
which preempts every ordinary thread on that CPU at once), sleeps for a random gap
(exponential, mean ``--gap-ms``) and then busies its CPU for ``--burst-ms``, over and over,
until the command ends. The CPUs are stolen independently, each for ``burst / (burst +
gap)`` of the time.

The imitation differs from the host's steal in one respect: the guest's scheduler sees the
busy process and may move the preempted thread to the other CPU if that one is idle (the
host's steal is invisible to it). Between two busy threads on two CPUs, which is what a
two-thread fit is, there is nowhere to move it.

::

    python benchmarks/cpu_steal.py --burst-ms 3 --gap-ms 12 -- \\
        python dev/histogram_kernels.py --node-threads synthetic_100k --repeats 5

Linux only; needs the right to set real-time priority (root or ``CAP_SYS_NICE``). The
kernel's real-time throttling (``/proc/sys/kernel/sched_rt_runtime_us``, 95 % by default)
keeps a busy process from holding a CPU for good even if this script is killed.
Prints the stolen share each CPU saw (busy time / elapsed time) when the command ends.

``--probe SECONDS`` measures the real thing instead: it keeps ``--probe-cpus`` CPUs busy
(one spinning process each, ordinary priority, placed by the scheduler) for that long and
prints each CPU's steal time from ``/proc/stat`` (Linux), as a share of the time and as a
strip of 100 ms slots (``.`` none, ``-`` under 10 %, ``+`` under 30 %, ``#`` more). A host
that takes one virtual CPU more than the other slows whichever thread runs there, and
threads that wait for each other wait for the slower one.

::

    python benchmarks/cpu_steal.py --probe 10 --probe-cpus 2
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import subprocess
import sys
import time


def steal_cpu(cpu: int, burst_s: float, gap_s: float, seed: int, stop, stolen) -> None:
    """Busy ``cpu`` for ``burst_s`` after random gaps (mean ``gap_s``) until ``stop`` is set;
    adds the busy seconds to ``stolen``."""
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(os.sched_get_priority_max(
        os.SCHED_FIFO)))
    rng = random.Random(seed)
    busy = 0.0
    parent = os.getppid()
    while not stop.is_set() and os.getppid() == parent:
        time.sleep(rng.expovariate(1.0 / gap_s))
        began = time.perf_counter()
        end = began + burst_s
        while time.perf_counter() < end:
            pass
        busy += time.perf_counter() - began
    with stolen.get_lock():
        stolen.value += busy


def cpu_times() -> dict[str, tuple[int, int]]:
    """``(steal, total)`` time since boot in clock ticks of all CPUs together (``"cpu"``) and
    of each (``"cpu0"``, ...), from Linux's ``/proc/stat``; empty where it cannot be read."""
    try:
        with open("/proc/stat") as stat:
            lines = stat.read().splitlines()
    except OSError:
        return {}
    times = {}
    for line in lines:
        fields = line.split()
        if len(fields) >= 9 and fields[0].startswith("cpu"):
            # user nice system idle iowait irq softirq steal (guest time is already in user)
            ticks = [int(value) for value in fields[1:9]]
            times[fields[0]] = (ticks[7], sum(ticks))
    return times


def steal_ticks_per_cpu() -> dict[str, int]:
    """Steal time of each CPU since boot, in clock ticks (``cpu_times``)."""
    return {cpu: steal for cpu, (steal, _) in cpu_times().items() if cpu != "cpu"}


def spin(seconds: float) -> None:
    """Keep one CPU busy for ``seconds``."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def probe_steal(seconds: float, n_busy: int, slot_s: float = 0.1) -> None:
    """Keep ``n_busy`` CPUs busy for ``seconds`` and print each CPU's steal, overall and
    slot by slot."""
    tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
    context = multiprocessing.get_context("fork")
    spinners = [context.Process(target=spin, args=(seconds + 0.5,), daemon=True)
                for _ in range(n_busy)]
    for spinner in spinners:
        spinner.start()
    time.sleep(0.25)  # let the spinners settle on their CPUs
    before = previous = steal_ticks_per_cpu()
    strips: dict[str, list[str]] = {cpu: [] for cpu in before}
    began = time.perf_counter()
    n_slots = max(1, round(seconds / slot_s))
    for slot in range(n_slots):
        time.sleep(max(0.0, began + (slot + 1) * slot_s - time.perf_counter()))
        now = steal_ticks_per_cpu()
        for cpu in strips:
            share = (now[cpu] - previous[cpu]) * tick_s / slot_s
            strips[cpu].append("." if share == 0 else "-" if share < 0.1
                               else "+" if share < 0.3 else "#")
        previous = now
    elapsed = time.perf_counter() - began
    for spinner in spinners:
        spinner.join()
    print(f"CPU steal with {n_busy} busy CPU(s), {elapsed:.1f} s, slots of "
          f"{1000 * slot_s:.0f} ms:")
    for cpu, strip in strips.items():
        share = (previous[cpu] - before[cpu]) * tick_s / elapsed
        print(f"{cpu:>6} {100 * share:5.1f} % {''.join(strip)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst-ms", type=float, default=3.0,
                        help="how long each theft lasts (default 3 ms)")
    parser.add_argument("--gap-ms", type=float, default=12.0,
                        help="mean time between two thefts on one CPU (default 12 ms)")
    parser.add_argument("--cpus", default=None,
                        help="comma-separated CPUs to steal from (default: all this process "
                             "may use)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--probe", type=float, default=None, metavar="SECONDS",
                        help="instead: measure the host's steal per CPU for this long, with "
                             "--probe-cpus CPUs busy")
    parser.add_argument("--probe-cpus", type=int, default=None,
                        help="CPUs kept busy by --probe (default: all this process may use)")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the command to run, after --")
    args = parser.parse_args(argv)
    if args.probe is not None:
        if args.probe <= 0:
            parser.error("--probe must be positive")
        n_busy = (len(os.sched_getaffinity(0)) if args.probe_cpus is None
                  else args.probe_cpus)
        if n_busy < 0:
            parser.error("--probe-cpus must not be negative")
        probe_steal(args.probe, n_busy)
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    if args.burst_ms <= 0 or args.gap_ms <= 0:
        parser.error("--burst-ms and --gap-ms must be positive")
    if not hasattr(os, "SCHED_FIFO"):
        parser.error("needs Linux (SCHED_FIFO)")
    cpus = (sorted(os.sched_getaffinity(0)) if args.cpus is None
            else [int(cpu) for cpu in args.cpus.split(",")])
    try:  # fail here, with a clear message, rather than in the children
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except PermissionError:
        parser.error("setting real-time priority was refused (run as root or with "
                     "CAP_SYS_NICE)")
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    stolen = [context.Value("d", 0.0) for _ in cpus]
    thieves = [context.Process(target=steal_cpu, daemon=True,
                               args=(cpu, args.burst_ms / 1e3, args.gap_ms / 1e3,
                                     args.seed + i, stop, stolen[i]))
               for i, cpu in enumerate(cpus)]
    for thief in thieves:
        thief.start()
    began = time.perf_counter()
    try:
        returncode = subprocess.call(command)
    finally:
        stop.set()
        for thief in thieves:
            thief.join(timeout=10)
            if thief.is_alive():
                thief.kill()
    elapsed = time.perf_counter() - began
    shares = ", ".join(f"CPU {cpu} {100 * s.value / elapsed:.1f} %"
                       for cpu, s in zip(cpus, stolen, strict=True))
    print(f"cpu_steal.py: {elapsed:.1f} s; stolen (burst {args.burst_ms:g} ms, mean gap "
          f"{args.gap_ms:g} ms): {shares}", file=sys.stderr)
    return returncode


if __name__ == "__main__":
    sys.exit(main())
