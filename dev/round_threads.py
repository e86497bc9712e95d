"""What the boosting fit's choice between its threads and one thread (``RoundThreads``,
``ensemble/_round_threads.py``) does on this host: two-thread fits as shipped, with probes
forced whatever the steal, with the threads kept for every round, and one-thread fits,
alternated in one process (a new shuffled order each repetition).

As shipped, rounds leave the threads only while the hypervisor takes at least
``STEAL_PROBE_SHARE`` of the CPUs; "probes forced" lowers that bar to 0, so the rounds' wall
times alone decide (on a quiet host: what the probes cost, and that they keep the threads);
"threads always" raises it out of reach (the fits before ``RoundThreads``). Each row gives
the median wall time, the CPU steal the host took during those fits (``/proc/stat``) and
what the choosers did (probes, switches, rounds on one thread; medians over the fits)::

    python dev/round_threads.py synthetic_100k --repeats 5
    python benchmarks/cpu_steal.py -- python dev/round_threads.py synthetic_100k

(the second: ``cpu_steal.py``'s imitation busies the CPUs from inside the guest, which the
guest counts as other processes' time, not as steal: only "probes forced" reacts to it).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

#: ``benchmarks/``: ``ensembles.py`` (datasets, models) and ``cpu_steal.py`` (CPU times).
BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", help="a dataset of ensembles.py")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(BENCHMARKS_DIR))
    from cipherforest.ensemble import _round_threads as rt
    from cpu_steal import cpu_times
    from ensembles import is_regression, load_dataset, make_model

    X, _, y, _ = load_dataset(args.dataset)
    regression = is_regression(args.dataset)
    make_model("ours_gb_hist", regression).set_params(n_estimators=3).fit(X, y)  # compile
    shipped = rt.STEAL_PROBE_SHARE
    variants = {"2 threads, as shipped": (2, shipped),
                "2 threads, probes forced": (2, 0.0),
                "2 threads always": (2, float("inf")),
                "1 thread": (1, shipped)}
    walls = {label: [] for label in variants}
    stats = {label: [] for label in variants}
    steal = {label: [0, 0] for label in variants}
    order = np.random.default_rng(0)
    try:
        for _ in range(args.repeats):
            for index in order.permutation(len(variants)):
                label = list(variants)[index]
                n_jobs, bar = variants[label]
                rt.STEAL_PROBE_SHARE = bar
                model = make_model("ours_gb_hist", regression).set_params(n_jobs=n_jobs)
                before = cpu_times().get("cpu")
                start = time.perf_counter()
                model.fit(X, y)
                walls[label].append(time.perf_counter() - start)
                after = cpu_times().get("cpu")
                if before and after:
                    steal[label][0] += after[0] - before[0]
                    steal[label][1] += after[1] - before[1]
                chooser = getattr(model, "_round_threads", None)
                if chooser is not None:
                    stats[label].append((chooser.probes, chooser.switches,
                                         chooser.single_thread_rounds))
    finally:
        rt.STEAL_PROBE_SHARE = shipped
    print(f"{args.dataset}: boosting fits, wall s, {args.repeats} alternated repetitions; "
          f"{os.cpu_count()} CPUs; 1-min load average {os.getloadavg()[0]:.1f}\n")
    print("| fits | wall median | min | max | CPU steal % | probes | switches | "
          "rounds on one thread |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, times in walls.items():
        stolen, total = steal[label]
        share = f"{100 * stolen / total:.1f}" if total else "–"
        if stats[label]:
            probes, switches, single = (float(np.median(column)) for column in
                                        zip(*stats[label], strict=True))
            chosen = f"{probes:.0f} | {switches:.0f} | {single:.0f}"
        else:
            chosen = "– | – | all"
        print(f"| {label} | {np.median(times):.3f} | {min(times):.3f} | {max(times):.3f} | "
              f"{share} | {chosen} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
