"""Do two source trees fit the same models? A fingerprint of each model's predictions, per
source tree, for changes meant to leave every model bit-identical (memory, speed).

Each source tree runs in its own subprocess (its own numba cache next to its sources); every
model is fitted with fixed seeds and the SHA-1 of its predicted probabilities (or
predictions) on 20,000 training rows is printed side by side.

::

    python benchmarks/model_identity.py --src /tmp/main/src --src src

Models: histogram boosting on 300,000 binary rows with NaN on two threads, multiclass digits
(plain and subsampled), Huber and exact squared-error regression, exponential loss with
cost-complexity pruning, histogram and exact random forests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path


def fingerprints() -> dict[str, str]:
    """SHA-1 of each model's predictions, in this process's sources."""
    import numpy as np
    from sklearn.datasets import load_digits, make_classification, make_regression

    from cipherforest.ensemble import (
        GradientBoostingClassifier,
        GradientBoostingRegressor,
        RandomForestClassifier,
    )

    X, y = make_classification(300_000, 10, n_informative=6, random_state=1)
    X[::97, 3] = np.nan
    X_digits, y_digits = load_digits(return_X_y=True)
    X_reg, y_reg = make_regression(50_000, 10, noise=5, random_state=2)
    cases = [
        ("boosting, binary 300k with NaN, 2 threads",
         GradientBoostingClassifier(n_estimators=15, max_depth=None, max_leaf_nodes=31,
                                    max_bins=255, random_state=0, n_jobs=2), X, y),
        ("boosting, digits",
         GradientBoostingClassifier(n_estimators=10, max_bins=64, random_state=0, n_jobs=2),
         X_digits, y_digits),
        ("boosting, digits, subsample 0.7",
         GradientBoostingClassifier(n_estimators=10, max_bins=64, subsample=0.7,
                                    random_state=0), X_digits, y_digits),
        ("boosting, Huber regression",
         GradientBoostingRegressor(n_estimators=10, loss="huber", max_bins=128,
                                   random_state=0), X_reg, y_reg),
        ("boosting, exact squared error",
         GradientBoostingRegressor(n_estimators=10, random_state=0), X_reg[:5000],
         y_reg[:5000]),
        ("boosting, exponential loss, ccp_alpha",
         GradientBoostingClassifier(n_estimators=10, loss="exponential", random_state=0,
                                    ccp_alpha=1e-4), X[:5000], y[:5000]),
        ("random forest, histogram, 250k",
         RandomForestClassifier(10, max_bins=255, random_state=0), X[:250_000], y[:250_000]),
        ("random forest, exact, digits",
         RandomForestClassifier(10, random_state=0), X_digits, y_digits),
    ]
    out = {}
    for name, model, X_fit, y_fit in cases:
        model.fit(X_fit, y_fit)
        rows = X_fit[:20_000]
        pred = (model.predict_proba(rows) if hasattr(model, "predict_proba")
                else model.predict(rows))
        out[name] = hashlib.sha1(np.ascontiguousarray(pred).tobytes()).hexdigest()[:16]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", action="append", type=Path, required=True,
                        help="a cipherforest source tree (repeatable)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(fingerprints()))
        return 0
    columns = {}
    for src in args.src:
        if not (src / "cipherforest").is_dir():
            parser.error(f"--src {src}: no cipherforest package in it")
        proc = subprocess.run([sys.executable, __file__, "--worker", "--src", str(src)],
                              env={**os.environ, "PYTHONPATH": str(src.resolve())},
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return proc.returncode
        columns[str(src)] = json.loads(proc.stdout.splitlines()[-1])
    names = list(next(iter(columns.values())))
    print("| model | " + " | ".join(columns) + " | equal |")
    print("|---|" + "---|" * len(columns) + "---|")
    all_equal = True
    for name in names:
        values = [columns[src][name] for src in columns]
        equal = len(set(values)) == 1
        all_equal &= equal
        print(f"| {name} | " + " | ".join(values) + f" | {'yes' if equal else 'NO'} |")
    return 0 if all_equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
