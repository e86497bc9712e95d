"""First-run cost: ``import cipherforest`` and the first fit of each estimator family.

A new user pays numba's compile time once (kernels are cached on disk afterwards) and the
import time in every process. This script measures both, each in a fresh child process:

* **first process**: ``NUMBA_CACHE_DIR`` points at a new empty temporary directory, so every
  kernel is compiled, as in a fresh clone or a ``pip install`` without the install step;
* **warm process**: a second process on the first one's cache directory (kernels loaded);
* **after the install step** (``--install-step``): a first process on another empty cache
  directory on which ``python -m cipherforest.precompile`` (what the Makefile's install step
  runs) ran first; the step's own wall and CPU time are printed too, so both the figure
  with and the figure without the step are on the table.

In each child it times ``import cipherforest``, then the import of the estimator classes, then
the first ``fit`` of each family on a small data set (iris, or 200 rows of
``make_regression``), in this order: decision tree classifier (exact splits), the same with
``max_bins=32`` (histogram splits), decision tree regressor, random forest, gradient
boosting, AdaBoost and the GIPE encryptor (``GiniPreservingEncryptor``). Two more
empty-cache processes fit one family alone, the exact tree and the histogram tree, each
compiling its split finder with nothing compiled before it. Wall time and the child's CPU
time are reported (on a shared machine the CPU time is the steadier figure).

``--before-src DIR`` measures a second source tree the same way (e.g. ``git archive <commit>
src | tar -x -C /tmp/before``, then ``--before-src /tmp/before/src``) and prints both side by
side with ratios. ``--breakdown`` also lists, for the first process, the kernels whose
compilation took longest (exclusive of the kernels they call, from numba's ``numba:compile``
events), with the number of type specialisations compiled for each. ``--fit-speed`` times
compiled fits on 20k-100k-row data (CPU time, best of 3), to check that a cut in compile time
costs no run time. The first parallel search in a fresh process and the import's own share:
``benchmarks/parallel_search.py``.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/first_run.py --install-step --breakdown
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_SRC = Path(__file__).resolve().parents[1] / "src"

FAMILIES = (
    ("tree classifier", "DecisionTreeClassifier(random_state=0).fit(X, y)"),
    ("histogram tree classifier",
     "DecisionTreeClassifier(max_bins=32, random_state=0).fit(X, y)"),
    ("tree regressor", "DecisionTreeRegressor(random_state=0).fit(Xr, yr)"),
    ("random forest", "RandomForestClassifier(n_estimators=10, random_state=0).fit(X, y)"),
    ("gradient boosting",
     "GradientBoostingClassifier(n_estimators=10, random_state=0).fit(X, y)"),
    ("AdaBoost", "AdaBoostClassifier(n_estimators=10, random_state=0).fit(X, y)"),
    ("GIPE encryptor", "GiniPreservingEncryptor(random_state=0).fit(X, y)"),
)
#: Families fitted alone in an empty-cache process of their own.
ALONE = ("tree classifier", "histogram tree classifier")

# The child: times are taken with perf_counter (wall) and process_time (CPU of this process).
CHILD = r"""
import json, sys, time
results = {}
breakdown = BREAKDOWN
def clock():
    return time.perf_counter(), time.process_time()
def since(start):
    wall, cpu = clock()
    return [wall - start[0], cpu - start[1]]
start = clock()
import cipherforest
results["import cipherforest"] = since(start)
start = clock()
from cipherforest import (DecisionTreeClassifier, DecisionTreeRegressor,
                          RandomForestClassifier, GradientBoostingClassifier,
                          AdaBoostClassifier)
from cipherforest.privacy import GiniPreservingEncryptor
results["import estimators"] = since(start)
from sklearn.datasets import load_iris, make_regression
X, y = load_iris(return_X_y=True)
Xr, yr = make_regression(n_samples=200, n_features=5, random_state=0)
compiles = []
if breakdown:
    from numba.core import event
    class Timer(event.Listener):
        def __init__(self):
            self.stack = []
        def on_start(self, ev):
            self.stack.append([time.process_time(), 0.0])
        def on_end(self, ev):
            begin, children = self.stack.pop()
            spent = time.process_time() - begin
            if self.stack:
                self.stack[-1][1] += spent
            func = ev.data["dispatcher"].py_func
            compiles.append([func.__module__ + "." + func.__qualname__, spent - children])
    event.register("numba:compile", Timer())
for name, code in FAMILIES:
    start = clock()
    exec(code)
    results["first fit: " + name] = since(start)
print(json.dumps({"times": results, "compiles": compiles}))
"""

# Fit speed once compiled (to check that compile-time cuts cost no run time): best of 3
# CPU-time fits per model on fixed synthetic data, after a warm-up fit.
SPEED_CHILD = r"""
import json, time
from sklearn.datasets import make_classification, make_regression
from cipherforest import (DecisionTreeClassifier, DecisionTreeRegressor,
                          GradientBoostingRegressor, RandomForestClassifier)
Xc, yc = make_classification(n_samples=100_000, n_features=20, n_informative=10,
                             random_state=0)
Xr, yr = make_regression(n_samples=100_000, n_features=20, n_informative=10, random_state=0)
models = {
    "tree classifier, exact, 100k x 20": (lambda: DecisionTreeClassifier(random_state=0), Xc, yc),
    "tree classifier, histogram, 100k x 20": (
        lambda: DecisionTreeClassifier(max_bins=255, random_state=0), Xc, yc),
    "tree regressor, exact, 100k x 20": (lambda: DecisionTreeRegressor(random_state=0), Xr, yr),
    "random forest, 10 trees, 20k x 20": (
        lambda: RandomForestClassifier(10, n_jobs=1, random_state=0), Xc[:20_000],
        yc[:20_000]),
    "gradient boosting, 30 rounds, 100k x 20": (
        lambda: GradientBoostingRegressor(n_estimators=30, random_state=0), Xr, yr),
}
out = {}
for name, (make, X, y) in models.items():
    make().fit(X[:2000], y[:2000])
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        make().fit(X, y)
        best = min(best, time.process_time() - start)
    out[name] = best
print(json.dumps(out))
"""


# The install step, timed from a child: wall seconds and the CPU seconds of its process.
STEP_CHILD = r"""
import json, resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run([sys.executable, "-m", "cipherforest.precompile", "--quiet"], check=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps([time.perf_counter() - start, usage.ru_utime + usage.ru_stime]))
"""


def child_environment(src: Path, **variables: str) -> dict[str, str]:
    """The environment of a measured child: ``src`` first on the path, and bytecode written
    as a user's Python writes it (``PYTHONDONTWRITEBYTECODE`` dropped: otherwise every
    process compiles the package's sources again, a tenth of a second or more)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(src), **variables}


def run_child(code: str, src: Path, cache_dir: str) -> dict | list:
    env = child_environment(src, NUMBA_CACHE_DIR=cache_dir)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child process failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def child_code(families: tuple, breakdown: bool) -> str:
    return CHILD.replace("BREAKDOWN", repr(breakdown)).replace("FAMILIES", repr(families))


def measure(src: Path, breakdown: bool, install_step: bool, fit_speed: bool) -> dict:
    """The processes described in the module docstring, for one source tree."""
    out: dict = {"alone": {}, "step": None, "installed": None, "speed": None}
    with tempfile.TemporaryDirectory(prefix="first_run_numba_") as cache_dir:
        print(f"  first process ({src}) ...", file=sys.stderr, flush=True)
        out["first"] = run_child(child_code(FAMILIES, breakdown), src, cache_dir)
        print("  warm process ...", file=sys.stderr, flush=True)
        out["warm"] = run_child(child_code(FAMILIES, False), src, cache_dir)
        if fit_speed:
            out["speed"] = run_child(SPEED_CHILD, src, cache_dir)
    for name in ALONE:
        with tempfile.TemporaryDirectory(prefix="first_run_numba_") as cache_dir:
            print(f"  {name} alone ...", file=sys.stderr, flush=True)
            family = tuple(f for f in FAMILIES if f[0] == name)
            out["alone"][name] = run_child(child_code(family, False), src,
                                           cache_dir)["times"]["first fit: " + name]
    if install_step and (src / "cipherforest" / "precompile.py").exists():
        with tempfile.TemporaryDirectory(prefix="first_run_numba_") as cache_dir:
            print("  install step, then a first process ...", file=sys.stderr, flush=True)
            out["step"] = run_child(STEP_CHILD, src, cache_dir)
            out["installed"] = run_child(child_code(FAMILIES, False), src, cache_dir)
    return out


def fmt(seconds: float) -> str:
    return f"{seconds:.2f}"


def ratio(after: float, before: float) -> str:
    return f"{after / before:.2f}×" if before > 0 else "–"


TOTAL = "total of first fits"


def step_times(result: dict, kind: str, step: str) -> list[float]:
    times = result[kind]["times"]
    if step == TOTAL:
        pairs = [v for k, v in times.items() if k.startswith("first fit")]
        return [sum(p[0] for p in pairs), sum(p[1] for p in pairs)]
    return times[step]


def times_table(after: dict, before: dict | None) -> list[str]:
    kinds = [("first", "first process (empty cache)")]
    if after["installed"] is not None:
        kinds.append(("installed", "first process after the install step"))
    kinds.append(("warm", "warm process"))
    header, rule = "| step |", "|---|"
    for _, label in kinds:
        if before is not None:
            header += f" {label}: before CPU s | after CPU s | after/before |"
            rule += "---:|---:|---:|"
        else:
            header += f" {label}: wall s | CPU s |"
            rule += "---:|---:|"
    lines = [header, rule]
    for step in [*after["first"]["times"], TOTAL]:
        row = f"| {step} |"
        for kind, _ in kinds:
            a = step_times(after, kind, step)
            if before is not None and before[kind] is None:  # no install step there
                row += f" – | {fmt(a[1])} | – |"
            elif before is not None:
                b = step_times(before, kind, step)
                row += f" {fmt(b[1])} | {fmt(a[1])} | {ratio(a[1], b[1])} |"
            else:
                row += f" {fmt(a[0])} | {fmt(a[1])} |"
        lines.append(row)
    return lines


def alone_lines(after: dict, before: dict | None) -> list[str]:
    lines = ["", "First fit of one family alone, empty cache (wall s, CPU s):", ""]
    for name in ALONE:
        wall, cpu = after["alone"][name]
        line = f"- {name}: {fmt(wall)} s wall, {fmt(cpu)} s CPU"
        if before is not None:
            old_cpu = before["alone"][name][1]
            line += f" (before {fmt(old_cpu)} s CPU, {ratio(cpu, old_cpu)})"
        lines.append(line)
    if after["step"] is not None:
        wall, cpu = after["step"]
        lines.append(f"- the install step (`python -m cipherforest.precompile`) on an empty "
                     f"cache: {fmt(wall)} s wall, {fmt(cpu)} s CPU")
    return lines


def breakdown_table(result: dict, top: int) -> list[str]:
    per_kernel: dict[str, list] = {}
    for name, seconds in result["first"]["compiles"]:
        entry = per_kernel.setdefault(name, [0, 0.0])
        entry[0] += 1
        entry[1] += seconds
    total = sum(entry[1] for entry in per_kernel.values())
    ours = sum(v[1] for k, v in per_kernel.items() if k.startswith("cipherforest"))
    lines = [f"Compile CPU time in numba: {total:.1f} s in {len(per_kernel)} functions "
             f"(cipherforest's own kernels {ours:.1f} s, numba's library code the rest).", "",
             "| function | specialisations | compile CPU s (exclusive) | share |",
             "|---|---:|---:|---:|"]
    ranked = sorted(per_kernel.items(), key=lambda item: -item[1][1])
    for name, (count, seconds) in ranked[:top]:
        lines.append(f"| `{name}` | {count} | {seconds:.2f} | {100 * seconds / total:.0f} % |")
    rest = ranked[top:]
    if rest:
        seconds = sum(v[1] for _, v in rest)
        lines.append(f"| {len(rest)} others | {sum(v[0] for _, v in rest)} | {seconds:.2f} |"
                     f" {100 * seconds / total:.0f} % |")
    return lines


def machine_line() -> str:
    """The machine and library versions (``ensembles.machine_line``), the load and the time."""
    from ensembles import machine_line as machine  # this folder (the script's sys.path[0])

    return (f"{machine()}; 1-min load average {os.getloadavg()[0]:.2f} at the end; "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=REPO_SRC,
                        help="source tree to measure (default: this repository's src)")
    parser.add_argument("--before-src", type=Path, default=None,
                        help="another source tree to compare against")
    parser.add_argument("--install-step", action="store_true",
                        help="also measure a first process after python -m "
                             "cipherforest.precompile (the Makefile's install step)")
    parser.add_argument("--breakdown", action="store_true",
                        help="list the kernels with the longest compile times")
    parser.add_argument("--top", type=int, default=20, help="rows of the breakdown")
    parser.add_argument("--fit-speed", action="store_true",
                        help="also time compiled fits on 20k-100k-row data (CPU s, best of 3)")
    args = parser.parse_args(argv)

    before = None
    if args.before_src is not None:
        print("before:", file=sys.stderr)
        before = measure(args.before_src, args.breakdown, args.install_step, args.fit_speed)
    print("after:" if before else "measuring:", file=sys.stderr)
    after = measure(args.src, args.breakdown, args.install_step, args.fit_speed)

    print(machine_line() + "\n")
    print("\n".join(times_table(after, before)))
    print("\n".join(alone_lines(after, before)))
    if after["speed"] is not None:
        print("\nFit speed once compiled (CPU s, best of 3):\n")
        if before is not None:
            print("| model | before | after | after/before |\n|---|---:|---:|---:|")
            for name, seconds in after["speed"].items():
                old_seconds = before["speed"][name]
                print(f"| {name} | {old_seconds:.3f} | {seconds:.3f} |"
                      f" {ratio(seconds, old_seconds)} |")
        else:
            print("| model | CPU s |\n|---|---:|")
            for name, seconds in after["speed"].items():
                print(f"| {name} | {seconds:.3f} |")
    if args.breakdown:
        for label, result in (("before", before), ("after", after)):
            if result is not None:
                print(f"\nCompile-time breakdown, first process ({label}):\n")
                print("\n".join(breakdown_table(result, args.top)))


if __name__ == "__main__":
    main()
