"""Encrypted random forest (GIPE features + CKKS/BFV labels) end to end: time, bytes, accuracy.

For each dataset: a plaintext RandomForestClassifier, the same forest on the GIPE ciphers with
clear labels, and the client–server protocol (embedded server) with the same random_state.
Prints server and client seconds per tree, bytes per round, rounds, accuracy, agreement with
the GIPE forest, and where the server's time goes (profile of the SEAL calls); then the costs
of issue #11 (upload bytes per training row, peak memory of all processes, prediction bytes
per (test row, tree), time) side by side with the figures measured before packed labels and
the packed leaf store, where the issue gives them.

Peak memory is sampled every 0.2 s as the sum of the proportional set size (PSS, from
/proc/PID/smaps_rollup) of this process and all its children: a page shared by forked workers
counts once, as it is held once.

Usage::

    python benchmarks/private_forest.py                         # breast cancer, 100 trees, rr
    python benchmarks/private_forest.py --datasets breast_cancer,pendigits --trees 100
    python benchmarks/private_forest.py --datasets pendigits --trees 10 --markdown out.md
    python benchmarks/private_forest.py --datasets pendigits --trees 10 --train-rows 3000 \
        --test-rows 1000 --split-selection gini                 # issue #11's setting

    python benchmarks/private_forest.py --datasets synthetic30000 --trees 100 --max-bins 32 \
        --min-samples-split 100 --split-selection blind     # issue #11's 30,000-row run

pendigits is ../shared/data/dataset_32_pendigits.csv (10 992 × 16, 10 classes, 25 % held out);
syntheticN is make_classification(n_samples=N, n_features=20, n_informative=10,
random_state=0), 25 % held out.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import sys
import threading
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.model_selection import train_test_split

from cipherforest.ensemble import RandomForestClassifier
from cipherforest.privacy import PrivateForestClient, PrivateForestServer
from cipherforest.privacy.protocol.params import DEFAULT_SPLIT_SELECTION, SPLIT_SELECTIONS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gipe import machine_line, temporary_privacy_ledger  # noqa: E402

# ../shared/data from the repository (a worktree sits one level deeper than the main checkout).
PENDIGITS = next((p / "shared" / "data" / "dataset_32_pendigits.csv"
                  for p in Path(__file__).resolve().parents[1:4]
                  if (p / "shared" / "data" / "dataset_32_pendigits.csv").exists()),
                 Path(__file__).resolve().parents[2] / "shared" / "data"
                 / "dataset_32_pendigits.csv")

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
    "rotate_vector": "rotations (label lanes on upload, lane changes)",
    "rotate_rows": "rotations (label lanes on upload, lane changes)",
    "rotate_rows_inplace": "rotations (label lanes on upload, lane changes)",
}


# Issue #11's figures, measured on main before packed labels and the packed leaf store:
# (dataset, training rows, trees) -> upload bytes per row, peak RSS GB (parent ru_maxrss),
# prediction bytes per (test row, tree), fit seconds.
BEFORE = {
    ("breast_cancer", 426, 5): {"upload_b_per_row": 226e6 / 569, "peak_gb": 1.4},
    ("pendigits", 3000, 10): {"upload_b_per_row": 394e3, "peak_gb": 2.75,
                              "predict_b_per_pair": 341, "fit_s": 147},
    ("pendigits", 8244, 100): {"upload_b_per_row": 3.2e9 / 8244, "peak_gb": 16.0,
                               "fit_s": 24 * 60},
}


class MemorySampler:
    """Peak of the summed PSS of this process and its descendants, sampled in a thread."""

    def __init__(self, interval: float = 0.2, report_every: float | None = None):
        self.interval = interval
        self.report_every = report_every  # seconds between progress lines (None: silent)
        self._last_report = 0.0
        self.peak = 0
        self.peak_at = 0.0  # seconds after the sampler started
        self.phase = "start"  # set by the caller; the phase of the peak is kept
        self.peak_phase = "start"
        self.peak_parts: list[int] = []  # PSS per process at the peak, this process first
        self._started = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _pss(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    @staticmethod
    def _descendants(pid: int) -> list[int]:
        """``pid`` and its descendants, children of any thread (an HTTP server forks its
        level workers from a request thread)."""
        out, todo = [], [pid]
        while todo:
            current = todo.pop()
            out.append(current)
            for task in Path(f"/proc/{current}/task").glob("*"):
                try:
                    todo.extend(int(c) for c in (task / "children").read_text().split())
                except OSError:
                    pass
        return out

    def sample_parts(self) -> list[int]:
        """PSS of this process, then of each descendant."""
        return [self._pss(pid) for pid in self._descendants(os.getpid())]

    def sample(self) -> int:
        return sum(self.sample_parts())

    def _run(self) -> None:
        while not self._stop.is_set():
            parts = self.sample_parts()
            value = sum(parts)
            if value > self.peak:
                self.peak, self.peak_phase = value, self.phase
                self.peak_at = time.perf_counter() - self._started
                self.peak_parts = parts
            now = time.perf_counter() - self._started
            if self.report_every is not None and now - self._last_report >= self.report_every:
                self._last_report = now
                print(f"[memory] {now:.0f} s: {value / 1e9:.2f} GB now, peak "
                      f"{self.peak / 1e9:.2f} GB ({self.peak_phase}, {self.peak_at:.0f} s in)",
                      file=sys.stderr, flush=True)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.sample())


def load(name: str, train_rows: int | None = None, test_rows: int | None = None):
    if name == "breast_cancer":
        X, y = load_breast_cancer(return_X_y=True)
    elif name.startswith("synthetic"):  # issue #11's run: synthetic30000 and the like
        n_rows = int(name[len("synthetic"):])
        X, y = make_classification(n_samples=n_rows, n_features=20, n_informative=10,
                                   random_state=0)
    elif name == "pendigits":
        if not PENDIGITS.exists():
            raise FileNotFoundError(f"{PENDIGITS} not found (shared data folder missing)")
        data = np.loadtxt(PENDIGITS, delimiter=",")
        X, y = data[:, :-1], data[:, -1].astype(int)
    else:
        raise ValueError(f"unknown dataset {name!r}")
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0,
                                                        stratify=y)
    if train_rows is not None and train_rows < X_train.shape[0]:
        X_train, _, y_train, _ = train_test_split(X_train, y_train, train_size=train_rows,
                                                  random_state=0, stratify=y_train)
    if test_rows is not None and test_rows < X_test.shape[0]:
        X_test, _, y_test, _ = train_test_split(X_test, y_test, train_size=test_rows,
                                                random_state=0, stratify=y_test)
    return X_train, X_test, y_train, y_test


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
        max_round_bytes: int | None, train_rows: int | None = None,
        test_rows: int | None = None, verbose: int = 0,
        split_selection: str = DEFAULT_SPLIT_SELECTION,
        label_epsilon: float | None = None, min_samples_split: int = 2,
        memory_report: float | None = None) -> dict:
    X_train, X_test, y_train, y_test = load(name, train_rows, test_rows)
    plain = RandomForestClassifier(n_trees, random_state=0, max_bins=max_bins, n_jobs=-1,
                                   min_samples_split=min_samples_split)
    plain.fit(X_train, y_train)
    server = _ProfiledServer(n_jobs)
    client = PrivateForestClient(n_trees, random_state=0, scheme=scheme, max_bins=max_bins,
                                 max_round_bytes=max_round_bytes, server=server,
                                 verbose=verbose, split_selection=split_selection,
                                 label_epsilon=label_epsilon,
                                 min_samples_split=min_samples_split)
    with MemorySampler(report_every=memory_report) as memory:
        memory.phase = "fit"
        started = time.perf_counter()
        client.fit(X_train, y_train)
        fit_wall = time.perf_counter() - started
        fit_peak = memory.peak
        memory.phase = "predict"
        started = time.perf_counter()
        private_pred = client.predict(X_test)
        predict_wall = time.perf_counter() - started
        proba_sums, reply = client.predict_proba(X_test), client.predict_stats_.reply
        sums_stats = client.predict_stats_
        # The exact reply (leaf-store ciphertexts + positions) side by side.
        client.set_params(prediction_reply="leaves")
        started = time.perf_counter()
        leaves_pred = client.predict(X_test)
        leaves_wall = time.perf_counter() - started
        proba_leaves = client.predict_proba(X_test)
        leaves_stats = client.predict_stats_
    cipher_forest = RandomForestClassifier(n_trees, random_state=0, max_bins=max_bins,
                                           n_jobs=-1, min_samples_split=min_samples_split)
    cipher_forest.fit(client.encryptor_.transform(X_train).astype(np.float64), y_train)
    cipher_pred = cipher_forest.predict(client.encryptor_.transform(X_test).astype(np.float64))
    fit = client.fit_stats_
    session = server.inner.session_stats(client.session_)
    return {
        "dataset": name, "shape": X_train.shape, "trees": n_trees, "scheme": scheme,
        "jobs": n_jobs, "max_bins": max_bins, "max_round_bytes": max_round_bytes,
        "split_selection": split_selection + ("" if label_epsilon is None
                                              else f" ε={label_epsilon:g}"),
        "min_samples_split": min_samples_split,
        "acc_plain": float((plain.predict(X_test) == y_test).mean()),
        "acc_gipe": float((cipher_pred == y_test).mean()),
        "acc_private": float((private_pred == y_test).mean()),
        "agreement": float((private_pred == cipher_pred).mean()),
        "fit_wall": fit_wall, "predict_wall": predict_wall,
        "server_s_per_tree": fit.server_seconds / n_trees,
        "client_s_per_tree": fit.client_seconds / n_trees,
        "client_share": fit.client_seconds / fit.server_seconds,
        "rounds": fit.rounds, "upload_mb": fit.bytes_sent / 1e6,
        # Label-blind training has no round.
        "max_round_mb": max(fit.bytes_per_round, default=0) / 1e6,
        "mean_round_mb": (float(np.mean(fit.bytes_per_round)) / 1e6 if fit.bytes_per_round
                          else 0.0),
        "candidates": session.candidates, "query_ciphertexts": session.query_ciphertexts,
        "reply": reply,
        "predict_mb": sums_stats.bytes_received / 1e6,
        "predict_b_per_pair": sums_stats.bytes_received / (X_test.shape[0] * n_trees),
        "leaves_predict_wall": leaves_wall,
        "leaves_b_per_pair": leaves_stats.bytes_received / (X_test.shape[0] * n_trees),
        "sums_max_error": float(np.abs(proba_sums - proba_leaves).max()),
        "sums_equal_leaves": float((private_pred == leaves_pred).mean()),
        "test_rows": X_test.shape[0],
        "upload_b_per_row": fit.bytes_sent / X_train.shape[0],
        "peak_pss_gb": memory.peak / 1e9,
        "fit_peak_pss_gb": fit_peak / 1e9,
        "peak_phase": (f"{memory.peak_phase}, {memory.peak_at:.0f} s in; parent "
                       f"{memory.peak_parts[0] / 1e9:.2f} GB + "
                       f"{len(memory.peak_parts) - 1} other process(es) "
                       f"{sum(memory.peak_parts[1:]) / 1e9:.2f} GB"),
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
            f", {r['split_selection']}"
            f"{'' if r['min_samples_split'] == 2 else ', α=' + str(r['min_samples_split'])}"
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
        lines.append(f"\nPeak PSS of all processes {r['peak_pss_gb']:.2f} GB ({r['peak_phase']}; "
                     f"fit alone {r['fit_peak_pss_gb']:.2f} GB); peak RSS of the parent "
                     f"{r['peak_rss_gb']:.1f} GB; {r['candidates']} "
                     f"candidates in {r['query_ciphertexts']} query ciphertexts; predictions "
                     f"({r['reply']}) {r['predict_mb']:.2f} MB in {r['predict_wall']:.1f} s; "
                     f"leaf replies {r['leaves_b_per_pair']:.0f} B per (row, tree) in "
                     f"{r['leaves_predict_wall']:.1f} s; row sums vs leaf replies: max "
                     f"|Δ proba| {r['sums_max_error']:.1e}, equal predictions "
                     f"{100 * r['sums_equal_leaves']:.1f} %.")
    lines += ["", "Issue #11 costs, before (the issue's figures) → now:", "",
              "| run | upload B/row | peak memory GB (now: PSS of all processes) | "
              "predict B per (test row, tree) | fit s | acc GIPE+HE | equal to GIPE RF |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        before = BEFORE.get((r["dataset"], r["shape"][0], r["trees"]), {})

        def pair(key, now, fmt, before=before):
            old = before.get(key)
            return fmt.format(now) if old is None else f"{fmt.format(old)} → {fmt.format(now)}"
        lines.append(
            f"| {r['dataset']} {r['shape'][0]} rows, {r['trees']} trees, {r['scheme']}, "
            f"{r['jobs']} proc, {r['test_rows']} test rows | "
            f"{pair('upload_b_per_row', r['upload_b_per_row'], '{:,.0f}')} | "
            f"{pair('peak_gb', r['peak_pss_gb'], '{:.2f}')} | "
            f"{pair('predict_b_per_pair', r['predict_b_per_pair'], '{:.0f}')} | "
            f"{pair('fit_s', r['fit_wall'], '{:.0f}')} | {r['acc_private']:.4f} | "
            f"{100 * r['agreement']:.1f} % |")
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
    parser.add_argument("--train-rows", type=int, default=None,
                        help="stratified subsample of the training split")
    parser.add_argument("--test-rows", type=int, default=None,
                        help="stratified subsample of the test split")
    parser.add_argument("--verbose", type=int, default=0)
    parser.add_argument("--split-selection", choices=SPLIT_SELECTIONS,
                        default=DEFAULT_SPLIT_SELECTION,
                        help="how splits are chosen (default: the estimator's, "
                             f"{DEFAULT_SPLIT_SELECTION!r})")
    parser.add_argument("--label-epsilon", type=float, default=None)
    parser.add_argument("--min-samples-split", type=int, default=2,
                        help="the paper's α (10 below 20,000 rows, else 100)")
    parser.add_argument("--memory-report", type=float, default=None, metavar="SECONDS",
                        help="print the summed PSS and its peak so far every SECONDS to "
                             "stderr (for long runs that may be stopped early)")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    temporary_privacy_ledger("private_forest")
    # Compile the numba kernels (GIPE, trees) outside the timings.
    X, y = load_breast_cancer(return_X_y=True)
    PrivateForestClient(1, random_state=0, max_depth=2).fit(X[:60], y[:60])
    results = []
    for name in args.datasets.split(","):
        cap = None if args.max_round_mb is None else int(args.max_round_mb * 1e6)
        results.append(run(name, args.trees, args.scheme, args.jobs, args.max_bins, cap,
                           args.train_rows, args.test_rows, args.verbose,
                           args.split_selection, args.label_epsilon,
                           args.min_samples_split, args.memory_report))
        print(render(results[-1:]), flush=True)
    text = render(results)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
