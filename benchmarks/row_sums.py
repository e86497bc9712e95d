"""Row sums of the encrypted forest's predictions (privacy/protocol/server/row_sums.py), three
measurements.

* ``replay`` (default): the row-sum kernel alone under real CKKS, on random leaf positions
  for a given number of store ciphertexts, test rows, trees and classes; prints the wall
  time and the seconds per SEAL operation (cProfile).
* ``noise``: a real fit on pendigits (``--train-rows``, ``--trees``); prints how far the
  store's leaf frequencies are from exact counts / draws, and the largest difference between
  row-sum and leaf-reply probabilities.
* ``memory``: a real fit on pendigits with the embedded server wrapped; after every message
  prints the process's RSS, SEAL's memory pool and the label rotations held.

Usage::

    python benchmarks/row_sums.py replay --stores 20 --rows 1000 --trees 10
    python benchmarks/row_sums.py replay --stores 645 --rows 2748 --trees 100
    python benchmarks/row_sums.py noise --train-rows 1500 --trees 5
    python benchmarks/row_sums.py memory --train-rows 3000 --trees 10 --jobs 2

pendigits is ../shared/data/dataset_32_pendigits.csv (as benchmarks/private_forest.py).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np
import seal

from cipherforest.privacy import PrivateForestClient, PrivateForestServer
from cipherforest.privacy.he import BlockLayout, PublicContext, SecretContext
from cipherforest.privacy.protocol.server.row_sums import row_sum_ciphertexts
from private_forest import load, machine_line

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gipe import temporary_privacy_ledger  # noqa: E402

_SEAL_CALLS = {"multiply_plain": "mask multiplications", "rotate_vector": "rotations",
               "add_inplace": "additions", "encode_complex": "mask encoding"}


def replay(n_stores: int, n_rows: int, n_trees: int, n_classes: int, seed: int = 0) -> None:
    layout = BlockLayout("ckks", SecretContext.slot_count("ckks"), n_classes, 10_000)
    secret = SecretContext("ckks", rotation_step=layout.stride,
                           extra_rotations=[layout.giant_step * layout.stride])
    public = PublicContext.from_bytes(secret.public_bytes())
    stores = []
    for _ in range(n_stores):  # one level above the last, as the server keeps its store
        ct = public.load_ciphertext(secret.encrypt_vector(np.ones(public.n_slots)).to_string())
        stores.append(public.finish_leaf_store(public.multiply_mask(
            ct, public.encode_mask(np.ones(public.n_slots)))))
    rng = np.random.default_rng(seed)
    positions = rng.integers(0, n_stores * layout.leaves_per_ciphertext, (n_rows, n_trees))
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    sums = row_sum_ciphertexts(public, layout, stores, positions)
    profile.disable()
    wall = time.perf_counter() - started
    print(f"{machine_line()}\nreplay: {n_stores} store ciphertexts, {n_rows} rows x {n_trees} "
          f"trees, {n_classes} classes -> {len(sums)} sum ciphertexts in {wall:.2f} s")
    for (_, _, name), (calls, _, tottime, _, _) in pstats.Stats(profile).stats.items():
        label = _SEAL_CALLS.get(name.rstrip(">").rsplit(".", 1)[-1])
        if label and name.startswith("<built-in"):  # SEAL's own calls, not our wrappers
            print(f"  {label:<22} {calls:>8} calls {tottime:8.2f} s {100 * tottime / wall:5.1f} %")


def noise(train_rows: int, n_trees: int) -> None:
    X_train, X_test, y_train, _ = load("pendigits", train_rows, 500)
    client = PrivateForestClient(n_trees, random_state=0).fit(X_train, y_train)
    session = client.server_.session(client.session_)
    layout = client.client_session_.layout
    totals = session.leaf_totals()
    decrypted = [layout.leaf_counts(client.client_session_.he.decrypt(ct, complex_slots=True))
                 for ct in session.leaf_store]
    errors = []
    for t, tree in enumerate(session.trees):
        for node, position in tree.leaves.items():
            store, lane = divmod(position, layout.leaves_per_ciphertext)
            counts = decrypted[store][lane] * totals[t][node]
            errors.append(np.abs(counts - np.round(counts)).max() / totals[t][node])
    sums = client.predict_proba(X_test)
    client.set_params(prediction_reply="leaves")
    leaves = client.predict_proba(X_test)
    print(f"{machine_line()}\nnoise: pendigits {train_rows} rows x {n_trees} trees, "
          f"{len(errors)} leaves: store frequency error median {np.median(errors):.1e}, "
          f"max {max(errors):.1e}; max |row sums - leaf reply| in probability "
          f"{np.abs(sums - leaves).max():.1e} over {X_test.shape[0]} test rows")


class _Probe:
    """The embedded server, reporting memory after every message."""

    def __init__(self, n_jobs: int):
        self.inner = PrivateForestServer(n_jobs=n_jobs)
        self.messages = 0

    def handle(self, data: bytes) -> bytes:
        reply = self.inner.handle(data)
        self.messages += 1
        ids = self.inner.session_ids
        session = self.inner.session(ids[0]) if ids else None
        rotations = sum(len(d) for d in session.labels.packs) if session else 0
        with open("/proc/self/status") as status:
            rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
        print(f"message {self.messages}: RSS {rss / 1e6:.2f} GB, SEAL pool "
              f"{seal.MemoryPoolHandle.Global().alloc_byte_count() / 1e9:.2f} GB, "
              f"label rotations {rotations}", flush=True)
        return reply


def memory(train_rows: int, n_trees: int, n_jobs: int) -> None:
    X_train, X_test, y_train, _ = load("pendigits", train_rows, 1000)
    print(machine_line())
    client = PrivateForestClient(n_trees, random_state=0, server=_Probe(n_jobs))
    client.fit(X_train, y_train)
    client.predict(X_test)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="?", default="replay", choices=["replay", "noise", "memory"])
    parser.add_argument("--stores", type=int, default=20)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--trees", type=int, default=10)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--train-rows", type=int, default=1500)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    temporary_privacy_ledger("row_sums")
    if args.what == "replay":
        replay(args.stores, args.rows, args.trees, args.classes)
    elif args.what == "noise":
        noise(args.train_rows, args.trees)
    else:
        memory(args.train_rows, args.trees, args.jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
