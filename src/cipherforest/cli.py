"""Command-line interface: ``cipherforest demo`` and friends."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence


def _timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def run_demo(out=sys.stdout) -> list[dict]:
    """Train our trees and scikit-learn's on bundled datasets; print a side-by-side table.

    Returns the table rows (used by tests).
    """
    from sklearn import ensemble as sk_ensemble
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine
    from sklearn.model_selection import train_test_split
    from sklearn.tree import DecisionTreeClassifier as SklearnTree

    from .ensemble import RandomForestClassifier
    from .tree import DecisionTreeClassifier

    datasets = {"breast_cancer": load_breast_cancer, "wine": load_wine, "digits": load_digits}
    models = {
        "tree, ours exact": lambda: DecisionTreeClassifier(random_state=0),
        "tree, ours hist": lambda: DecisionTreeClassifier(max_bins=255, random_state=0),
        "tree, scikit-learn": lambda: SklearnTree(random_state=0),
        "forest, ours exact": lambda: RandomForestClassifier(100, n_jobs=-1, random_state=0),
        "forest, ours hist": lambda: RandomForestClassifier(100, n_jobs=-1, max_bins=255,
                                                            random_state=0),
        "forest, scikit-learn": lambda: sk_ensemble.RandomForestClassifier(
            100, n_jobs=-1, random_state=0),
    }
    # Compile the numba kernels before timing (cached on disk after the first run).
    warm_X, warm_y = load_wine(return_X_y=True)
    for name, make in models.items():
        if "ours" in name:
            make().fit(warm_X, warm_y)

    rows = []
    header = f"{'dataset':<14} {'model':<21} {'accuracy':>8} {'fit ms':>8} {'predict ms':>10}"
    print(header, file=out)
    print("-" * len(header), file=out)
    for data_name, loader in datasets.items():
        X, y = loader(return_X_y=True)
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25,
                                                            random_state=0, stratify=y)
        for model_name, make in models.items():
            model = make()
            _, fit_s = _timed(model.fit, X_train, y_train)
            pred, pred_s = _timed(model.predict, X_test)
            accuracy = float((pred == y_test).mean())
            rows.append({"dataset": data_name, "model": model_name, "accuracy": accuracy,
                         "fit_seconds": fit_s, "predict_seconds": pred_s})
            print(f"{data_name:<14} {model_name:<21} {accuracy:>8.4f} {fit_s * 1e3:>8.2f} "
                  f"{pred_s * 1e3:>10.2f}", file=out)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cipherforest`` console script."""
    parser = argparse.ArgumentParser(prog="cipherforest", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="train on bundled datasets and compare with scikit-learn")
    args = parser.parse_args(argv)
    if args.command == "demo":
        run_demo()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
