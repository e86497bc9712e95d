"""``cipherforest compare`` and ``cipherforest demo``: our models side by side with
scikit-learn's, and the encrypted forest end to end, on data bundled with scikit-learn."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

__all__ = ["COMPARE_DATASETS", "add_compare_parser", "add_demo_parser", "run_comparison",
           "run_compare_command", "run_demo_command", "run_private_demo"]


def _timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


#: Datasets bundled with scikit-learn that ``compare`` can run on.
COMPARE_DATASETS = ("breast_cancer", "wine", "digits")


def run_comparison(out=sys.stdout, datasets: Sequence[str] = COMPARE_DATASETS,
                   n_estimators: int = 100, random_state: int = 0) -> list[dict]:
    """Train our trees and scikit-learn's on bundled datasets; print a side-by-side table.

    Parameters
    ----------
    out : file-like, default=sys.stdout
    datasets : sequence of str, default=COMPARE_DATASETS
        Names from :data:`COMPARE_DATASETS`, in the order to run them.
    n_estimators : int, default=100
        Trees per forest.
    random_state : int, default=0
        Seed of every model and of the train/test split.

    Returns
    -------
    rows : list of dict
        The table rows (dataset, model, accuracy, fit and predict seconds).
    """
    from sklearn import ensemble as sk_ensemble
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine
    from sklearn.model_selection import train_test_split
    from sklearn.tree import DecisionTreeClassifier as SklearnTree

    from ..ensemble import RandomForestClassifier
    from ..tree import DecisionTreeClassifier

    loaders = {"breast_cancer": load_breast_cancer, "wine": load_wine, "digits": load_digits}
    unknown = sorted(set(datasets) - set(loaders))
    if unknown:
        raise ValueError(f"unknown datasets {unknown}; choose from {list(loaders)}")
    if isinstance(n_estimators, bool) or not isinstance(n_estimators, int) or n_estimators < 1:
        raise ValueError(f"n_estimators must be an integer >= 1, got {n_estimators!r}")
    seed, trees = random_state, n_estimators
    models = {
        "tree, ours exact": lambda: DecisionTreeClassifier(random_state=seed),
        "tree, ours hist": lambda: DecisionTreeClassifier(max_bins=255, random_state=seed),
        "tree, scikit-learn": lambda: SklearnTree(random_state=seed),
        "forest, ours exact": lambda: RandomForestClassifier(trees, n_jobs=-1,
                                                             random_state=seed),
        "forest, ours hist": lambda: RandomForestClassifier(trees, n_jobs=-1, max_bins=255,
                                                            random_state=seed),
        "forest, scikit-learn": lambda: sk_ensemble.RandomForestClassifier(
            trees, n_jobs=-1, random_state=seed),
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
    for data_name in datasets:
        X, y = loaders[data_name](return_X_y=True)
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25,
                                                            random_state=seed, stratify=y)
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


def run_private_demo(n_estimators: int = 20, scheme: str = "ckks", n_jobs: int | None = -1,
                     random_state: int = 0, out=sys.stdout) -> dict:
    """Plaintext RF, RF on GIPE ciphers and the GIPE + CKKS protocol on breast cancer.

    The three forests share ``random_state``; the encrypted one must predict exactly as the
    forest trained on the same ciphers with clear labels. Returns the printed numbers.
    """
    import numpy as np
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    from ..ensemble import RandomForestClassifier
    from ..privacy import PrivateForestClient

    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25,
                                                        random_state=random_state, stratify=y)
    print(f"breast cancer: {X_train.shape[0]} training rows, {X_test.shape[0]} test rows, "
          f"{X.shape[1]} features; {n_estimators} trees, scheme {scheme}", file=out)
    plain = RandomForestClassifier(n_estimators, random_state=random_state)
    _, plain_fit = _timed(plain.fit, X_train, y_train)
    plain_pred, plain_predict = _timed(plain.predict, X_test)

    # The paper's selection: its forest is the plaintext forest on the same ciphers, which
    # this demo shows; PrivateForestClient's default (rr) trades that for a label guarantee.
    client = PrivateForestClient(n_estimators, random_state=random_state, scheme=scheme,
                                 n_jobs=n_jobs, verbose=1, split_selection="gini")
    _, private_fit = _timed(client.fit, X_train, y_train)
    private_pred, private_predict = _timed(client.predict, X_test)

    gipe = RandomForestClassifier(n_estimators, random_state=random_state)
    cipher_train = client.encryptor_.transform(X_train).astype(np.float64)
    cipher_test = client.encryptor_.transform(X_test).astype(np.float64)
    _, gipe_fit = _timed(gipe.fit, cipher_train, y_train)
    gipe_pred, gipe_predict = _timed(gipe.predict, cipher_test)

    fit, pred = client.fit_stats_, client.predict_stats_
    result = {
        "accuracy_plaintext": float((plain_pred == y_test).mean()),
        "accuracy_gipe": float((gipe_pred == y_test).mean()),
        "accuracy_gipe_ckks": float((private_pred == y_test).mean()),
        "agreement_with_gipe_forest": float((private_pred == gipe_pred).mean()),
        "fit_seconds": {"plaintext": plain_fit, "gipe": gipe_fit, "gipe_ckks": private_fit},
        "predict_seconds": {"plaintext": plain_predict, "gipe": gipe_predict,
                            "gipe_ckks": private_predict},
        "rounds": fit.rounds,
        "bytes_sent": fit.bytes_sent + pred.bytes_sent,
        "bytes_received": fit.bytes_received + pred.bytes_received,
        "max_round_bytes": max(fit.bytes_per_round, default=0),
        "server_seconds": fit.server_seconds,
        "client_seconds": fit.client_seconds,
    }
    rows = [("plaintext RF", result["accuracy_plaintext"], plain_fit, plain_predict),
            ("RF on GIPE ciphers", result["accuracy_gipe"], gipe_fit, gipe_predict),
            (f"GIPE + {scheme.upper()} protocol", result["accuracy_gipe_ckks"], private_fit,
             private_predict)]
    header = f"{'model':<24} {'accuracy':>8} {'fit s':>8} {'predict s':>9}"
    print(header, file=out)
    print("-" * len(header), file=out)
    for name, acc, fit_s, pred_s in rows:
        print(f"{name:<24} {acc:>8.4f} {fit_s:>8.2f} {pred_s:>9.2f}", file=out)
    mb = 1e-6
    print(f"\nencrypted predictions equal to the GIPE forest's on "
          f"{100 * result['agreement_with_gipe_forest']:.1f}% of test rows", file=out)
    print(f"training: {fit.rounds} rounds (one per tree level, all trees at once); "
          f"server {fit.server_seconds:.1f} s, client {fit.client_seconds:.1f} s", file=out)
    print(f"bytes: upload {fit.bytes_sent * mb:.1f} MB (label ciphertexts + public keys), "
          f"largest round {result['max_round_bytes'] * mb:.2f} MB, all rounds "
          f"{sum(fit.bytes_per_round) * mb:.2f} MB, predictions "
          f"{pred.bytes_received * mb:.2f} MB", file=out)
    return result


def add_demo_parser(sub) -> None:
    demo = sub.add_parser("demo", help="encrypted random forest end to end on breast cancer",
                          description="A plaintext forest, a forest on GIPE ciphers and the "
                          "encrypted protocol (embedded server) on breast cancer, side by "
                          "side: accuracy, time, rounds and bytes.")
    demo.add_argument("--trees", type=int, default=20,
                      help="trees of each forest (default 20)")
    demo.add_argument("--scheme", choices=("ckks", "bfv"), default="ckks",
                      help="label encryption: ckks (approximate, the paper's) or bfv "
                      "(exact integers) (default ckks)")
    demo.add_argument("--jobs", type=int, default=-1,
                      help="server worker processes (default -1: all cores)")


def run_demo_command(args, parser: argparse.ArgumentParser) -> int:
    if args.trees < 1:
        parser.error("--trees must be at least 1")
    run_private_demo(args.trees, args.scheme, args.jobs)
    return 0


def add_compare_parser(sub) -> None:
    compare = sub.add_parser("compare", help="our trees and forests vs scikit-learn on bundled "
                             "data (accuracy, fit and predict times)")
    compare.add_argument("--datasets", nargs="+", choices=COMPARE_DATASETS,
                         default=list(COMPARE_DATASETS), metavar="NAME",
                         help=f"datasets to run, from {', '.join(COMPARE_DATASETS)} "
                              "(default: all)")
    compare.add_argument("--trees", type=int, default=100,
                         help="trees per forest (default 100)")
    compare.add_argument("--seed", type=int, default=0,
                         help="random_state of every model and of the split (default 0)")


def run_compare_command(args, parser: argparse.ArgumentParser) -> int:
    if args.trees < 1:
        parser.error("--trees must be at least 1")
    run_comparison(datasets=args.datasets, n_estimators=args.trees, random_state=args.seed)
    return 0
