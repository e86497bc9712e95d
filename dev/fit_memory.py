"""Where a gradient-boosting fit's peak memory comes from, stage by stage, and how it compares
between two source trees (issue 15's peak-RSS target at 1M rows).

Each (sources, run) is a fresh subprocess set up as ``ensembles.py``'s worker (same data,
same model, a 500-row warm-up fit that loads the numba cache, peak reset once the data are
resident). Resident memory (``/proc/self/statm``) is read at the fit's stages by wrapping the
estimator's steps that every version of the sources has:

* ``start``: before ``fit`` (data, libraries, loaded kernels);
* ``labels encoded``: after the classifier's ``_encode_y``;
* ``binned``: after ``prepare_tree_data`` (bin edges and the binned matrix);
* ``first tree``: before the first tree's kernel runs (targets, weights, raw predictions and
  the first gradient exist);
* ``10 trees`` / ``20 trees``: after the kernel of the 10th / 20th tree returned (whether
  memory still grows after the first tree);
* ``fitted``: after ``fit`` returned;
* ``peak``: the process's high-water mark (``VmHWM``) over fit and prediction.

A second table splits the resident memory at the start into anonymous memory (the heap,
arrays) and pages mapped from files (shared libraries), and gives the pages of numba's LLVM
library (``libllvmlite.so``) among the latter: clean pages of a file, counted in RSS as
soon as the process maps them, and how many a kernel maps at a library's first use depends
on the kernel version (how much of the file it maps around each page fault).

::

    PYTHONPATH=src python dev/fit_memory.py                          # this checkout
    python dev/fit_memory.py --src /tmp/main/src --src src --runs 2  # before / after
    python dev/fit_memory.py --model ours_gb_hist --n-estimators 100

Linux only (``/proc``). Memory in MB (2^20 bytes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

#: ``benchmarks/``, whose ``ensembles.py`` holds the datasets and models used here.
BENCHMARKS_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
STAGES = ["start", "labels encoded", "binned", "first tree", "10 trees", "20 trees", "fitted",
          "peak"]


def rss_mb() -> float:
    """Resident set size of this process now."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def resident_split_mb() -> dict[str, float]:
    """Resident memory of this process now: anonymous, mapped from files, and mapped from
    numba's LLVM library (``/proc/self/status``, ``/proc/self/smaps``)."""
    split = {}
    with open("/proc/self/status") as status:
        for line in status:
            name = line.split(":")[0]
            if name in ("RssAnon", "RssFile"):
                split[name] = int(line.split()[1]) / 1024
    llvm_kb = 0
    in_llvm = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            first = line.split(maxsplit=1)[0]
            if "-" in first and not first.endswith(":"):  # a mapping's header line
                in_llvm = "libllvmlite" in line
            elif in_llvm and first == "Rss:":
                llvm_kb += int(line.split()[1])
    return {"anonymous": split.get("RssAnon", float("nan")),
            "files": split.get("RssFile", float("nan")), "libllvmlite.so": llvm_kb / 1024}


def run_worker(model_name: str, dataset: str, n_estimators: int) -> dict:
    """One fit and prediction in this process; RSS at each stage."""
    sys.path.insert(0, str(BENCHMARKS_DIR))
    from ensembles import make_model, peak_rss_since_reset_mb, prepare_worker, reset_peak_rss

    regression, X_train, X_test, y_train, _ = prepare_worker(model_name, dataset)
    stages: dict[str, float] = {}
    _watch_stages(stages)
    reset_peak_rss()
    stages["start"] = rss_mb()
    start_split = resident_split_mb()
    model = make_model(model_name, regression).set_params(n_estimators=n_estimators)
    model.fit(X_train, y_train)
    stages["fitted"] = rss_mb()
    model.predict(X_test)
    stages["peak"] = peak_rss_since_reset_mb()
    return {"model": model_name, "dataset": dataset, "stages": stages,
            "start_split": start_split}


def _watch_stages(stages: dict) -> None:
    """Record RSS after label encoding and binning, before the first tree's kernel and
    after the 10th and 20th tree's."""
    from cipherforest.ensemble import _gradient_boosting as gb

    # A tree is counted when finished (sources without ``_finish_tree``: when grown).
    if hasattr(gb.BaseGradientBoosting, "_finish_tree"):
        tree_owner, tree_step = gb.BaseGradientBoosting, "_finish_tree"
        first_step = "prepare_growth"
    else:
        tree_owner, tree_step, first_step = gb, "grow_tree_on", "grow_tree_on"
    finish = getattr(tree_owner, tree_step)
    grown = [0]

    def counted(*args, **kwargs):
        result = finish(*args, **kwargs)
        grown[0] += 1
        if grown[0] in (10, 20):
            stages[f"{grown[0]} trees"] = rss_mb()
        return result
    setattr(tree_owner, tree_step, counted)

    def after(owner, name, stage):
        original = getattr(owner, name)

        def wrapped(*args, **kwargs):
            result = original(*args, **kwargs)
            stages.setdefault(stage, rss_mb())
            return result
        setattr(owner, name, wrapped)

    def before(owner, name, stage):
        original = getattr(owner, name)

        def wrapped(*args, **kwargs):
            stages.setdefault(stage, rss_mb())
            return original(*args, **kwargs)
        setattr(owner, name, wrapped)

    after(gb.GradientBoostingClassifier, "_encode_y", "labels encoded")
    after(gb, "prepare_tree_data", "binned")
    before(gb, first_step, "first tree")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", action="append", type=Path, default=None,
                        help="a cipherforest source tree to measure (repeatable; default: "
                             "the one on PYTHONPATH)")
    parser.add_argument("--model", default="ours_gb_hist_1thread",
                        help="an ensembles.py model of ours (default ours_gb_hist_1thread)")
    parser.add_argument("--dataset", default="synthetic_1m")
    parser.add_argument("--n-estimators", type=int, default=20,
                        help="rounds (default 20)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.model.startswith("ours_gb"):
        parser.error("--model must be one of ours (ours_gb_hist, ours_gb_hist_1thread)")
    if args.worker:
        print(json.dumps(run_worker(args.model, args.dataset, args.n_estimators)))
        return 0

    sources = args.src or [None]
    results: dict[str, list[dict]] = {}
    for run in range(args.runs):
        for src in sources:  # interleaved, as ensembles.py
            env = dict(os.environ)
            if src is not None:
                if not (src / "cipherforest").is_dir():
                    parser.error(f"--src {src}: no cipherforest package in it")
                env["PYTHONPATH"] = str(src.resolve())
            proc = subprocess.run([sys.executable, __file__, "--worker", "--model", args.model,
                                   "--dataset", args.dataset,
                                   "--n-estimators", str(args.n_estimators)],
                                  env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                return proc.returncode
            label = str(src) if src is not None else "PYTHONPATH"
            results.setdefault(label, []).append(json.loads(proc.stdout.splitlines()[-1]))
            print(f"run {run + 1}: {label}: {results[label][-1]['stages']}", file=sys.stderr)

    print(f"{args.model} on {args.dataset}, {args.n_estimators} rounds, "
          f"{args.runs} run(s) per source tree; RSS in MB, median over runs "
          "(growth over start in brackets)\n")
    print("| sources | " + " | ".join(STAGES) + " |")
    print("|---|" + "---:|" * len(STAGES))
    for label, runs in results.items():
        cells = []
        start = sorted(r["stages"]["start"] for r in runs)[len(runs) // 2]
        for stage in STAGES:
            values = sorted(r["stages"].get(stage, float("nan")) for r in runs)
            value = values[len(values) // 2]
            cells.append(f"{value:.0f}" if stage == "start"
                         else f"{value:.0f} (+{value - start:.0f})")
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("\nResident at the start, MB (median over runs): anonymous, mapped from files, and "
          "of the latter numba's LLVM library\n")
    print("| sources | anonymous | files | libllvmlite.so |")
    print("|---|---:|---:|---:|")
    for label, runs in results.items():
        cells = []
        for part in ("anonymous", "files", "libllvmlite.so"):
            values = sorted(r.get("start_split", {}).get(part, float("nan")) for r in runs)
            cells.append(f"{values[len(values) // 2]:.0f}")
        print(f"| {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
