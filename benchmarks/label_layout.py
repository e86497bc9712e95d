"""Label layouts side by side: server bytes per training row, upload and level seconds, noise.

The server holds, per training row, the label rotations its running sums add
(docs/private_forest.md, "Bounded memory per row"). This script runs the server's real level
code (``privacy.protocol.server``: label rotations, planning, running sums, packed query
blocks) on the same data and the same trees under several homomorphic layouts, in one run,
and prints per layout:

* bytes held per training row (the label rotations' coefficients, exactly) and the
  layout's process's peak RSS (each layout runs in its own process);
* upload seconds (expanding the label packs into rotations);
* seconds of each of the first ``--levels`` tree levels (``--trees`` trees; every planned
  node split at its first feature's middle candidate to reach the next level), query
  ciphertexts;
* BFV: the noise budget left in the root level's query ciphertexts (bits; 0 would not
  decrypt), and whether the decrypted node totals equal the bootstrap class counts.

Layouts (``--layouts``):

* ``previous`` — the layout before this one: BFV, N = 8192, SEAL's default modulus (four
  data primes), plain modulus 2^30, every lane rotation held (one ciphertext per row), and
  the server's square of every query ciphertext (what it computed then);
* ``bfv-P1``, ``bfv-P2``, ``bfv-P4`` — BFV, N = 8192, two 60-bit data primes, plain modulus
  2^24, counts returned unsquared, ``P`` rotation parts (``1/P`` of the rotations held; the
  library's choice is P = 2);
* ``ckks-P1``, ``ckks-P4`` — CKKS with its library parameters and 1 or 4 parts (the
  library's choice is 4).

Usage::

    python benchmarks/label_layout.py --rows 30000 --trees 4 --levels 3
    python benchmarks/label_layout.py --rows 2000 --trees 2 --levels 2 --layouts previous,bfv-P2
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import time
from pathlib import Path

import numpy as np
import seal
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

from cipherforest.privacy import GiniPreservingEncryptor
from cipherforest.privacy.he import BlockLayout, SecretContext, scheme_named
from cipherforest.privacy.he.bundles import unpack_bundle
from cipherforest.privacy.he.schemes import BFV
from cipherforest.privacy.protocol.params import ForestSpec, forest_meta
from cipherforest.privacy.protocol.server.level import compute_level
from cipherforest.privacy.protocol.server.session import ServerSession

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gipe import machine_line  # noqa: E402

LAYOUTS = {
    "previous": (lambda: BFV(8192, 30, None, rotation_parts=1), True),
    "bfv-P1": (lambda: BFV(rotation_parts=1), False),
    "bfv-P2": (lambda: BFV(rotation_parts=2), False),
    "bfv-P4": (lambda: BFV(rotation_parts=4), False),
    "ckks-P1": (lambda: scheme_named("ckks"), False),
    "ckks-P4": (lambda: scheme_named("ckks"), False),
}


def _parts(name: str) -> int | None:
    return int(name.split("-P")[1]) if "-P" in name else None


def _data(n_rows: int, seed: int):
    X, y = make_classification(n_samples=n_rows, n_features=20, n_informative=10,
                               random_state=seed)
    X_train, _, y_train, _ = train_test_split(X, y, test_size=0.25, random_state=seed,
                                              stratify=y)
    cipher = GiniPreservingEncryptor(mode="quantile").fit_transform(X_train, y_train)
    return np.asarray(cipher, dtype=np.float64), y_train


def run_layout(name: str, X: np.ndarray, y: np.ndarray, args) -> dict:
    make_kind, square = LAYOUTS[name]
    kind = make_kind()
    n_classes = int(y.max()) + 1
    layout = BlockLayout(kind, kind.n_slots, n_classes, X.shape[0],
                         rotation_parts=_parts(name))
    secret = SecretContext(kind, rotation_step=layout.stride,
                           extra_rotations=layout.rotation_steps()[2:])
    public = secret.public_context()
    params = {"n_estimators": args.trees, "max_features": "sqrt", "max_depth": None,
              "min_samples_split": args.min_samples_split, "min_samples_leaf": 1,
              "bootstrap": True, "max_samples": None, "max_bins": args.max_bins,
              "random_state": 0, "split_selection": "gini"}
    spec = ForestSpec.from_meta(forest_meta(params, *X.shape), *X.shape)
    session = ServerSession("bench", public, X, n_classes, spec, layout)
    started = time.perf_counter()
    for blob in secret.encrypt_packed_labels(y, layout):
        session.labels.add_pack(public.load_fresh_ciphertext(blob))
    upload = time.perf_counter() - started
    held = session.labels.nbytes()
    square_seconds = _square_seconds(secret, public) if square else 0.0
    out = {"layout": name, "N": kind.poly_modulus_degree, "parts": layout.parts,
           "bytes_per_row": held / X.shape[0], "upload_s": upload, "levels": []}
    for level in range(args.levels):
        plans, leaf_jobs = [], []
        for t in range(len(session.trees)):
            tree_plans, rule_leaves = session.growth.plan_tree(t)
            plans.extend(tree_plans)
            leaf_jobs.extend((t, node) for node in rule_leaves)
        if not plans:
            break
        started = time.perf_counter()
        _, blobs, positions = compute_level(session, leaf_jobs, plans, 0, n_jobs=1)
        seconds = time.perf_counter() - started
        if square:  # the previous layout's server squared every query ciphertext
            seconds += len(blobs) * square_seconds
        row = {"level": level, "nodes": len(plans), "seconds": seconds,
               "ciphertexts": len(blobs),
               "candidates": sum(p.n_candidates for p in plans)}
        if level == 0 and kind.name == "bfv" and not square:
            row.update(_check_root(secret, layout, session, plans, blobs, positions, y))
        out["levels"].append(row)
        print(f"  {name} level {level}: {len(plans)} nodes, {row['candidates']} candidates, "
              f"{seconds:.1f} s, {len(blobs)} query ciphertexts"
              + (f", noise budget >= {row['budget']} bits, totals exact: {row['exact']}"
                 if "budget" in row else ""), flush=True)
        # The first feature's middle candidate: balanced children, as Gini splits tend to.
        session.growth.apply_level(plans, [len(p.candidates[0]) // 2 for p in plans])
    out["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return out


def _square_seconds(secret, public, repeats: int = 5) -> float:
    """Seconds of one square + relinearisation of a first-level ciphertext (the previous
    layout's server did one per query ciphertext before switching it down)."""
    evaluator = seal.Evaluator(public.context)
    relin = public.context.from_relin_str(unpack_bundle(secret.public_bytes())["relin_keys"])
    ct = secret.encrypt_vector(np.ones(8, dtype=np.int64))
    started = time.perf_counter()
    for _ in range(repeats):
        evaluator.relinearize_inplace(evaluator.square(ct), relin)
    return (time.perf_counter() - started) / repeats


def _check_root(secret, layout, session, plans, blobs, positions, y) -> dict:
    """The root queries' noise budget and their node totals against the bootstrap counts."""
    budget = min(secret.noise_budget(secret.load_ciphertext(b)) for b in blobs)
    per_ct = layout.blocks_per_ciphertext
    exact, block = True, 0
    for plan in plans:
        block += plan.n_candidates  # the node total follows its candidates
        ct, place = divmod(positions[block], per_ct)
        slots = secret.decrypt(secret.load_ciphertext(blobs[ct]))
        total = np.mod(layout.block_values(slots)[place], secret.plain_modulus)
        weights = session.growth.weights(plan.tree)
        expected = np.bincount(y, weights=weights, minlength=layout.tau)
        exact &= bool(np.array_equal(total, expected))
        block += 1
    return {"budget": budget, "exact": exact}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=30_000,
                        help="rows of make_classification (25 %% held out; default 30000)")
    parser.add_argument("--trees", type=int, default=4)
    parser.add_argument("--levels", type=int, default=3)
    parser.add_argument("--max-bins", type=int, default=32)
    parser.add_argument("--min-samples-split", type=int, default=100)
    parser.add_argument("--layouts", default="previous,bfv-P1,bfv-P2,bfv-P4,ckks-P1,ckks-P4")
    args = parser.parse_args(argv)
    names = args.layouts.split(",")
    unknown = [n for n in names if n not in LAYOUTS]
    if unknown:
        parser.error(f"unknown layouts {unknown}; choose from {sorted(LAYOUTS)}")
    print(machine_line(), flush=True)
    X, y = _data(args.rows, 0)
    print(f"{X.shape[0]} training rows, {args.trees} trees, {args.levels} levels, "
          f"max_bins={args.max_bins}", flush=True)
    # One process per layout: SEAL's memory pool keeps what a layout allocated, and the
    # previous layout alone holds ~12 GB at 22,500 rows.
    results = []
    context = multiprocessing.get_context("spawn")
    for name in names:
        with context.Pool(1) as pool:
            results.append(pool.apply(run_layout, (name, X, y, args)))
    base = results[0]
    print()
    print("| layout | N | parts | bytes held per row | × first | peak RSS GB | upload s | "
          + " | ".join(f"level {k} s" for k in range(args.levels)) + " | level s × first |")
    print("|---|---:|---:|---:|---:|---:|---:|" + "---:|" * args.levels + "---:|")
    for r in results:
        total = sum(level["seconds"] for level in r["levels"])
        base_total = sum(level["seconds"] for level in base["levels"])
        print(f"| {r['layout']} | {r['N']} | {r['parts']} | {r['bytes_per_row']:,.0f} | "
              f"{r['bytes_per_row'] / base['bytes_per_row']:.2f} | {r['peak_rss_gb']:.2f} | "
              f"{r['upload_s']:.1f} | "
              + " | ".join(f"{level['seconds']:.1f}" for level in r["levels"])
              + f" | {total / base_total:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
