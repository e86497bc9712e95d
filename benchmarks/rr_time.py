"""Fit time of the label-private default (``split_selection="rr"``) against label-blind trees.

Both grow every tree on the server without a query round and sum the leaves' label
ciphertexts; rr also grows by Gini on the randomized labels. Runs alternate (rr, blind, rr,
...) so that machine load hits both alike; prints the medians and their ratio (target
rr ≤ 1.2 × blind).

    python benchmarks/rr_time.py --repeats 5
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from datetime import date

from sklearn.datasets import load_breast_cancer, load_wine

from cipherforest.privacy import PrivateForestClient

DATASETS = {"breast cancer": load_breast_cancer, "wine": load_wine}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="fits per mode and dataset")
    parser.add_argument("--trees", type=int, default=10, help="trees per forest")
    args = parser.parse_args(argv)
    print(f"{date.today()}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {args.trees} trees, CKKS, "
          "embedded server")
    print("| dataset | rr s (median) | blind s (median) | rr / blind |\n|---|---|---|---|")
    for name, load in DATASETS.items():
        X, y = load(return_X_y=True)
        seconds = {"rr": [], "blind": []}
        for _ in range(args.repeats):
            for mode in seconds:
                started = time.perf_counter()
                PrivateForestClient(args.trees, random_state=0, split_selection=mode).fit(X, y)
                seconds[mode].append(time.perf_counter() - started)
        rr, blind = statistics.median(seconds["rr"]), statistics.median(seconds["blind"])
        print(f"| {name} | {rr:.2f} | {blind:.2f} | {rr / blind:.2f} |")


if __name__ == "__main__":
    main()
