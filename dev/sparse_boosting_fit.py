"""One sparse boosting fit on the first rows of ``benchmarks/sparse.py``'s ``text`` cell.

The matrix's ``ours_gb_hist`` settings (31 leaves, ``min_samples_leaf=20``,
``max_bins=255``) after a warm-up fit; prints fit wall and CPU seconds, predict seconds,
accuracy on the cell's last 4,000 rows, the 1-minute load and the peak RSS::

    PYTHONPATH=src .venv/bin/python dev/sparse_boosting_fit.py [rows] [rounds] [n_jobs]
"""

import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from cipherforest.ensemble import GradientBoostingClassifier  # noqa: E402
from sparse import make_cell  # noqa: E402


def main() -> None:
    n, rounds, jobs = (int(a) for a in (sys.argv[1:] + ["10000", "10", "1"][len(sys.argv) - 1:]))
    X, y = make_cell("text")
    X_test, y_test = X[16000:], y[16000:]
    params = dict(max_depth=None, max_leaf_nodes=31, min_samples_leaf=20, max_bins=255,
                  random_state=0, n_jobs=jobs)
    GradientBoostingClassifier(n_estimators=2, **params).fit(X[:500], y[:500])
    wall, cpu = time.perf_counter(), time.process_time()
    model = GradientBoostingClassifier(n_estimators=rounds, **params).fit(X[:n], y[:n])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    start = time.perf_counter()
    accuracy = (model.predict(X_test) == y_test).mean()
    print(f"rows {n} rounds {rounds} n_jobs {jobs}: fit {wall:.2f} s (CPU {cpu:.2f} s), "
          f"predict {time.perf_counter() - start:.3f} s, accuracy {accuracy:.4f}, "
          f"load {os.getloadavg()[0]:.1f}, peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
