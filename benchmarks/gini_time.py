"""The Gini selection (``split_selection="gini"``) with plan-only rounds, against the plaintext
forest, by size.

For each row count: synthetic data (``make_classification``, 20 features, 10 informative, 25 %
held out, as ``benchmarks/private_forest.py --datasets syntheticN``), the private forest
fitted end to end through an embedded server (client, server and the in-process transport)
with the paper's settings of the 22,500-row runs (``max_bins=32``, ``min_samples_split=100``,
BFV keys), then our ``RandomForestClassifier`` with the same forest parameters on the same
plaintext rows. By default (``decide_from="own"``) the rounds carry the plan alone: the server
plans each level (nodes, candidate thresholds in cipher space, left weights), the client
checks the plan against its own replay and chooses from its own labels' counts; no label
ciphertext is uploaded. The fit's time is split into the server's (setup, planning, applying
the answers) and the client's (GIPE and keys offline, then per round replaying and checking
the plan, counting its own labels, choosing).

``--paper`` also fits the paper's flow (``decide_from="server"``: label ciphertexts uploaded,
every round's encrypted per-candidate counts computed by the server and decrypted by the
client) at the sizes given to it (``--paper-rows``; it took ~40 min at 22,500 rows); with
``--reveal-leaves`` (deterministic choices) it checks that both flows grew the same trees.

    python benchmarks/gini_time.py --rows 22500,75000
    python benchmarks/gini_time.py --rows 2000 --trees 10 --paper --paper-rows 2000

The privacy ledger goes to a temporary directory (not the user's ``~/.cipherforest``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

from cipherforest.ensemble import RandomForestClassifier
from cipherforest.privacy import PrivateForestClient, PrivateForestServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gipe import machine_line, temporary_privacy_ledger  # noqa: E402

FOREST = {"max_bins": 32, "min_samples_split": 100}


class _TimedServer:
    """The embedded server (its time is the client's ``fit_stats_.server_seconds``)."""

    def __init__(self, server: PrivateForestServer):
        self.server = server

    def handle(self, data: bytes) -> bytes:
        return self.server.handle(data)


def data(n_train: int):
    """``n_train`` training rows of syntheticN (N = n_train / 0.75) and its test rows."""
    n_rows = round(n_train / 0.75)
    X, y = make_classification(n_samples=n_rows, n_features=20, n_informative=10,
                               random_state=0)
    return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)


def fit_private(X, y, X_test, y_test, trees: int, n_jobs: int, decide_from: str,
                reveal_leaves: bool) -> dict:
    server = _TimedServer(PrivateForestServer(n_jobs=n_jobs))
    client = PrivateForestClient(trees, random_state=0, split_selection="gini", scheme="bfv",
                                 decide_from=decide_from, reveal_leaves=reveal_leaves,
                                 server=server, n_jobs=n_jobs, **FOREST)
    started = time.perf_counter()
    client.fit(X, y)
    fit = time.perf_counter() - started
    stats = client.fit_stats_
    accuracy = float((client.predict(X_test) == y_test).mean())
    trees_ = server.server.tree_arrays(client.session_)
    return {"fit": fit, "server": stats.server_seconds, "rounds": stats.rounds,
            "query_mb": sum(stats.bytes_per_round) / 1e6,
            "uploaded_mb": stats.bytes_sent / 1e6, "accuracy": accuracy, "trees": trees_}


def same_trees(a: list[dict], b: list[dict]) -> bool:
    """Same structure (thresholds are cipher values of each fit's own GIPE keys)."""
    return all(np.array_equal(p[name], q[name]) for p, q in zip(a, b, strict=True)
               for name in ("children_left", "children_right", "feature", "n_node_samples"))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="22500", help="training rows, comma-separated")
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=-1)
    parser.add_argument("--paper", action="store_true",
                        help="also fit the paper's flow (decide_from='server')")
    parser.add_argument("--paper-rows", default="",
                        help="row counts for --paper (default: all of --rows)")
    parser.add_argument("--reveal-leaves", action="store_true",
                        help="the paper's leaf rule (deterministic choices: --paper then "
                             "compares the two flows' trees)")
    args = parser.parse_args(argv)
    temporary_privacy_ledger("gini_time")
    rows = [int(r) for r in args.rows.split(",")]
    paper_rows = ({int(r) for r in args.paper_rows.split(",")} if args.paper_rows
                  else set(rows)) if args.paper else set()
    print(machine_line() + f"; {args.trees} trees, max_bins=32, min_samples_split=100, "
          f"BFV keys, embedded server, n_jobs={args.jobs}, reveal_leaves="
          f"{args.reveal_leaves}")
    header = ("| training rows | flow | fit s | server s | client s | rounds | query MB "
              "| uploaded MB | accuracy | plaintext RF fit s | plaintext RF accuracy "
              "| same trees |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1), flush=True)
    X, _, y, _ = data(400)  # compile (or load) the kernels outside the timings
    RandomForestClassifier(2, random_state=0, **FOREST).fit(X, y)
    for n in rows:
        X, X_test, y, y_test = data(n)
        started = time.perf_counter()
        plain = RandomForestClassifier(args.trees, random_state=0, n_jobs=args.jobs,
                                       **FOREST).fit(X, y)
        plain_fit = time.perf_counter() - started
        plain_accuracy = float((plain.predict(X_test) == y_test).mean())
        flows = ["own"] + (["server"] if n in paper_rows else [])
        results = {}
        for flow in flows:
            r = fit_private(X, y, X_test, y_test, args.trees, args.jobs, flow,
                            args.reveal_leaves)
            results[flow] = r
            same = (same_trees(results["own"]["trees"], r["trees"])
                    if flow == "server" and args.reveal_leaves else "")
            name = "plan-only (own)" if flow == "own" else "paper (server's counts)"
            print(f"| {n:,} | {name} | {r['fit']:.1f} | {r['server']:.1f} "
                  f"| {r['fit'] - r['server']:.1f} | {r['rounds']} "
                  f"| {r['query_mb']:.1f} | {r['uploaded_mb']:.1f} | {r['accuracy']:.4f} "
                  f"| {plain_fit:.1f} | {plain_accuracy:.4f} | {same} |", flush=True)


if __name__ == "__main__":
    main()
