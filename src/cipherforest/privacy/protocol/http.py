"""The client's HTTP transport: ``handle(bytes) -> bytes`` over the service's API.

:class:`HTTPTransport` gives :class:`~cipherforest.privacy.PrivateForestClient` the same
interface as an embedded :class:`~cipherforest.privacy.PrivateForestServer`: it takes a
protocol message and returns the reply. Underneath it opens a session with the access key,
uploads ``setup`` and ``labels`` messages in checksummed chunks (resuming an interrupted
upload from the chunks the server has), posts training and prediction messages, and retries
with exponential backoff while the server is unreachable — for up to ``timeout`` seconds of
continuous failure — then carries on where the session stands. Retrying is safe because the
service answers a repeated request with the reply it gave the first time.

Standard library only (:mod:`urllib`): installing the client needs no web framework.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

from .messages import Message, ProtocolError, decode_message, encode_message

__all__ = ["ACCESS_KEY_ENV", "HTTPTransport", "ServiceRequestError", "ServiceTLSError",
           "ServiceUnavailableError"]

ACCESS_KEY_ENV = "CIPHERFOREST_SERVER_KEY"
_RETRY_STATUS = (502, 503, 504)
_UPLOAD_KINDS = ("setup", "labels")


class ServiceRequestError(ProtocolError):
    """The service refused a request (4xx) or failed (5xx): its status and message."""

    def __init__(self, status: int, code: str, detail: str):
        super().__init__(f"server answered {status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail


class ServiceUnavailableError(ConnectionError):
    """The server stayed unreachable for longer than the transport's ``timeout``."""


class ServiceTLSError(ConnectionError):
    """The server's TLS certificate failed verification: raised at once, not retried (a
    certificate does not become trusted by waiting)."""


class HTTPTransport:
    """Protocol messages to and from a ``cipherforest serve`` process.

    Parameters
    ----------
    url : str
        ``http://host:port`` of the server.
    server_key : str or None
        The server's access key (to open a session); None reads ``$CIPHERFOREST_SERVER_KEY``.
    timeout : float, default=120
        Seconds of continuous failure to reach the server before giving up.
    chunk_bytes : int, default=4 MiB
        Upload chunk size (at most what the server takes, which it says when a session
        opens).
    progress : callable or None
        ``progress(what, done, total)`` after each upload chunk and each round.
    session : dict or None
        A session to continue (from :meth:`session_info`): ``id``, ``token``,
        ``protocol_id``.
    """

    def __init__(self, url: str, server_key: str | None = None, *, timeout: float = 120.0,
                 chunk_bytes: int = 4 << 20, progress: Callable | None = None,
                 session: dict | None = None):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"server must be an http(s)://host:port URL, got {url!r}")
        if not timeout >= 0:
            raise ValueError(f"timeout must be >= 0 seconds, got {timeout!r}")
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes!r}")
        self.url = url.rstrip("/")
        self.server_key = server_key
        self.timeout = float(timeout)
        self.chunk_bytes = int(chunk_bytes)
        self.progress = progress
        session = session or {}
        self.session_id: str | None = session.get("id")
        self.token: str | None = session.get("token")
        self.protocol_id: str | None = session.get("protocol_id")
        self.retries = 0  # requests repeated after a failure to reach the server

    def session_info(self) -> dict:
        """What continuing this session later needs (the token is a secret)."""
        return {"url": self.url, "id": self.session_id, "token": self.token,
                "protocol_id": self.protocol_id}

    # ------------------------------------------------------------------ protocol
    def handle(self, data: bytes) -> bytes:
        """Send one protocol message, return the reply (as an embedded server would)."""
        message = decode_message(data)
        if message.kind == "setup":
            self.session_id = self.token = self.protocol_id = None
            self.open_session()
            reply = self.upload(data, "setup", kind="setup")
            self.protocol_id = decode_message(reply, "session").value("session", str)
            return reply
        self._require_session()
        if message.kind in _UPLOAD_KINDS:
            return self.upload(data, kind=message.kind)
        if message.kind in ("train", "answer"):
            reply = self._request("POST", "rounds", data, "application/octet-stream")
            if self.progress is not None:
                self.progress("round", message.meta.get("round", 0), None)
            return reply
        if message.kind == "predict":
            return self._request("POST", "predict", data, "application/octet-stream")
        if message.kind == "close":
            self.delete()
            return encode_message(Message("closed", {"session": message.meta.get("session")}))
        raise ProtocolError(f"the HTTP transport does not send {message.kind!r} messages")

    # ------------------------------------------------------------------ endpoints
    def open_session(self) -> str:
        key = self.server_key or os.environ.get(ACCESS_KEY_ENV)
        if not key:
            raise ValueError(f"opening a session needs the server's access key: pass "
                             f"server_key= or set {ACCESS_KEY_ENV}")
        reply = json.loads(self._request("POST", None, b"", None, path="/v1/sessions",
                                         bearer=key))
        self.session_id, self.token = reply["session"], reply["token"]
        self.chunk_bytes = min(self.chunk_bytes, int(reply["max_chunk_bytes"]))
        return self.session_id

    def upload(self, data: bytes, name: str | None = None, kind: str = "message") -> bytes:
        """Upload a message in chunks (skipping chunks the server has) and commit it."""
        digest = hashlib.sha256(data).hexdigest()
        name = name or f"{kind}-{digest[:32]}"
        status = json.loads(self._request("GET", f"uploads/{name}"))
        n_chunks = max(1, -(-len(data) // self.chunk_bytes))
        if not status["committed"]:
            have = set(status["chunks"])
            for index in range(n_chunks):
                if index not in have:
                    chunk = data[index * self.chunk_bytes: (index + 1) * self.chunk_bytes]
                    self._request("PUT", f"uploads/{name}/chunks/{index}", chunk,
                                  "application/octet-stream",
                                  headers={"X-Content-SHA256": hashlib.sha256(chunk).hexdigest()})
                if self.progress is not None:
                    self.progress(f"upload {kind}", min(len(data), (index + 1)
                                                        * self.chunk_bytes), len(data))
        body = json.dumps({"n_chunks": n_chunks, "size": len(data), "sha256": digest}).encode()
        return self._request("POST", f"uploads/{name}/commit", body, "application/json")

    def status(self) -> dict:
        self._require_session()
        return json.loads(self._request("GET", ""))

    def current_reply(self) -> bytes:
        """The server's reply to the session's last training request (the open query)."""
        self._require_session()
        return self._request("GET", "rounds/current")

    def delete(self) -> None:
        self._require_session()
        self._request("DELETE", "")
        self.session_id = self.token = self.protocol_id = None

    def _require_session(self) -> None:
        if self.session_id is None or self.token is None:
            raise ProtocolError("no session: send a setup message first")

    # ------------------------------------------------------------------ HTTP with retries
    def _request(self, method: str, endpoint: str | None, body: bytes | None = None,
                 content_type: str | None = None, *, path: str | None = None,
                 bearer: str | None = None, headers: dict | None = None) -> bytes:
        if path is None:
            path = f"/v1/sessions/{self.session_id}" + (f"/{endpoint}" if endpoint else "")
        all_headers = {"Authorization": f"Bearer {bearer or self.token}", **(headers or {})}
        if content_type is not None:
            all_headers["Content-Type"] = content_type
        deadline, delay = None, 0.05
        while True:
            request = urllib.request.Request(self.url + path, data=body, method=method,
                                             headers=all_headers)
            try:
                with urllib.request.urlopen(request, timeout=3600) as response:
                    return response.read()
            except urllib.error.HTTPError as exc:
                payload = exc.read()
                # 429 with Retry-After is "too many at once", not a quota: wait and retry.
                again = exc.code == 429 and exc.headers.get("Retry-After") is not None
                if exc.code not in _RETRY_STATUS and not again:
                    raise _request_error(exc.code, payload) from None
                failure = exc
            except (urllib.error.URLError, http.client.HTTPException, ConnectionError,
                    TimeoutError) as exc:
                reason = getattr(exc, "reason", exc)
                if isinstance(reason, ssl.SSLCertVerificationError):
                    raise ServiceTLSError(
                        f"{self.url}: the server's TLS certificate is not trusted "
                        f"({reason.verify_message or reason}); give the certificate or its "
                        "CA in SSL_CERT_FILE, or check the host name") from None
                failure = exc
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.timeout
            if now >= deadline:
                raise ServiceUnavailableError(
                    f"{self.url} unreachable for {self.timeout:.0f} s ({method} {path}): "
                    f"{failure}") from None
            self.retries += 1
            time.sleep(min(delay, max(0.0, deadline - now)))
            delay = min(2 * delay, 2.0)


def _request_error(status: int, payload: bytes) -> ServiceRequestError:
    try:
        body = json.loads(payload)
        return ServiceRequestError(status, str(body["error"]), str(body["detail"]))
    except (ValueError, KeyError, TypeError):
        return ServiceRequestError(status, "http_error", payload[:200].decode(errors="replace"))
