"""Encrypted random forest (GIPE features + CKKS/BFV labels) end to end: time, bytes, accuracy.

For each dataset: a plaintext RandomForestClassifier, the same forest on the GIPE ciphers with
clear labels, and the client–server protocol (embedded server) with the same random_state.
Prints server and client seconds per tree, bytes per round, rounds, accuracy, agreement with
the GIPE forest, and where the server's time goes (profile of the SEAL calls).

Usage::

    python benchmarks/private_forest.py                         # breast cancer, 100 trees
    python benchmarks/private_forest.py --datasets breast_cancer,pendigits --trees 100
    python benchmarks/private_forest.py --datasets pendigits --trees 10 --markdown out.md

pendigits is ../shared/data/dataset_32_pendigits.csv (10 992 × 16, 10 classes, 25 % held out).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from cipherforest.ensemble import RandomForestClassifier
from cipherforest.privacy import PrivateForestClient, PrivateForestServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gipe import machine_line  # noqa: E402

PENDIGITS = Path(__file__).resolve().parents[2] / "shared" / "data" / "dataset_32_pendigits.csv"

# SEAL entry points (as cProfile names them) → what they do in the protocol.
_OPERATIONS = {
    "add_inplace": "ciphertext additions (running sums)",
    "multiply_plain": "mask multiplications (packing)",
    "encode": "mask encoding",
    "square": "square",
    "relinearize_inplace": "relinearise",
    "rescale_to_next_inplace": "rescale",
    "mod_switch_to_inplace": "mod switch",
    "mod_switch_to_next_inplace": "mod switch",
    "transform_to_ntt_inplace": "NTT transforms",
    "transform_from_ntt_inplace": "NTT transforms",
    "load_bytes": "ciphertext loading (validated)",
    "to_string": "ciphertext serialising",
    "openssl_sha256": "message digests",
}


def load(name: str):
    if name == "breast_cancer":
        X, y = load_breast_cancer(return_X_y=True)
    elif name == "pendigits":
        if not PENDIGITS.exists():
            raise FileNotFoundError(f"{PENDIGITS} not found (shared data folder missing)")
        data = np.loadtxt(PENDIGITS, delimiter=",")
        X, y = data[:, :-1], data[:, -1].astype(int)
    else:
        raise ValueError(f"unknown dataset {name!r}")
    return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)


class _ProfiledServer:
    """The embedded server with every ``handle`` call profiled (server side only)."""

    def __init__(self, n_jobs: int):
        self.inner = PrivateForestServer(n_jobs=n_jobs)
        self.profile = cProfile.Profile()

    def handle(self, data: bytes) -> bytes:
        self.profile.enable()
        try:
            return self.inner.handle(data)
        finally:
            self.profile.disable()


def time_breakdown(profile: cProfile.Profile) -> dict[str, float]:
    """Seconds per protocol operation (SEAL calls by name), plus everything else."""
    stats = pstats.Stats(profile)
    total = stats.total_tt
    out: dict[str, float] = {}
    for (_, _, name), (_, _, tottime, _, _) in stats.stats.items():
        # Built-ins appear as "<built-in method seal.add_inplace>" or
        # "<built-in method _hashlib.openssl_sha256>".
        key = name.rstrip(">").rsplit(".", 1)[-1] if name.startswith("<built-in") else None
        label = _OPERATIONS.get(key)
        if label is not None:
            out[label] = out.get(label, 0.0) + tottime
    out["planning, Python and numpy"] = total - sum(out.values())
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def run(name: str, n_trees: int, scheme: str, n_jobs: int, max_bins: int | None,
        max_round_bytes: int | None) -> dict:
    X_train, X_test, y_train, y_test = load(name)
    plain = RandomForestClassifier(n_trees, random_state=0, max_bins=max_bins, n_jobs=-1)
    plain.fit(X_train, y_train)
    server = _ProfiledServer(n_jobs)
    client = PrivateForestClient(n_trees, random_state=0, scheme=scheme, max_bins=max_bins,
                                 max_round_bytes=max_round_bytes, server=server)
    started = time.perf_counter()
    client.fit(X_train, y_train)
    fit_wall = time.perf_counter() - started
    started = time.perf_counter()
    private_pred = client.predict(X_test)
    predict_wall = time.perf_counter() - started
    cipher_forest = RandomForestClassifier(n_trees, random_state=0, max_bins=max_bins,
                                           n_jobs=-1)
    cipher_forest.fit(client.encryptor_.transform(X_train).astype(np.float64), y_train)
    cipher_pred = cipher_forest.predict(client.encryptor_.transform(X_test).astype(np.float64))
    fit = client.fit_stats_
    session = server.inner.session_stats(client.session_)
    return {
        "dataset": name, "shape": X_train.shape, "trees": n_trees, "scheme": scheme,
        "jobs": n_jobs, "max_bins": max_bins, "max_round_bytes": max_round_bytes,
        "acc_plain": float((plain.predict(X_test) == y_test).mean()),
        "acc_gipe": float((cipher_pred == y_test).mean()),
        "acc_private": float((private_pred == y_test).mean()),
        "agreement": float((private_pred == cipher_pred).mean()),
        "fit_wall": fit_wall, "predict_wall": predict_wall,
        "server_s_per_tree": fit.server_seconds / n_trees,
        "client_s_per_tree": fit.client_seconds / n_trees,
        "client_share": fit.client_seconds / fit.server_seconds,
        "rounds": fit.rounds, "upload_mb": fit.bytes_sent / 1e6,
        "max_round_mb": max(fit.bytes_per_round) / 1e6,
        "mean_round_mb": float(np.mean(fit.bytes_per_round)) / 1e6,
        "candidates": session.candidates, "query_ciphertexts": session.query_ciphertexts,
        "predict_mb": client.predict_stats_.bytes_received / 1e6,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
        "breakdown": time_breakdown(server.profile),
    }


def render(results: list[dict]) -> str:
    lines = [machine_line(), "",
             "| dataset | trees | scheme | fit wall s | server s/tree | client s/tree | "
             "client/server | rounds | max MB/round | mean MB/round | upload MB | "
             "acc plain | acc GIPE | acc GIPE+HE | equal to GIPE RF |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        cap = r["max_round_bytes"]
        lines.append(
            f"| {r['dataset']} {r['shape'][0]}×{r['shape'][1]} | {r['trees']} | {r['scheme']}"
            f"{'' if r['max_bins'] is None else ', max_bins=' + str(r['max_bins'])}"
            f"{'' if cap is None else f', cap {cap / 1e6:g} MB'} | "
            f"{r['fit_wall']:.1f} | {r['server_s_per_tree']:.2f} | "
            f"{r['client_s_per_tree']:.3f} | {100 * r['client_share']:.1f} % | {r['rounds']} | "
            f"{r['max_round_mb']:.2f} | {r['mean_round_mb']:.2f} | {r['upload_mb']:.0f} | "
            f"{r['acc_plain']:.4f} | {r['acc_gipe']:.4f} | {r['acc_private']:.4f} | "
            f"{100 * r['agreement']:.1f} % |")
    for r in results:
        total = sum(r["breakdown"].values())
        lines += ["", f"Server time of {r['dataset']} ({r['trees']} trees, {r['jobs']} "
                  f"process(es); profile of the parent process: with workers, their SEAL "
                  f"calls show up as waiting):", "", "| operation | seconds | share |",
                  "|---|---:|---:|"]
        for label, seconds in r["breakdown"].items():
            lines.append(f"| {label} | {seconds:.1f} | {100 * seconds / total:.0f} % |")
        lines.append(f"\nPeak RSS {r['peak_rss_gb']:.1f} GB; {r['candidates']} candidates in "
                     f"{r['query_ciphertexts']} query ciphertexts; predictions "
                     f"{r['predict_mb']:.2f} MB in {r['predict_wall']:.1f} s.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="breast_cancer")
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--scheme", choices=("ckks", "bfv"), default="ckks")
    parser.add_argument("--jobs", type=int, default=1,
                        help="server worker processes (profiles are exact only with 1)")
    parser.add_argument("--max-bins", type=int, default=None)
    parser.add_argument("--max-round-mb", type=float, default=None,
                        help="cap on each query's size (PrivateForestClient.max_round_bytes)")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    # Compile the numba kernels (GIPE, trees) outside the timings.
    X, y = load_breast_cancer(return_X_y=True)
    PrivateForestClient(1, random_state=0, max_depth=2).fit(X[:60], y[:60])
    results = []
    for name in args.datasets.split(","):
        cap = None if args.max_round_mb is None else int(args.max_round_mb * 1e6)
        results.append(run(name, args.trees, args.scheme, args.jobs, args.max_bins, cap))
        print(render(results[-1:]), flush=True)
    text = render(results)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
