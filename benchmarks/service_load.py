"""Load test of ``cipherforest serve``: 1, 5 and 20 concurrent clients train small forests.

For each client count, starts the server as a subprocess on a free loopback port with a
temporary data directory, then runs that many client processes at once; each trains
``PrivateForestClient`` over HTTP on its own split of breast cancer (different
``random_state``), then predicts its test rows. A client is correct when its predictions
equal those of a plaintext ``RandomForestClassifier`` trained with the same parameters on the
same GIPE ciphers (:func:`forest_oracle`: grown on the labels the server saw — the
randomized-response labels under the default ``split_selection="rr"``, the true labels under
``"gini"`` — with leaf frequencies from the true labels; what the protocol must reproduce).

Reports, per client count: wall time, requests per second and trees per second over all
clients, latency percentiles (p50, p90, p99, max) of every HTTP request and of each kind
(upload chunk, commit, training round, prediction; a round is the server's encrypted work
for one level of one client's forest, plus persistence and queueing behind the others),
and the server's peak resident memory (VmHWM). Prints the machine's load average with
each run: the machine may be shared.

    python benchmarks/service_load.py [--clients 1 5 20] [--rows 120] [--trees 4] [--depth 4]
                                      [--split-selection rr|gini]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from cipherforest.privacy.protocol import HTTPTransport, decode_message

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gipe import temporary_privacy_ledger  # noqa: E402

KEY = "service-load-benchmark"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def checkout_env(key: str) -> dict[str, str]:
    """The environment of a ``cipherforest`` subprocess: the server's access key, and this
    checkout's sources first on the path (when run from a checkout)."""
    env = {**os.environ, "CIPHERFOREST_SERVER_KEY": key}
    src = Path(__file__).resolve().parents[1] / "src"
    if src.exists():
        env["PYTHONPATH"] = os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])
    return env


def start_server(data_dir, key: str, *options: str, stdout=subprocess.DEVNULL, stderr=None,
                 wait: float = 120.0) -> tuple[subprocess.Popen, str]:
    """``cipherforest serve --data-dir DATA_DIR OPTIONS`` on a free loopback port with access
    key ``key``; returns the process and its URL once ``/healthz`` answers."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "cipherforest.cli", "serve", "--port",
                               str(port), "--data-dir", str(data_dir), *options],
                              env=checkout_env(key), stdout=stdout, stderr=stderr)
    deadline = time.monotonic() + wait
    while True:
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1).close()
            return server, url
        except OSError:
            if server.poll() is not None:
                raise RuntimeError(f"the server exited with code {server.returncode}") from None
            if time.monotonic() > deadline:
                server.kill()
                server.wait()
                raise RuntimeError(f"the server did not start within {wait:.0f} s") from None
            time.sleep(0.2)


def peak_memory_mb(pid: int) -> float:
    """Peak resident memory (VmHWM) of ``pid`` plus that of its descendants (the server
    process under its supervisor, level workers): an upper bound of the server's peak."""
    return tree_memory_mb(pid, "VmHWM")


def tree_memory_mb(pid: int, field: str) -> float:
    """``field`` of /proc/PID/status (VmRSS, VmHWM) summed over ``pid`` and its
    descendants, MB (pages they share are counted in each)."""
    total = 0.0
    for process in [pid, *descendants(pid)]:
        try:
            with open(f"/proc/{process}/status") as file:
                for line in file:
                    if line.startswith(field + ":"):
                        total += int(line.split()[1]) / 1024
        except OSError:  # it ended meanwhile
            pass
    return total


def descendants(pid: int) -> list[int]:
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as file:
                found += [int(child) for child in file.read().split()]
    except OSError:
        return found
    return found + [grandchild for child in found for grandchild in descendants(child)]


class LabelRecordingTransport(HTTPTransport):
    """An HTTP transport that keeps the labels the server grows the trees on: the
    randomized-response labels of the setup message (``split_selection="rr"``), else
    None (the server's choices come from the true labels)."""

    grown_labels = None

    def handle(self, data: bytes) -> bytes:
        message = decode_message(data)
        if message.kind == "setup":
            self.grown_labels = message.arrays.get("y_rr")
        return super().handle(data)


def forest_oracle(client, X_train, y_train, X_test, params: dict, grown_labels=None):
    """The predictions the encrypted protocol must reproduce: ``RandomForestClassifier``
    with ``params`` grown on the client's GIPE ciphers and ``grown_labels`` (the
    randomized-response labels the server saw; None: the true labels), each leaf's class
    frequencies counted from the true labels of its bootstrap rows (as the server's leaf
    store holds them). With the true labels this is the forest's own ``predict``."""
    from cipherforest.ensemble import RandomForestClassifier

    codes = client.classes_.searchsorted(y_train)
    C = np.asarray(client.encryptor_.transform(X_train), dtype=np.float64)
    C_test = np.asarray(client.encryptor_.transform(X_test), dtype=np.float64)
    forest = RandomForestClassifier(**params).fit(C, codes if grown_labels is None
                                                  else grown_labels)
    proba = np.zeros((C_test.shape[0], len(client.classes_)))
    for tree, rows in zip(forest.estimators_, forest.estimators_samples_, strict=True):
        counts = np.zeros((tree.tree_.node_count, len(client.classes_)))
        np.add.at(counts, (tree.apply(C[rows]), codes[rows]), 1.0)
        leaves = tree.apply(C_test)
        proba += counts[leaves] / counts[leaves].sum(axis=1, keepdims=True)
    return client.classes_[np.argmax(proba, axis=1)]


def run_client(url: str, seed: int, rows: int, trees: int, depth: int,
               split_selection: str = "rr") -> dict:
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    from cipherforest.privacy import PrivateForestClient

    class TimedTransport(LabelRecordingTransport):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.times: dict[str, list[float]] = {}

        def _request(self, method, endpoint, *args, **kwargs):
            started = time.perf_counter()
            try:
                return super()._request(method, endpoint, *args, **kwargs)
            finally:
                self.times.setdefault(request_kind(method, endpoint), []).append(
                    time.perf_counter() - started)

    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, _ = train_test_split(X, y, train_size=rows, test_size=100,
                                                   random_state=seed, stratify=y)
    transport = TimedTransport(url, KEY, timeout=300)
    params = {"n_estimators": trees, "max_depth": depth, "random_state": seed}
    started = time.perf_counter()
    client = PrivateForestClient(server=transport, split_selection=split_selection,
                                 **params).fit(X_train, y_train)
    fit_seconds = time.perf_counter() - started
    predicted = client.predict(X_test)
    expected = forest_oracle(client, X_train, y_train, X_test, params, transport.grown_labels)
    return {"fit_seconds": fit_seconds, "total_seconds": time.perf_counter() - started,
            "rounds": client.fit_stats_.rounds, "times": transport.times,
            "correct": bool(np.array_equal(predicted, expected))}


def request_kind(method: str, endpoint: str | None) -> str:
    """The kind of an HTTP request of the transport: open, chunk, commit, upload status,
    round, current round, predict, status or delete."""
    if endpoint is None:
        return "open"
    if "/chunks/" in endpoint:
        return "chunk"
    if endpoint.endswith("/commit"):
        return "commit"
    if endpoint.startswith("uploads/"):
        return "upload status"
    if endpoint == "rounds":
        return "round"
    return {"rounds/current": "current round", "predict": "predict"}.get(
        endpoint, "delete" if method == "DELETE" else "status")


def run(n_clients: int, rows: int, trees: int, depth: int, split_selection: str) -> dict:
    """One server, ``n_clients`` clients at once; their results and the server's memory."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as data_dir:
        server, url = start_server(data_dir, KEY, stderr=subprocess.DEVNULL)
        try:
            idle_mb = peak_memory_mb(server.pid)
            started = time.perf_counter()
            context = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(n_clients, mp_context=context) as pool:
                futures = [pool.submit(run_client, url, seed, rows, trees, depth,
                                       split_selection)
                           for seed in range(n_clients)]
                results = [f.result() for f in futures]
            wall = time.perf_counter() - started
            peak_mb = peak_memory_mb(server.pid)
        finally:
            server.terminate()
            server.wait(30)
    times: dict[str, list[float]] = {}
    for result in results:
        for kind, values in result["times"].items():
            times.setdefault(kind, []).extend(values)
    return {"clients": n_clients, "wall": wall, "results": results, "times": times,
            "idle_mb": idle_mb, "peak_mb": peak_mb, "load": load,
            "load_after": os.getloadavg()[0]}


def _percentiles(values) -> str:
    values = np.asarray(values)
    return " ".join(f"{np.percentile(values, q):>7.2f}" for q in (50, 90, 99)) + (
        f" {values.max():>7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 5, 20],
                        help="client counts to run, one server each (default 1 5 20)")
    parser.add_argument("--rows", type=int, default=120)
    parser.add_argument("--trees", type=int, default=4)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--split-selection", default="rr", choices=("rr", "gini"),
                        help="the clients' split selection (default rr, the client's default: "
                        "no rounds; gini: a round per level)")
    args = parser.parse_args()
    temporary_privacy_ledger("service_load")

    print(f"clients each train {args.trees} trees of depth <= {args.depth} on {args.rows} "
          f"breast-cancer rows (CKKS, split_selection={args.split_selection!r}) and predict "
          "100, one server on loopback")
    print(f"machine: {os.cpu_count()} cores, shared with other work (load average shown: "
          "numbers are noisy)\n")
    runs = [run(n, args.rows, args.trees, args.depth, args.split_selection)
            for n in args.clients]
    print(f"{'clients':>7} {'load':>9} {'wall s':>7} {'requests':>8} {'req/s':>6} "
          f"{'trees/s':>7} {'p50 s':>7} {'p90 s':>7} {'p99 s':>7} {'max s':>7} "
          f"{'peak MB':>8} {'correct':>8}")
    for r in runs:
        everything = [t for values in r["times"].values() for t in values]
        print(f"{r['clients']:>7} {r['load']:>4.1f}-{r['load_after']:<4.1f} {r['wall']:>7.1f} "
              f"{len(everything):>8} {len(everything) / r['wall']:>6.2f} "
              f"{r['clients'] * args.trees / r['wall']:>7.2f} {_percentiles(everything)} "
              f"{r['peak_mb']:>8.0f} "
              f"{sum(x['correct'] for x in r['results']):>4}/{r['clients']:<3}")
    print("\nlatency by request kind (seconds: p50 p90 p99 max, count)")
    kinds = sorted({kind for r in runs for kind in r["times"]})
    for r in runs:
        print(f"  {r['clients']} client{'s' if r['clients'] > 1 else ''}:")
        for kind in kinds:
            values = r["times"].get(kind)
            if values:
                print(f"    {kind:<14} {_percentiles(values)} {len(values):>6}")
    print("\nserver idle RSS after start: " + ", ".join(
        f"{r['idle_mb']:.0f} MB ({r['clients']} clients)" for r in runs))


if __name__ == "__main__":
    main()
