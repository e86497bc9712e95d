"""Memory of ``cipherforest serve`` under large bodies and many sessions.

Two measurements, each against a server started as a subprocess on a fresh data directory
(``--src DIR`` runs the server from another checkout's ``src``, e.g. an older commit
extracted with ``git archive``, for a side-by-side comparison). "The server's memory" is the
resident memory (VmRSS) of the ``cipherforest serve`` process and its descendants: the
supervisor, the server process it forks, and any level worker (pages the processes share
are counted in each, so the sum errs high):

``bodies``
    A session is set up (130 wine rows); then three clients at once send a body of
    ``--body-mb`` megabytes (default 2048) to the same route, in four rounds: ``/predict``
    with a ``Content-Length``, ``/predict`` chunked (no length), an upload chunk with a
    length, ``/rounds`` chunked. The server's resident memory (sampled every 20 ms)
    is reported before and at its highest during each round, with what each client
    managed to send and the status it got back. Then three new sessions each upload, in
    chunks, a message of the same size whose header is valid but whose digest is wrong
    (the protocol refuses it only after reading all of it), and commit it at once. Last, a
    body that stalls (1 KiB of a declared 64 KiB, within the route's limit): the seconds
    until the server drops it.
``sessions``
    ``--clients`` client processes at once (default 20) each train a ``--trees``-tree forest
    (default 5) on 130 wine rows of their own split and predict the other 48, checked
    against ``RandomForestClassifier`` on the same ciphers (``service_load.forest_oracle``);
    the server's RSS is sampled every second during training and for ``--after`` seconds
    after the last client finished (default 600).

    python benchmarks/service_memory.py bodies [--body-mb 2048] [--src DIR]
    python benchmarks/service_memory.py sessions [--clients 20] [--trees 5] [--after 600]
                                                 [--split-selection rr|gini]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gipe import temporary_privacy_ledger  # noqa: E402
from service_load import (  # noqa: E402
    LabelRecordingTransport,
    forest_oracle,
    free_port,
    tree_memory_mb,
)

KEY = "service-memory-benchmark"


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants (the supervisor, the server process
    and any level worker), MB; shared pages are counted in each process."""
    return tree_memory_mb(pid, "VmRSS")


def anon_mb(pid: int) -> float:
    """Anonymous resident memory (RssAnon: the processes' own pages, not file pages the
    kernel can drop) of ``pid`` and its descendants, MB."""
    return tree_memory_mb(pid, "RssAnon")


class Sampler:
    """Resident memory (all, and anonymous) of a process tree every ``period`` seconds, in
    a thread."""

    def __init__(self, pid: int, period: float):
        self.pid, self.period = pid, period
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), rss_mb(self.pid), anon_mb(self.pid)))
            time.sleep(self.period)

    def peak(self, since: float = 0.0, anon: bool = False) -> float:
        return max((sample[2 if anon else 1] for sample in self.samples if sample[0] >= since),
                   default=float("nan"))

    def stop(self):
        self._stop.set()
        self._thread.join()


def start_server(data_dir: str, src: str | None, *options: str, log: str | None = None):
    """``cipherforest serve`` on a free port (its JSON log lines to the file ``log``)."""
    import subprocess

    port = free_port()
    src = src or str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "CIPHERFOREST_SERVER_KEY": KEY, "PYTHONPATH": src}
    stderr = subprocess.DEVNULL if log is None else open(log, "w")  # noqa: SIM115
    server = subprocess.Popen([sys.executable, "-m", "cipherforest.cli", "serve", "--port",
                               str(port), "--data-dir", data_dir, *options], env=env,
                              stdout=subprocess.DEVNULL, stderr=stderr)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1).close()
            return server, url
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start") from None
            time.sleep(0.2)


def wine_split(seed: int):
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    idx = np.random.RandomState(seed).permutation(X.shape[0])
    return X[idx[:130]], y[idx[:130]], X[idx[130:]]


# ---------------------------------------------------------------------------- bodies
def send_body(url: str, head: str, total: int, chunked: bool) -> dict:
    """Send ``total`` bytes of zeros after ``head`` until done or the server closes; what
    got through, the answer's status (if any) and the seconds taken."""
    host, port = url.split("//")[1].split(":")
    block = b"\0" * (1 << 20)
    sent, status, started = 0, None, time.monotonic()
    with socket.create_connection((host, int(port)), timeout=120) as sock:
        try:
            sock.sendall(head.encode() + b"\r\n\r\n")
            while sent < total:
                part = block[: total - sent]
                sock.sendall(b"%x\r\n" % len(part) + part + b"\r\n" if chunked else part)
                sent += len(part)
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass
        try:
            answer = sock.recv(4096)
            status = int(answer.split()[1]) if answer else None
        except (OSError, IndexError, ValueError):
            status = None
    return {"sent_mb": sent / 2**20, "status": status, "seconds": time.monotonic() - started}


def junk_message_head(total: int) -> bytes:
    """The first bytes of a ``total``-byte message whose header is valid and describes the
    rest (zeros) exactly, but whose digest is wrong: the protocol refuses it only after
    reading all of it."""
    from cipherforest.privacy.protocol import Message, encode_message

    small = encode_message(Message("setup", {}, {"X": np.zeros(1, np.uint8)}, {}))
    magic = small[: small.index(b"\n") + 1]
    for digits in range(1, 12):  # the header's length depends on the size it states
        size = total - len(magic) - 4 - len(_junk_header(10**digits))
        header = _junk_header(size)
        if len(magic) + 4 + len(header) + size == total:
            return magic + len(header).to_bytes(4, "little") + header
    raise ValueError(f"no junk message of {total} bytes")


def _junk_header(size: int) -> bytes:
    return json.dumps({"kind": "setup", "meta": {}, "arrays": [
        {"name": "X", "dtype": "uint8", "shape": [size], "size": size}], "blobs": [],
        "sha256": "0" * 64}).encode()


def upload_junk(url: str, total: int) -> tuple:
    """A new session with a ``total``-byte junk message uploaded in chunks (not committed);
    its transport and the commit request's body."""
    import hashlib

    from cipherforest.privacy.protocol import HTTPTransport

    transport = HTTPTransport(url, KEY, timeout=600)
    transport.open_session()
    head = junk_message_head(total)
    step = transport.chunk_bytes
    digest = hashlib.sha256()
    n_chunks = -(-total // step)
    for index in range(n_chunks):
        size = min(step, total - index * step)
        chunk = (head + bytes(size - len(head))) if index == 0 else bytes(size)
        digest.update(chunk)
        transport._request("PUT", f"uploads/junk/chunks/{index}", chunk,
                           "application/octet-stream",
                           headers={"X-Content-SHA256": hashlib.sha256(chunk).hexdigest()})
    body = json.dumps({"n_chunks": n_chunks, "size": total,
                       "sha256": digest.hexdigest()}).encode()
    return transport, body


def commit_junk(transport, body: bytes, total: int) -> dict:
    """Commit the junk upload; the answer's status and seconds."""
    from cipherforest.privacy.protocol import ServiceRequestError

    started, status = time.monotonic(), 200
    try:
        transport._request("POST", "uploads/junk/commit", body, "application/json")
    except ServiceRequestError as exc:
        status = exc.status
    return {"sent_mb": total / 2**20, "status": status,
            "seconds": time.monotonic() - started}


def commit_junk_uploads(url: str, total: int, count: int, pid: int) -> tuple:
    """``count`` sessions upload a ``total``-byte junk message each, then commit at once;
    the server's RSS (MB) just before the commits, when they started, and their results."""
    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        uploads = list(pool.map(upload_junk, [url] * count, [total] * count))
        time.sleep(1.0)
        before, started = (rss_mb(pid), anon_mb(pid)), time.monotonic()
        results = list(pool.map(commit_junk, [t for t, _ in uploads],
                                [b for _, b in uploads], [total] * count))
    time.sleep(0.5)
    return before, started, results


def print_round(name: str, before: tuple[float, float], sampler: Sampler, started: float,
                sent: list[dict]) -> None:
    peak, anon = sampler.peak(started), sampler.peak(started, anon=True)
    print(f"{name:<36} {before[0]:>8.0f}MB {peak:>7.0f}MB {peak - before[0]:>5.0f}MB "
          f"{anon - before[1]:>9.0f}MB   "
          + ", ".join(f"{s['sent_mb']:.0f}/{s['status']}/{s['seconds']:.1f}" for s in sent))


def bodies(args) -> None:
    from cipherforest.privacy import PrivateForestClient
    from cipherforest.privacy.protocol import HTTPTransport, encode_message

    X, y, _ = wine_split(0)
    setup, _ = PrivateForestClient(5, random_state=0).encrypt(X, y)
    with tempfile.TemporaryDirectory() as data_dir:
        server, url = start_server(data_dir, args.src)
        sampler = Sampler(server.pid, 0.02)
        try:
            transport = HTTPTransport(url, KEY)
            transport.handle(encode_message(setup))
            time.sleep(2.0)
            base = rss_mb(server.pid)
            host = url.split("//")[1]
            common = (f"Host: {host}\r\nAuthorization: Bearer {transport.token}\r\n"
                      "Content-Type: application/octet-stream\r\n"
                      f"X-Content-SHA256: {'0' * 64}")
            session = f"/v1/sessions/{transport.session_id}"
            total = args.body_mb << 20
            cases = [("POST /predict, Content-Length", "POST", "/predict", False),
                     ("POST /predict, chunked", "POST", "/predict", True),
                     ("PUT chunk, Content-Length", "PUT", "/uploads/u/chunks/0", False),
                     ("POST /rounds, chunked", "POST", "/rounds", True)]
            print(f"server from {args.src or 'this checkout'}; machine load "
                  f"{os.getloadavg()[0]:.1f}; RSS with the session set up: {base:.0f} MB\n")
            print(f"{'three bodies of ' + str(args.body_mb) + ' MB at once':<36} "
                  f"{'RSS before':>10} {'RSS peak':>9} {'growth':>7} {'anon growth':>11}   "
                  "sent MB / status / s")
            for name, method, path, chunked in cases:
                before = (rss_mb(server.pid), anon_mb(server.pid))
                started = time.monotonic()
                length = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}"
                head = f"{method} {session}{path} HTTP/1.1\r\n{common}\r\n{length}"
                with concurrent.futures.ThreadPoolExecutor(3) as pool:
                    sent = list(pool.map(send_body, [url] * 3, [head] * 3, [total] * 3,
                                         [chunked] * 3))
                time.sleep(0.5)
                print_round(name, before, sampler, started, sent)
            before, started, sent = commit_junk_uploads(url, total, 3, server.pid)
            print_round("commit of an uploaded junk message", before, sampler, started, sent)
            head = (f"POST {session}/rounds HTTP/1.1\r\n{common}\r\n"
                    f"Content-Length: {64 << 10}")
            hostname, port = host.split(":")
            with socket.create_connection((hostname, int(port)), timeout=120) as sock:
                started = time.monotonic()
                sock.sendall(head.encode() + b"\r\n\r\n" + b"\0" * 1024)
                try:
                    answer = sock.recv(4096)
                    print(f"\nstalled body (1 KiB of 64 KiB): dropped after "
                          f"{time.monotonic() - started:.1f} s, answer "
                          f"{answer.split(b' ')[1].decode() if answer else 'none (closed)'}")
                except TimeoutError:
                    print("\nstalled body (1 KiB of 64 KiB): still open after 120 s")
            print(f"server RSS at the end: {rss_mb(server.pid):.0f} MB, highest over the run "
                  f"{sampler.peak():.0f} MB")
        finally:
            sampler.stop()
            server.terminate()
            server.wait(30)


# ---------------------------------------------------------------------------- sessions
def train_client(url: str, seed: int, trees: int, split_selection: str) -> dict:
    from cipherforest.privacy import PrivateForestClient

    X, y, X_test = wine_split(seed)
    started = time.perf_counter()
    transport = LabelRecordingTransport(url, KEY, timeout=600)
    client = PrivateForestClient(trees, random_state=seed, server=transport,
                                 split_selection=split_selection).fit(X, y)
    predicted = client.predict(X_test)
    expected = forest_oracle(client, X, y, X_test, {"n_estimators": trees,
                                                    "random_state": seed},
                             transport.grown_labels)
    return {"seconds": time.perf_counter() - started, "rounds": client.fit_stats_.rounds,
            "correct": bool(np.array_equal(predicted, expected))}


def sessions(args) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        server, url = start_server(data_dir, args.src, *args.server_options, log=args.log)
        sampler = Sampler(server.pid, 1.0)
        try:
            base = rss_mb(server.pid)
            started = time.monotonic()
            load = os.getloadavg()[0]
            context = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(args.clients,
                                                        mp_context=context) as pool:
                results = list(pool.map(train_client, [url] * args.clients,
                                        range(args.clients), [args.trees] * args.clients,
                                        [args.split_selection] * args.clients))
            finished = time.monotonic()
            peak = sampler.peak()
            marks = {}
            for minutes in (0, 1, 2, 5, 10):
                wait = finished + 60 * minutes - time.monotonic()
                if 60 * minutes > args.after:
                    break
                if wait > 0:
                    time.sleep(wait)
                marks[minutes] = rss_mb(server.pid)
            try:
                with urllib.request.urlopen(url + "/metrics") as reply:
                    metrics = reply.read().decode()
            except OSError:  # a server from before /metrics
                metrics = ""
        finally:
            sampler.stop()
            server.terminate()
            server.wait(30)
    in_memory = next((line.split()[-1] for line in metrics.splitlines()
                      if line.startswith("cipherforest_memory_sessions ")), "n/a")
    seconds = [r["seconds"] for r in results]
    print(f"{args.clients} clients at once, each {args.trees} trees on 130 wine rows (CKKS, "
          f"no depth limit, split_selection={args.split_selection!r}) and predicting 48; "
          f"server from {args.src or 'this checkout'} "
          f"{' '.join(args.server_options)}")
    print(f"machine: {os.cpu_count()} cores, load average {load:.1f} at the start")
    print(f"finished: {len(results)}/{args.clients}, correct "
          f"{sum(r['correct'] for r in results)}/{args.clients}; rounds "
          f"{min(r['rounds'] for r in results)}-{max(r['rounds'] for r in results)}; "
          f"client seconds {min(seconds):.0f}-{max(seconds):.0f} (wall "
          f"{finished - started:.0f} s)")
    print(f"server RSS: {base:.0f} MB at start, {peak:.0f} MB highest while training")
    print("after the last client finished: " + ", ".join(
        f"{m} min {mb:.0f} MB" for m, mb in marks.items()))
    print(f"sessions in memory at the end: {in_memory}")
    print(json.dumps({"base": base, "peak": peak, "after": marks}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("bodies", "sessions"))
    parser.add_argument("--src", default=None, help="run the server from this src folder")
    parser.add_argument("--body-mb", type=int, default=2048)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--trees", type=int, default=5)
    parser.add_argument("--after", type=float, default=600.0)
    parser.add_argument("--split-selection", default="rr", choices=("rr", "gini"),
                        help="the clients' split selection (default rr, the client's default)")
    parser.add_argument("--log", default=None, help="file for the server's log lines")
    parser.add_argument("--server-options", nargs="*", default=[],
                        help="more options of 'cipherforest serve' (e.g. --memory-limit 1G)")
    args = parser.parse_args()
    temporary_privacy_ledger("service_memory")
    (bodies if args.what == "bodies" else sessions)(args)


if __name__ == "__main__":
    main()
