"""What the server's encrypted class counts cost: the Gini selection with and without them.

In ``"gini"``/``"dp"`` the client decides every split from the class counts of its own labels
(``decide_from="own"``, the default), so the rounds carry the plan alone; the paper's flow
(``decide_from="server"``) has the server compute encrypted per-candidate counts that the
client decrypts, checks against its own and decides from (docs/threat_model.md). This script
fits 10 trees with the Gini selection (CKKS, embedded server) on breast cancer and wine in
both flows and prints the fit time, the server's share, the client's time computing its own
counts, the rounds and their bytes.

Run from the repository root::

    PYTHONPATH=src .venv/bin/python benchmarks/count_audit.py [--max-bins 16]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from sklearn.datasets import load_breast_cancer, load_wine

from cipherforest.privacy import PrivateForestClient
from cipherforest.privacy.protocol import session as session_module

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gipe import temporary_privacy_ledger  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trees", type=int, default=10)
    parser.add_argument("--max-bins", type=int, default=None)
    args = parser.parse_args()
    temporary_privacy_ledger("count_audit")
    spent = {"own": 0.0}
    own_counts = session_module.clear_counts

    def timed_own(*a):
        started = time.perf_counter()
        out = own_counts(*a)
        spent["own"] += time.perf_counter() - started
        return out

    session_module.clear_counts = timed_own
    for name, load in (("breast cancer", load_breast_cancer), ("wine", load_wine)):
        X, y = load(return_X_y=True)
        for flow in ("own", "server"):
            spent["own"] = 0.0
            started = time.perf_counter()
            client = PrivateForestClient(args.trees, random_state=0, max_bins=args.max_bins,
                                         split_selection="gini", decide_from=flow).fit(X, y)
            total = time.perf_counter() - started
            stats = client.fit_stats_
            print(f"{name}, decide_from={flow!r}: fit {total:.1f} s, server "
                  f"{stats.server_seconds:.1f} s, rounds {stats.rounds}, query MB "
                  f"{sum(stats.bytes_per_round) / 1e6:.1f}, uploaded MB "
                  f"{stats.bytes_sent / 1e6:.1f}, client own counts {spent['own']:.2f} s",
                  flush=True)


if __name__ == "__main__":
    main()
