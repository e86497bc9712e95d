"""The first parallel search in a fresh process, and what importing cipherforest costs.

``GridSearchCV(n_jobs=2)`` runs its fits in joblib's worker processes, which start on the
first search of a session: each imports scikit-learn and the estimator's package and loads
its compiled kernels. This script measures, each in a fresh Python process with a warm
numba cache (as after the install step; one warm-up process fills it first):

* the first ``GridSearchCV(RandomForestClassifier(50), {"max_depth": [3, None]}, cv=3)`` on
  breast cancer with ``n_jobs=1`` and ``n_jobs=2`` (wall seconds; the same for
  scikit-learn's own ``RandomForestClassifier``, the floor that any estimator's workers
  pay), and a second search in the same process (workers reused);
* ``python -X importtime -c "from cipherforest import RandomForestClassifier"``: the
  import's total and cipherforest's own share (the self time of its modules);
* a worker's part: after the imports a search worker makes anyway
  (``sklearn.model_selection``), the import of ``RandomForestClassifier`` and its first fit
  (which loads the kernels from the cache).

Processes alternate between the variants (``--repeats`` rounds) and medians are printed, with
the machine, the load and the date. Children write bytecode (``.pyc``) as a user's Python
does, whatever ``PYTHONDONTWRITEBYTECODE`` says here. Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/parallel_search.py --repeats 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from first_run import child_environment  # this folder (the script's sys.path[0])

REPO_SRC = Path(__file__).resolve().parents[1] / "src"

SEARCH_CHILD = r"""
import json, sys, time
library, n_jobs = sys.argv[1], int(sys.argv[2])
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import GridSearchCV
if library == "cipherforest":
    from cipherforest import RandomForestClassifier
else:
    from sklearn.ensemble import RandomForestClassifier
X, y = load_breast_cancer(return_X_y=True)
times = []
for _ in range(2):
    start = time.perf_counter()
    GridSearchCV(RandomForestClassifier(50, random_state=0), {"max_depth": [3, None]}, cv=3,
                 n_jobs=n_jobs).fit(X, y)
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""

WORKER_CHILD = r"""
import json, time
import sklearn.model_selection._validation  # what a search worker imports anyway
from sklearn.datasets import load_breast_cancer
X, y = load_breast_cancer(return_X_y=True)
def clock():
    return time.perf_counter(), time.process_time()
start = clock()
from cipherforest import RandomForestClassifier
imported = clock()
RandomForestClassifier(50, max_depth=3, random_state=0).fit(X, y)
fitted = clock()
print(json.dumps({"import": [imported[0] - start[0], imported[1] - start[1]],
                  "first fit": [fitted[0] - imported[0], fitted[1] - imported[1]]}))
"""


def run(args: list[str], src: Path) -> subprocess.CompletedProcess:
    env = child_environment(src)
    proc = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child process failed:\n{proc.stderr}")
    return proc


def last_json(proc: subprocess.CompletedProcess):
    return json.loads(proc.stdout.strip().splitlines()[-1])


def import_times(src: Path) -> dict[str, float]:
    """Seconds of ``from cipherforest import RandomForestClassifier`` by ``-X importtime``:
    the total, cipherforest's own modules, and the largest other top-level packages."""
    proc = run(["-X", "importtime", "-c", "from cipherforest import RandomForestClassifier"],
               src)
    own = total = 0.0
    per_package: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        self_us, _, name = line[len("import time:"):].split("|")
        if not self_us.strip().isdigit():
            continue  # the header line
        seconds = int(self_us) / 1e6
        package = name.strip().split(".")[0]
        total += seconds
        per_package[package] = per_package.get(package, 0.0) + seconds
        if package == "cipherforest":
            own += seconds
    others = sorted((item for item in per_package.items() if item[0] != "cipherforest"),
                    key=lambda item: -item[1])[:5]
    return {"total": total, "cipherforest": own, **{f"of which {k}": v for k, v in others}}


def median(values: list[float]) -> float:
    return statistics.median(values)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=REPO_SRC,
                        help="source tree to measure (default: this repository's src)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="rounds of fresh processes per variant (medians are printed)")
    args = parser.parse_args(argv)

    run(["-c", WORKER_CHILD], args.src)  # fills the kernel cache if it is empty
    searches: dict[tuple[str, int], list[list[float]]] = {}
    imports: list[dict[str, float]] = []
    workers: list[dict] = []
    for repeat in range(args.repeats):
        print(f"  round {repeat + 1} of {args.repeats} ...", file=sys.stderr, flush=True)
        for library in ("cipherforest", "scikit-learn"):
            for n_jobs in (1, 2):
                proc = run(["-c", SEARCH_CHILD, library, str(n_jobs)], args.src)
                searches.setdefault((library, n_jobs), []).append(last_json(proc))
        imports.append(import_times(args.src))
        workers.append(last_json(run(["-c", WORKER_CHILD], args.src)))

    from first_run import machine_line  # this folder (the script's sys.path[0])

    print(f"{machine_line()}; medians of {args.repeats} fresh processes each\n")
    print("GridSearchCV(RandomForestClassifier(50), {max_depth: [3, None]}, cv=3) on breast "
          "cancer, wall s:\n")
    print("| estimator | first search, n_jobs=1 | first search, n_jobs=2 | n_jobs=2 − n_jobs=1 |"
          " second search, n_jobs=2 |")
    print("|---|---:|---:|---:|---:|")
    for library in ("cipherforest", "scikit-learn"):
        one = median([t[0] for t in searches[(library, 1)]])
        two = median([t[0] for t in searches[(library, 2)]])
        second = median([t[1] for t in searches[(library, 2)]])
        print(f"| {library} | {one:.2f} | {two:.2f} | {two - one:+.2f} | {second:.2f} |")
    print("\n`python -X importtime -c \"from cipherforest import RandomForestClassifier\"`, "
          "self time summed per top-level package, s:\n")
    medians = {key: median([entry.get(key, 0.0) for entry in imports])
               for key in {key for entry in imports for key in entry}}
    for key in ("total", "cipherforest"):
        print(f"- {key}: {medians.pop(key):.3f}")
    for key, seconds in sorted(medians.items(), key=lambda item: -item[1])[:5]:
        print(f"- {key}: {seconds:.3f}")
    print("\nA search worker's part, after importing sklearn.model_selection (wall s, CPU s):\n")
    for step in ("import", "first fit"):
        wall = median([entry[step][0] for entry in workers])
        cpu = median([entry[step][1] for entry in workers])
        label = ("from cipherforest import RandomForestClassifier" if step == "import"
                 else "first fit (kernels loaded from the cache)")
        print(f"- {label}: {wall:.3f} wall, {cpu:.3f} CPU")


if __name__ == "__main__":
    main()
