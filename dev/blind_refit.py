"""The label-blind regression forest with the client's refit: what the trees on ỹ add.

For each data set and fold, PrivateForestRegressor with ``split_selection="blind"`` (ε = 0:
nothing the server sees depends on the targets) and ``leaf_refit="ridge_to_means"``, with
leaves of at least 1 and of at least 5 rows; mean test R² over the folds. Compare with the
``"rr"`` forests of ``benchmarks/label_privacy_regression.py`` (same folds and data).

    PYTHONPATH=src python dev/blind_refit.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from cipherforest.privacy import PrivateForestRegressor  # noqa: E402
from label_privacy_regression import DATASETS, load  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--leaf-sizes", nargs="+", type=int, default=[1, 5])
    parser.add_argument("--max-rows", type=int, default=1000)
    parser.add_argument("--folds", type=int, default=3)
    args = parser.parse_args()
    print("| data set | " + " | ".join(f"blind + ridge_to_means, min_samples_leaf {k}"
                                       for k in args.leaf_sizes) + " |")
    print("|---|" + "---:|" * len(args.leaf_sizes))
    for name in args.datasets:
        X, y = load(name, args.max_rows)
        scores: dict[int, list[float]] = {k: [] for k in args.leaf_sizes}
        with tempfile.TemporaryDirectory() as ledger:
            for fold, (train, test) in enumerate(
                    KFold(args.folds, shuffle=True, random_state=0).split(X)):
                for k in args.leaf_sizes:
                    model = PrivateForestRegressor(
                        100, random_state=fold, split_selection="blind",
                        leaf_refit="ridge_to_means", min_samples_leaf=k,
                        privacy_ledger=ledger).fit(X[train], y[train])
                    scores[k].append(r2_score(y[test], model.predict(X[test])))
        print(f"| {name} | " + " | ".join(f"{np.mean(scores[k]):.3f}" for k in args.leaf_sizes)
              + " |", flush=True)


if __name__ == "__main__":
    main()
