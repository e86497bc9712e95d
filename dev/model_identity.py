"""Do two source trees fit the same models? A fingerprint of each model's predictions, per
source tree, for changes meant to leave every model bit-identical (memory, speed).

Each source tree runs in its own subprocess (its own numba cache next to its sources); every
model is fitted with fixed seeds and the SHA-1 of its predicted probabilities (or
predictions) on 20,000 training rows is printed side by side.

::

    python dev/model_identity.py --src /tmp/main/src --src src

Models: histogram boosting on 300,000 binary rows with NaN on two threads, multiclass digits
(plain and subsampled), Huber regression, histogram (50,000 rows: row shards, two threads)
and exact squared-error regression, exponential loss with cost-complexity pruning, histogram
and exact random forests. For models whose predictions differ, the largest relative
difference from the first source tree's predictions is printed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def fingerprints(save_dir: Path | None = None) -> dict[str, str]:
    """SHA-1 of each model's predictions, in this process's sources (the predictions also
    saved as ``<save_dir>/<case number>.npy`` when given)."""
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
        ("boosting, histogram squared error 50k, 2 threads",
         GradientBoostingRegressor(n_estimators=10, max_bins=255, max_depth=None,
                                   max_leaf_nodes=31, random_state=0, n_jobs=2), X_reg, y_reg),
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
    for case, (name, model, X_fit, y_fit) in enumerate(cases):
        model.fit(X_fit, y_fit)
        rows = X_fit[:20_000]
        pred = (model.predict_proba(rows) if hasattr(model, "predict_proba")
                else model.predict(rows))
        out[name] = hashlib.sha1(np.ascontiguousarray(pred).tobytes()).hexdigest()[:16]
        if save_dir is not None:
            np.save(save_dir / f"{case}.npy", pred)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", action="append", type=Path, required=True,
                        help="a cipherforest source tree (repeatable)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--save", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(fingerprints(args.save)))
        return 0
    import numpy as np

    columns = {}
    saved = tempfile.TemporaryDirectory()
    for index, src in enumerate(args.src):
        if not (src / "cipherforest").is_dir():
            parser.error(f"--src {src}: no cipherforest package in it")
        save = Path(saved.name) / str(index)
        save.mkdir()
        proc = subprocess.run([sys.executable, __file__, "--worker", "--src", str(src),
                               "--save", str(save)],
                              env={**os.environ, "PYTHONPATH": str(src.resolve())},
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return proc.returncode
        columns[str(src)] = json.loads(proc.stdout.splitlines()[-1])
    names = list(next(iter(columns.values())))
    print("| model | " + " | ".join(columns) + " | equal | largest relative difference |")
    print("|---|" + "---|" * len(columns) + "---|---:|")
    all_equal = True
    for case, name in enumerate(names):
        values = [columns[src][name] for src in columns]
        equal = len(set(values)) == 1
        all_equal &= equal
        # How far the predictions are apart (against the first source tree's) when not equal.
        preds = [np.load(Path(saved.name) / str(index) / f"{case}.npy")
                 for index in range(len(columns))]
        scale = np.maximum(np.abs(preds[0]), np.finfo(float).tiny)
        gap = max(float(np.max(np.abs(pred - preds[0]) / scale)) for pred in preds)
        print(f"| {name} | " + " | ".join(values)
              + f" | {'yes' if equal else 'NO'} | {gap:.1e} |")
    saved.cleanup()
    return 0 if all_equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
