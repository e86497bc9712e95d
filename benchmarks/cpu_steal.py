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
        python benchmarks/histogram_kernels.py --node-threads synthetic_100k --repeats 5

Linux only; needs the right to set real-time priority (root or ``CAP_SYS_NICE``). The
kernel's real-time throttling (``/proc/sys/kernel/sched_rt_runtime_us``, 95 % by default)
keeps a busy process from holding a CPU for good even if this script is killed.
Prints the stolen share each CPU saw (busy time / elapsed time) when the command ends.
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
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the command to run, after --")
    args = parser.parse_args(argv)
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
