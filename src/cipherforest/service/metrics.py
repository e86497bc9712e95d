"""What an operator watches: ``/metrics`` in Prometheus text format, one JSON log line per
request.

:class:`ServiceMetrics` counts requests by method, route and status (methods outside
:data:`METHODS` as ``other``, paths outside the app's routes as ``unmatched``: a bounded
set of series whatever clients send), the bytes they moved,
and the seconds of each training level (a histogram); :meth:`ServiceMetrics.render` adds
the gauges read at scrape time (sessions by state, bytes stored, sessions in memory and
their estimated bytes, large bodies in progress). :class:`RequestLog` is a plain ASGI
middleware (it does not buffer bodies) that times every request, counts its bytes and
writes one JSON line to the ``cipherforest.service.access`` logger::

    {"time": "2025-01-01T12:00:00.000Z", "method": "POST",
     "route": "/v1/sessions/{session_id}/rounds", "session": "3f…", "status": 200,
     "error": null, "bytes_in": 1843, "bytes_out": 1050931, "seconds": 2.731}

No header, query string, token, key or body content is logged: the route is the template,
the session id is the public one in the path, and ``error`` is the code of a refusal.
Clients that disconnect before their body is complete are logged with status 499.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter

__all__ = ["LEVEL_BUCKETS", "METHODS", "RequestLog", "ServiceMetrics"]

#: HTTP methods counted under their own name; any other is counted (and logged) as
#: ``"other"``, so that junk methods cannot add metric series.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})
#: Upper bounds (seconds) of the training-level histogram's buckets.
LEVEL_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)
_access_log = logging.getLogger("cipherforest.service.access")


def _escape(value) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels) -> str:
    inner = ",".join(f'{name}="{_escape(value)}"' for name, value in labels.items())
    return "{" + inner + "}" if inner else ""


def _family(name: str, kind: str, text: str, samples: list[tuple[str, str, float]]) -> list:
    """One metric family: ``samples`` of ``(suffix, labels, value)``."""
    lines = [f"# HELP cipherforest_{name} {text}", f"# TYPE cipherforest_{name} {kind}"]
    for suffix, labels, value in samples:
        shown = repr(float(value)) if isinstance(value, float) else str(int(value))
        lines.append(f"cipherforest_{name}{suffix}{labels} {shown}")
    return lines


class ServiceMetrics:
    """Counters and a histogram of one server process (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.requests: Counter = Counter()  # (method, route, status) -> count
        self.bytes_in = 0
        self.bytes_out = 0
        self.level_counts = [0] * (len(LEVEL_BUCKETS) + 1)
        self.level_sum = 0.0
        self.in_flight = 0  # requests other than /healthz and /metrics
        self._last_activity = time.monotonic()

    def started(self) -> None:
        with self._lock:
            self.in_flight += 1

    def finished(self) -> None:
        with self._lock:
            self.in_flight -= 1
            self._last_activity = time.monotonic()

    def idle_seconds(self) -> float:
        """Seconds since the last request other than /healthz and /metrics ended (0 while
        one runs)."""
        with self._lock:
            return 0.0 if self.in_flight else time.monotonic() - self._last_activity

    def request(self, method: str, route: str, status: int, bytes_in: int,
                bytes_out: int) -> None:
        with self._lock:
            self.requests[(method, route, status)] += 1
            self.bytes_in += bytes_in
            self.bytes_out += bytes_out

    def level(self, seconds: float) -> None:
        """One training level (a ``train`` or ``answer`` message) took ``seconds``."""
        with self._lock:
            bucket = next((i for i, bound in enumerate(LEVEL_BUCKETS) if seconds <= bound),
                          len(LEVEL_BUCKETS))
            self.level_counts[bucket] += 1
            self.level_sum += seconds

    def render(self, gauges: dict) -> str:
        """The Prometheus text exposition: these counters plus ``gauges`` (from the session
        manager: ``sessions`` by state, ``stored_bytes``, ``memory_sessions``,
        ``memory_bytes``, ``memory_evictions``, ``large_bodies``)."""
        with self._lock:
            requests = sorted(self.requests.items())
            counts, level_sum = list(self.level_counts), self.level_sum
            bytes_in, bytes_out = self.bytes_in, self.bytes_out
        buckets, cumulative = [], 0
        for bound, count in zip([*(f"{b:g}" for b in LEVEL_BUCKETS), "+Inf"], counts,
                                strict=True):
            cumulative += count
            buckets.append(("_bucket", _labels(le=bound), cumulative))
        lines = [
            *_family("sessions", "gauge", "Sessions on disk by protocol state.",
                     [("", _labels(state=state), count)
                      for state, count in sorted(gauges["sessions"].items())]),
            *_family("stored_bytes", "gauge", "Bytes in the session folders.",
                     [("", "", gauges["stored_bytes"])]),
            *_family("memory_sessions", "gauge", "Sessions held in memory.",
                     [("", "", gauges["memory_sessions"])]),
            *_family("memory_bytes", "gauge", "Estimated bytes of the sessions in memory.",
                     [("", "", gauges["memory_bytes"])]),
            *_family("memory_evictions_total", "counter", "Sessions that left memory.",
                     [("", "", gauges["memory_evictions"])]),
            *_family("large_bodies", "gauge", "Large request bodies being received or "
                     "processed.", [("", "", gauges["large_bodies"])]),
            *_family("he_pool_bytes", "gauge", "Bytes in the homomorphic library's memory "
                     "pool.", [("", "", gauges["he_pool_bytes"])]
                     if gauges.get("he_pool_bytes") is not None else []),
            *_family("requests_total", "counter", "HTTP requests by method, route and status.",
                     [("", _labels(method=m, route=r, status=s), n)
                      for (m, r, s), n in requests]),
            *_family("request_bytes_total", "counter", "Bytes of request bodies received.",
                     [("", "", bytes_in)]),
            *_family("response_bytes_total", "counter", "Bytes of response bodies sent.",
                     [("", "", bytes_out)]),
            *_family("level_seconds", "histogram", "Server seconds per training level (a "
                     "train or answer message).",
                     [*buckets, ("_sum", "", float(level_sum)), ("_count", "", cumulative)]),
        ]
        return "\n".join(lines) + "\n"


class RequestLog:
    """ASGI middleware: one JSON log line and one metrics count per HTTP request."""

    def __init__(self, app, metrics: ServiceMetrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        seen = {"in": 0, "out": 0, "status": 500, "error_body": b"", "disconnected": False}

        async def counting_receive():
            message = await receive()
            if message["type"] == "http.request":
                seen["in"] += len(message.get("body", b""))
            elif message["type"] == "http.disconnect":
                seen["disconnected"] = True
            return message

        async def counting_send(message):
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
            elif message["type"] == "http.response.body":
                body = message.get("body", b"")
                seen["out"] += len(body)
                if seen["status"] >= 400 and len(seen["error_body"]) < 4096:
                    seen["error_body"] += body[:4096]
            await send(message)

        operational = scope["path"] in ("/healthz", "/metrics")
        if not operational:
            self.metrics.started()
        try:
            await self.app(scope, counting_receive, counting_send)
        finally:
            if not operational:
                self.metrics.finished()
            self._record(scope, seen, time.perf_counter() - started)

    def _record(self, scope, seen: dict, seconds: float) -> None:
        route = getattr(scope.get("route"), "path", None) or "unmatched"
        method = scope["method"] if scope["method"] in METHODS else "other"
        error = None
        if seen["status"] >= 400:
            try:
                error = json.loads(seen["error_body"]).get("error")
            except (ValueError, AttributeError):
                error = None
        self.metrics.request(method, route, seen["status"], seen["in"], seen["out"])
        session = (scope.get("path_params") or {}).get("session_id")
        now = time.time()
        line = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
                + f".{int(now % 1 * 1000):03d}Z",
                "method": method, "route": route,
                "session": session if isinstance(session, str) and len(session) == 32
                else None,
                "status": seen["status"], "error": error, "bytes_in": seen["in"],
                "bytes_out": seen["out"], "seconds": round(seconds, 4)}
        _access_log.info(json.dumps(line, separators=(",", ":")))
