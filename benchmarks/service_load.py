"""Load test of ``cipherforest serve``: concurrent clients train small encrypted forests.

Starts the server as a subprocess on a free loopback port with a temporary data directory,
then runs ``--clients`` client processes at once; each trains ``PrivateForestClient`` over
HTTP on its own split of breast cancer (different ``random_state``), then predicts its test
rows. A client is correct when its predictions equal those of a plaintext
``RandomForestClassifier`` trained with the same parameters on the same GIPE ciphers with clear
labels (what the encrypted protocol must reproduce).

Reports: wall time, throughput (trees and requests per second over all clients), latency of
the training rounds (per HTTP round trip: the server's encrypted work for one level of one
client's forest, plus persistence and queueing behind the other clients), upload time, and
the server's peak resident memory (VmHWM).

    python benchmarks/service_load.py [--clients 8] [--rows 120] [--trees 4] [--depth 4]
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
    with open(f"/proc/{pid}/status") as file:
        for line in file:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_client(url: str, seed: int, rows: int, trees: int, depth: int) -> dict:
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    from cipherforest.ensemble import RandomForestClassifier
    from cipherforest.privacy import PrivateForestClient
    from cipherforest.privacy.protocol import HTTPTransport

    class TimedTransport(HTTPTransport):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.times: dict[str, list[float]] = {}

        def _request(self, method, endpoint, *args, **kwargs):
            started = time.perf_counter()
            try:
                return super()._request(method, endpoint, *args, **kwargs)
            finally:
                what = (endpoint or "session").split("/")[0]
                self.times.setdefault(what, []).append(time.perf_counter() - started)

    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, _ = train_test_split(X, y, train_size=rows, test_size=100,
                                                   random_state=seed, stratify=y)
    transport = TimedTransport(url, KEY, timeout=300)
    params = {"n_estimators": trees, "max_depth": depth, "random_state": seed}
    started = time.perf_counter()
    client = PrivateForestClient(server=transport, **params).fit(X_train, y_train)
    fit_seconds = time.perf_counter() - started
    predicted = client.predict(X_test)
    reference = RandomForestClassifier(**params).fit(
        client.encryptor_.transform(X_train).astype(np.float64), y_train)
    expected = reference.predict(client.encryptor_.transform(X_test).astype(np.float64))
    return {"fit_seconds": fit_seconds, "total_seconds": time.perf_counter() - started,
            "rounds": client.fit_stats_.rounds, "round_latency": transport.times["rounds"],
            "upload_seconds": sum(transport.times.get("uploads", [])),
            "requests": sum(len(v) for v in transport.times.values()),
            "correct": bool(np.array_equal(predicted, expected))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rows", type=int, default=120)
    parser.add_argument("--trees", type=int, default=4)
    parser.add_argument("--depth", type=int, default=4)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as data_dir:
        server, url = start_server(data_dir, KEY)
        try:
            idle_mb = peak_memory_mb(server.pid)
            started = time.perf_counter()
            context = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(args.clients,
                                                        mp_context=context) as pool:
                futures = [pool.submit(run_client, url, seed, args.rows, args.trees,
                                       args.depth) for seed in range(args.clients)]
                results = [f.result() for f in futures]
            wall = time.perf_counter() - started
            peak_mb = peak_memory_mb(server.pid)
        finally:
            server.terminate()
            server.wait(30)

    latencies = np.concatenate([r["round_latency"] for r in results])
    trees = args.clients * args.trees
    requests = sum(r["requests"] for r in results)
    print(f"{args.clients} concurrent clients, each {args.trees} trees of depth <= "
          f"{args.depth} on {args.rows} breast-cancer rows (CKKS), one server on loopback")
    print(f"machine: {os.cpu_count()} cores (shared with other work: numbers are noisy)\n")
    print(f"{'client':>6} {'fit s':>8} {'upload s':>9} {'rounds':>7} {'round p50 s':>12} "
          f"{'round max s':>12} {'correct':>8}")
    for i, r in enumerate(results):
        lat = np.asarray(r["round_latency"])
        print(f"{i:>6} {r['fit_seconds']:>8.1f} {r['upload_seconds']:>9.1f} {r['rounds']:>7} "
              f"{np.median(lat):>12.2f} {lat.max():>12.2f} {str(r['correct']):>8}")
    print(f"\nall correct: {all(r['correct'] for r in results)}")
    print(f"wall time: {wall:.1f} s; throughput {trees / wall:.2f} trees/s, "
          f"{requests / wall:.1f} requests/s ({requests} requests)")
    print(f"round latency over all clients: p50 {np.percentile(latencies, 50):.2f} s, "
          f"p90 {np.percentile(latencies, 90):.2f} s, max {latencies.max():.2f} s "
          f"({latencies.shape[0]} rounds incl. the train request)")
    print(f"server peak RSS (VmHWM): {peak_mb:.0f} MB (idle after start: {idle_mb:.0f} MB)")


if __name__ == "__main__":
    main()
