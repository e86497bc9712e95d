"""Hostile load against ``cipherforest serve``: what each attack costs the server and the
other users.

A server is started as a subprocess on a fresh data directory, on loopback, without the
supervisor (``--restart-above 0``: the resident memory measured is the one server process)
and with ``--limit-concurrency 256 --header-timeout 10 --body-timeout 10``. For each attack
a keyed "victim" user polls the status of its own session every 0.1 s; the table gives, per
attack: the requests or connections sent, the statuses (or fates) they got, the server's
resident memory before and its highest rise during the attack (sampled every 20 ms), and
the victim's latency (median, 99th percentile, slowest) with any victim request that did
not get a 200. Every loop is bounded in count and in time. (In the statuses column, an
entry without a count is a note.)

``slow-headers``
    300 sockets send ``GET /healthz HTTP/1.1\\r\\nHost: x\\r\\n`` and nothing more, held 15 s;
    how many the server closed.
``slow-bodies``
    300 chunk uploads of one user (an access key of its own) declare 1 MiB and send a byte
    every 0.5 s, started 20 a second, for at most 90 s; meanwhile another user (the default
    key) uploads a 1 MiB chunk every 0.5 s: its statuses and latencies.
``big-integers``
    300 commit bodies whose ``size`` or ``n_chunks`` has 5,000 digits.
``deep-json``
    300 commit bodies nested 30,000 deep (60 KB).
``huge-messages``
    3 sessions each upload a well-formed 200 MB ``setup`` message (correct digests; it asks
    for 25 million rows × 100 trees, beyond the key's rows × trees quota) and commit at
    once.
``method-flood``
    30,000 requests with random 8,000-letter methods on kept-alive sockets (4 threads); the
    ``requests_total`` series /metrics gains.
``big-predictions``
    A 130-row wine forest (3 trees, depth 3) is trained; two clients then predict 100,000
    rows each at once, while another user (an access key of its own) trains a forest of
    its own: besides the polling victim, that user's whole training time and every one of
    its requests' seconds (p50/p99/max, the slowest named, the small GET requests apart),
    against the same training alone before the predictions.

    python benchmarks/service_attack.py [--only NAME ...] [--src DIR]

``--src DIR`` runs the server from another checkout's ``src`` (an older commit extracted
with ``git archive``) for a side-by-side comparison.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import hashlib
import http.client
import inspect
import json
import random
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gipe import temporary_privacy_ledger  # noqa: E402
from service_memory import KEY, Sampler, rss_mb, start_server, wine_split  # noqa: E402

OPTIONS = ("--restart-above", "0", "--limit-concurrency", "256", "--header-timeout", "10",
           "--body-timeout", "10", "--max-predict-rows", "100000")
PARAMS = {"n_estimators": 3, "max_depth": 3, "random_state": 0}


def _address(url: str) -> tuple[str, int]:
    host, port = url.split("//")[1].split(":")
    return host, int(port)


def call(url: str, method: str, path: str, body: bytes | None = None,
         headers: dict | None = None, timeout: float = 60.0) -> tuple[int | str, bytes]:
    """``(status, body)`` of one request on a new connection; ``("hang", b"")`` after
    ``timeout`` seconds, ``("reset", b"")`` if the connection broke."""
    conn = http.client.HTTPConnection(*_address(url), timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    except TimeoutError:
        return "hang", b""
    except (OSError, http.client.HTTPException):
        return "reset", b""
    finally:
        conn.close()


def open_session(url: str, key: str = KEY) -> tuple[str, str]:
    status, body = call(url, "POST", "/v1/sessions", headers={"Authorization": f"Bearer {key}"})
    assert status == 201, (status, body)
    reply = json.loads(body)
    return reply["session"], reply["token"]


class Victim:
    """A keyed user polling its session's status every 0.1 s in a thread."""

    def __init__(self, url: str):
        self.url = url
        self.session, token = open_session(url)
        self.headers = {"Authorization": f"Bearer {token}"}
        self.latencies: list[float] = []
        self.failures: collections.Counter = collections.Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            started = time.monotonic()
            status, _ = call(self.url, "GET", f"/v1/sessions/{self.session}",
                             headers=self.headers, timeout=30)
            self.latencies.append(time.monotonic() - started)
            if status != 200:
                self.failures[status] += 1
            self._stop.wait(0.1)

    def stop(self) -> str:
        self._stop.set()
        self._thread.join(60)
        lat = np.array(self.latencies or [float("nan")])
        text = (f"{np.median(lat):.3f}/{np.percentile(lat, 99):.3f}/{lat.max():.3f} s "
                f"({len(self.latencies)})")
        return text + ("" if not self.failures else f" not 200: {dict(self.failures)}")


# ---------------------------------------------------------------------------- attacks
def slow_headers(url: str, count: int = 300, hold: float = 15.0) -> collections.Counter:
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(_address(url), timeout=5)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        sock.setblocking(False)
        sockets.append(sock)
    closed: set[int] = set()
    deadline = time.monotonic() + hold
    while time.monotonic() < deadline and len(closed) < count:
        for i, sock in enumerate(sockets):
            if i in closed:
                continue
            try:
                if sock.recv(1024) == b"":
                    closed.add(i)
            except BlockingIOError:
                pass
            except OSError:
                closed.add(i)
        time.sleep(0.2)
    for sock in sockets:
        sock.close()
    fates = collections.Counter({f"closed by the server within {hold:.0f} s": len(closed)})
    if len(closed) < count:
        fates["still open"] = count - len(closed)
    return fates


def _latencies(seconds: list[float]) -> str:
    """``p50/p99/max`` of a list of seconds."""
    lat = np.array(seconds or [float("nan")])
    return (f"{np.median(lat):.2f}/{np.percentile(lat, 99):.2f}/{lat.max():.2f} s "
            f"({len(seconds)})")


def slow_bodies(url: str, count: int = 300, limit: float = 90.0,
                key: str | None = None) -> collections.Counter:
    """``count`` chunk uploads of one access key (``key``) that declare 1 MiB and send a byte
    every 0.5 s, started 20 a second; meanwhile another user (the default key) uploads a
    1 MiB chunk every 0.5 s."""
    session, token = open_session(url, key or KEY)
    other, other_token = open_session(url)
    chunk = bytes(range(256)) * 4096
    other_headers = {"Authorization": f"Bearer {other_token}",
                     "Content-Type": "application/octet-stream",
                     "X-Content-SHA256": hashlib.sha256(chunk).hexdigest()}
    uploads: collections.Counter = collections.Counter()
    upload_seconds: list[float] = []
    done = threading.Event()

    def other_user():
        index = 0
        while not done.is_set():
            started = time.monotonic()
            status, _ = call(url, "PUT", f"/v1/sessions/{other}/uploads/u/chunks/{index}",
                             chunk, other_headers, timeout=60)
            upload_seconds.append(time.monotonic() - started)
            uploads[status] += 1
            index += 1
            done.wait(0.5)

    thread = threading.Thread(target=other_user, daemon=True)
    thread.start()
    head = (f"PUT /v1/sessions/{session}/uploads/slow{{}}/chunks/0 HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/octet-stream\r\n"
            f"X-Content-SHA256: {'0' * 64}\r\nContent-Length: {1 << 20}\r\n\r\n")
    sockets: dict[int, socket.socket] = {}
    fates: collections.Counter = collections.Counter()
    started = time.monotonic()
    deadline = started + limit
    opened = 0
    while time.monotonic() < deadline and (opened < count or sockets):
        while opened < count and opened < (time.monotonic() - started) * 20:
            sock = socket.create_connection(_address(url), timeout=5)
            sock.sendall(head.format(opened).encode())
            sock.setblocking(False)
            sockets[opened] = sock
            opened += 1
        for i, sock in list(sockets.items()):
            fate = None
            try:
                answer = sock.recv(4096)
                fate = int(answer.split()[1]) if answer else "closed"
            except BlockingIOError:
                try:
                    sock.send(b"x")
                except BlockingIOError:
                    pass
                except OSError:
                    fate = "reset"
            except OSError:
                fate = "reset"
            if fate is not None:
                fates[fate] += 1
                sock.close()
                del sockets[i]
        time.sleep(0.5)
    fates["hang"] += len(sockets)
    for sock in sockets.values():
        sock.close()
    done.set()
    thread.join(60)
    fates += collections.Counter()  # (drops a zero "hang")
    fates[f"another user's 1 MiB uploads: {dict(uploads)}, "
          f"p50/p99/max {_latencies(upload_seconds)}"] = 0
    return fates


def _commit_flood(url: str, bodies: list[bytes]) -> collections.Counter:
    session, token = open_session(url)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    return collections.Counter(call(url, "POST", f"/v1/sessions/{session}/uploads/u/commit",
                                    body, headers, timeout=30)[0] for body in bodies)


def big_integers(url: str, count: int = 300) -> collections.Counter:
    huge = "9" * 5000
    bodies = [(f'{{"n_chunks": 1, "size": {huge}, "sha256": "{"a" * 64}"}}' if i % 2 else
               f'{{"n_chunks": {huge}, "size": 1, "sha256": "{"a" * 64}"}}').encode()
              for i in range(count)]
    return _commit_flood(url, bodies)


def deep_json(url: str, count: int = 300) -> collections.Counter:
    return _commit_flood(url, [b"[" * 30000 + b"]" * 30000] * count)


def _setup_message(rows: int, trees: int) -> bytes:
    from cipherforest.privacy.protocol import Message, encode_message

    return encode_message(Message("setup", {"n_estimators": trees},
                                  {"X": np.zeros((rows, 1))}, {"context": [b"\0" * 64]}))


def huge_messages(url: str, count: int = 3, megabytes: int = 200,
                  sampler: Sampler | None = None) -> collections.Counter:
    message = _setup_message(megabytes * 10**6 // 8, 100)
    step = 16 << 20
    chunks = [message[i: i + step] for i in range(0, len(message), step)]
    commit = json.dumps({"n_chunks": len(chunks), "size": len(message),
                         "sha256": hashlib.sha256(message).hexdigest()}).encode()

    def upload() -> tuple[str, dict]:
        session, token = open_session(url)
        auth = {"Authorization": f"Bearer {token}"}
        for index, chunk in enumerate(chunks):
            for _ in range(600):  # one key's uploads at once: 429 key_busy, retried
                status, _ = call(url, "PUT",
                                 f"/v1/sessions/{session}/uploads/setup/chunks/{index}",
                                 chunk, {**auth, "Content-Type": "application/octet-stream",
                                         "X-Content-SHA256": hashlib.sha256(chunk).hexdigest()})
                if status != 429:
                    break
                time.sleep(0.2)
            assert status == 200, status
        return session, auth

    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        uploads = list(pool.map(lambda _: upload(), range(count)))
        time.sleep(1.0)
        if sampler is not None:
            sampler.mark = (time.monotonic(), rss_mb(sampler.pid))
        def commit_one(item) -> str:
            status, body = call(url, "POST", f"/v1/sessions/{item[0]}/uploads/setup/commit",
                                commit, {**item[1], "Content-Type": "application/json"},
                                timeout=300)
            try:
                return f"{status} {json.loads(body)['error']}"
            except (ValueError, KeyError, TypeError):
                return str(status)

        return collections.Counter(pool.map(commit_one, uploads))


def method_flood(url: str, count: int = 30000, threads: int = 4) -> collections.Counter:
    def series() -> int:
        _, text = call(url, "GET", "/metrics")
        return sum(line.startswith(b"cipherforest_requests_total{")
                   for line in text.splitlines())

    before = series()

    def one(seed: int) -> collections.Counter:
        rng = random.Random(seed)
        letters = "".join(rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ", k=1 << 20))
        statuses: collections.Counter = collections.Counter()
        sock = None
        for _ in range(count // threads):
            start = rng.randrange(len(letters) - 8000)
            method = letters[start: start + 8000]
            try:
                if sock is None:
                    sock = socket.create_connection(_address(url), timeout=30)
                sock.sendall(f"{method} /x HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                data = b""
                while b"\r\n\r\n" not in data:
                    part = sock.recv(65536)
                    if not part:
                        raise ConnectionResetError
                    data += part
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(rest) < length:
                    rest += sock.recv(65536)
                statuses[int(head.split()[1])] += 1
                if b"connection: close" in head.lower():
                    sock.close()
                    sock = None
            except TimeoutError:
                statuses["hang"] += 1
                sock = None
            except OSError:
                statuses["reset"] += 1
                sock = None
        if sock is not None:
            sock.close()
        return statuses

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(one, range(threads)), collections.Counter())
    _, text = call(url, "GET", "/metrics")
    total[f"series added {series() - before}, /metrics {len(text) / 1024:.0f} KiB"] = 0
    return total


def big_predictions(url: str, rows: int = 100_000, key: str = KEY) -> collections.Counter:
    from cipherforest.privacy import PrivateForestClient
    from cipherforest.privacy.protocol import HTTPTransport, ServiceRequestError

    X, y, _ = wine_split(0)
    client = PrivateForestClient(server=HTTPTransport(url, KEY, timeout=600),
                                 **PARAMS).fit(X, y)
    rng = np.random.RandomState(0)
    X_big = X[rng.randint(0, len(X), rows)] * rng.uniform(0.9, 1.1, (rows, X.shape[1]))

    class Timed(HTTPTransport):
        """Records every request's endpoint and seconds."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.requests: list[tuple[str, float]] = []

        def _request(self, method, endpoint, *args, **kwargs):
            started = time.monotonic()
            try:
                return super()._request(method, endpoint, *args, **kwargs)
            finally:
                where = kwargs.get("path") or (endpoint or "status")
                where = "commit" if where.endswith("/commit") else where.split("/")[0]
                self.requests.append((f"{method} {where}", time.monotonic() - started))

    def predict(_):
        try:
            client.predict_proba(X_big)
            return 200
        except ServiceRequestError as exc:
            return exc.status

    def other_user() -> tuple[float, list[tuple[str, float]]]:
        X2, y2, _ = wine_split(1)
        started = time.monotonic()
        transport = Timed(url, key, timeout=600)
        PrivateForestClient(server=transport, **PARAMS).fit(X2, y2)
        return time.monotonic() - started, transport.requests

    def summary(seconds: float, requests: list[tuple[str, float]]) -> str:
        slowest = max(requests, key=lambda r: r[1])
        small = [t for what, t in requests if what.startswith(("GET", "DELETE"))]
        return (f"training {seconds:.1f} s, {len(requests)} requests "
                f"p50/p99/max {_latencies([t for _, t in requests])}, slowest "
                f"{slowest[0]} {slowest[1]:.2f} s; small (GET) {_latencies(small)}")

    alone = summary(*other_user())
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        predictions = [pool.submit(predict, i) for i in range(2)]
        time.sleep(2.0)  # the predictions are under way
        other = pool.submit(other_user)
        statuses = collections.Counter(f.result() for f in predictions)
        beside = summary(*other.result())
    statuses[f"other user alone: {alone}"] = 0
    statuses[f"other user beside the predictions: {beside}"] = 0
    return statuses


ATTACKS = {"slow-headers": slow_headers, "slow-bodies": slow_bodies,
           "big-integers": big_integers, "deep-json": deep_json,
           "huge-messages": huge_messages, "method-flood": method_flood,
           "big-predictions": big_predictions}


def main() -> None:
    from cipherforest.service.keys import KeyStore
    from cipherforest.service.limits import Quotas

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=sorted(ATTACKS), default=list(ATTACKS))
    parser.add_argument("--src", help="run the server from this checkout's src")
    args = parser.parse_args()
    temporary_privacy_ledger("service_attack")
    print(f"{'attack':<16} {'RSS before':>10} {'peak rise':>9} {'victim p50/p99/max':>26}  "
          "statuses")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            # (an older server may lack --header-timeout: it then runs without)
            options = OPTIONS if args.src is None else OPTIONS[:4] + OPTIONS[6:]
            kwargs = {}
            if "key" in inspect.signature(ATTACKS[name]).parameters:  # a second user
                Path(f"{tmp}/{name}").mkdir()
                _, kwargs["key"] = KeyStore(f"{tmp}/{name}").add(
                    "second", Quotas(64, 64 << 30, 10**9))
            server, url = start_server(f"{tmp}/{name}", args.src, *options,
                                       log=f"{tmp}/{name}.log")
            try:
                victim = Victim(url)
                time.sleep(0.5)
                sampler = Sampler(server.pid, 0.02)
                sampler.mark = (time.monotonic(), rss_mb(server.pid))
                started = time.monotonic()
                if name == "huge-messages":
                    kwargs["sampler"] = sampler
                statuses = ATTACKS[name](url, **kwargs)
                elapsed = time.monotonic() - started
                seen = victim.stop()
                since, before = sampler.mark
                rise = sampler.peak(since) - before
                sampler.stop()
            finally:
                server.terminate()
                server.wait(30)
            with open(f"{tmp}/{name}.log") as log:
                lines = log.read().splitlines()
            not_json = sum(not line.startswith("{") for line in lines)
            errors = sum('"status":5' in line and '"status":503' not in line
                         for line in lines)
            busy = sum('"status":503' in line for line in lines)
            shown = ", ".join(f"{k}: {v}" if v else str(k) for k, v in statuses.items())
            print(f"{name:<16} {before:>8.0f}MB {rise:>7.0f}MB {seen:>26}  {shown} "
                  f"[{elapsed:.0f} s; log: {len(lines)} lines, {not_json} not JSON, "
                  f"{errors} 5xx other than {busy} 503]", flush=True)


if __name__ == "__main__":
    main()
