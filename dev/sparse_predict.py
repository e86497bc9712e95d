"""Boosting's predict on CSR rows beside LightGBM's: the ``sparse_text`` cell.

Both fit 100 rounds (31 leaves, ``min_samples_leaf=20``, 255 bins) on the cell's first
``rows`` training rows, then predict its last 4,000 rows ``repeats`` times; prints the best
wall and CPU milliseconds of each::

    PYTHONPATH=src .venv/bin/python dev/sparse_predict.py [rows] [repeats]
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import lightgbm  # noqa: E402

from cipherforest.ensemble import GradientBoostingClassifier  # noqa: E402
from sparse import make_cell  # noqa: E402


def best_of(predict, X, repeats: int) -> tuple[float, float]:
    wall = cpu = float("inf")
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        predict(X)
        wall = min(wall, time.perf_counter() - w)
        cpu = min(cpu, time.process_time() - c)
    return 1e3 * wall, 1e3 * cpu


def main() -> None:
    n, repeats = (int(a) for a in (sys.argv[1:] + ["4000", "5"][len(sys.argv) - 1:]))
    X, y = make_cell("text")
    X_test = X[16000:]
    ours = GradientBoostingClassifier(n_estimators=100, max_depth=None, max_leaf_nodes=31,
                                      min_samples_leaf=20, max_bins=255, random_state=0,
                                      n_jobs=-1).fit(X[:n], y[:n])
    peer = lightgbm.LGBMClassifier(n_estimators=100, num_leaves=31, min_child_samples=20,
                                   max_bin=255, n_jobs=os.cpu_count(), verbose=-1)
    peer.fit(X[:n], y[:n])
    ours.predict(X_test[:50])
    for name, model in (("ours", ours), ("lightgbm", peer)):
        wall, cpu = best_of(model.predict, X_test, repeats)
        print(f"{name}: predict {X_test.shape[0]} rows {wall:.1f} ms (CPU {cpu:.1f} ms)")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
