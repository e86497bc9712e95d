"""The HTTP layer: a FastAPI app over :class:`~cipherforest.service.sessions.SessionManager`.

Protocol messages travel as ``application/octet-stream`` bodies exactly as
:func:`~cipherforest.privacy.protocol.encode_message` makes them; everything else is JSON.
Every refused request is answered with a 4xx status (503 when busy) and
``{"error": code, "detail": text}`` naming the problem. Bodies are received by
:class:`~cipherforest.service.bodies.BodyReceiver` against per-route limits derived from the
session; every request is logged as one JSON line and counted for ``/metrics``
(:mod:`~cipherforest.service.metrics`). See ``docs/service.md`` for the endpoints and a
session's life.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Header, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from .bodies import BodyReceiver, parse_json
from .metrics import RequestLog
from .sessions import ServiceError, SessionManager
from .storage import SessionRecord

__all__ = ["create_app"]

_log = logging.getLogger("cipherforest.service")
_MAX_JSON_BYTES = 64 << 10
_SWEEP_SECONDS = 15.0
_OCTET = "application/octet-stream"
_MESSAGE_BODY = {"requestBody": {"required": True, "content": {
    _OCTET: {"schema": {"type": "string", "format": "binary"}}}}}
_MESSAGE_REPLY = {200: {"content": {_OCTET: {"schema": {"type": "string", "format": "binary"}}},
                        "description": "the protocol's reply message"}}


class ErrorBody(BaseModel):
    error: str = Field(description="machine-readable code")
    detail: str = Field(description="what was wrong with the request")


class SessionOpened(BaseModel):
    session: str
    token: str = Field(description="bearer token of this session, and of no other")
    idle_expiry_seconds: float
    max_chunk_bytes: int = Field(description="largest upload chunk this server takes")
    max_message_bytes: int = Field(description="largest upload (setup or labels message)")
    max_predict_rows: int = Field(description="most rows of one predict message")


class UploadStatus(BaseModel):
    name: str
    committed: bool
    sha256: str | None
    chunks: list[int] = Field(description="chunk indices received (uncommitted uploads)")


class CommitRequest(BaseModel):
    n_chunks: int = Field(ge=1, le=1 << 31)
    size: int = Field(ge=1, le=1 << 62)
    sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")


_ERRORS = {status: {"model": ErrorBody} for status in (400, 401, 403, 404, 408, 409, 410, 413,
                                                        415, 422, 429, 503)}


def _bearer(authorization: str | None) -> str | None:
    if authorization is None:
        return None
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise ServiceError(401, "bad_authorization", "the Authorization header must be "
                           "'Bearer <token>'")
    return value.strip()


def _commit_request(raw: bytes) -> CommitRequest:
    try:
        return CommitRequest.model_validate(parse_json(raw, max_bytes=_MAX_JSON_BYTES))
    except ValidationError as exc:
        raise ServiceError(422, "invalid_body", _validation_text(exc.errors())) from None


def _session_record(request: Request, session_id: str = Path(pattern=r"^[0-9a-f]{32}$"),
                    authorization: str | None = Header(default=None)) -> SessionRecord:
    """The session named in the path, if the bearer token is its token."""
    return request.app.state.manager.authenticate(session_id, _bearer(authorization))


CurrentSession = Annotated[SessionRecord, Depends(_session_record)]


def create_app(manager: SessionManager) -> FastAPI:
    """The ASGI app serving ``manager``'s sessions (settings live in the manager)."""
    limits = manager.limits
    receiver = BodyReceiver(manager.storage.temp_dir, limits.body_read_timeout,
                            limits.max_large_bodies,
                            max_large_per_owner=limits.max_large_bodies_per_key)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        async def sweep_periodically():
            while True:
                await asyncio.sleep(_SWEEP_SECONDS)
                try:
                    await run_in_threadpool(manager.sweep)
                except Exception:  # upkeep must not stop; the next sweep tries again
                    _log.exception("periodic sweep failed")

        task = asyncio.create_task(sweep_periodically())
        try:
            yield
        finally:
            task.cancel()
            manager.storage.close()  # checkpoints the index's write-ahead log into it

    app = FastAPI(title="cipherforest private-forest server", version="1", lifespan=lifespan,
                  description="Encrypted random-forest training and prediction: GIPE "
                              "features, CKKS/BFV labels. The server never holds a secret key.")

    health = APIRouter(tags=["operations"])

    @health.get("/healthz")
    def healthz() -> dict:
        """Liveness: the server answers."""
        return {"status": "ok"}

    @health.get("/metrics", response_class=PlainTextResponse)
    def metrics() -> PlainTextResponse:
        """Prometheus text format: sessions by state, bytes stored, memory, requests by
        status, seconds per training level."""
        text = manager.metrics.render(manager.gauges(receiver.large_in_progress))
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    sessions = APIRouter(prefix="/v1/sessions", tags=["sessions"], responses=_ERRORS)

    @sessions.post("", status_code=201, response_model=SessionOpened)
    def open_session(authorization: str | None = Header(default=None)) -> SessionOpened:
        """Open a session with an access key; returns the session's bearer token."""
        session_id, token = manager.open_session(_bearer(authorization))
        return SessionOpened(session=session_id, token=token,
                             idle_expiry_seconds=limits.session_idle_seconds,
                             max_chunk_bytes=limits.max_chunk_bytes,
                             max_message_bytes=limits.max_message_bytes,
                             max_predict_rows=limits.max_predict_rows)

    @sessions.get("/{session_id}")
    def status(record: CurrentSession) -> dict:
        """State and progress: uploads, labels received, round, open nodes, leaves."""
        return manager.status(record)

    @sessions.delete("/{session_id}")
    def delete(record: CurrentSession) -> dict:
        """Forget the session: its ciphertexts, trees, leaves and files."""
        manager.delete(record)
        return {"deleted": record.id}

    uploads = APIRouter(prefix="/v1/sessions/{session_id}/uploads", tags=["uploads"],
                        responses=_ERRORS)

    @uploads.put("/{name}/chunks/{index}", response_model=UploadStatus,
                 openapi_extra=_MESSAGE_BODY)
    async def put_chunk(request: Request, name: str, index: int,
                        record: CurrentSession,
                        x_content_sha256: str | None = Header(default=None)) -> UploadStatus:
        """Store one chunk of an upload (idempotent); its SHA-256 goes in X-Content-SHA256."""
        manager.check_chunk(name, index, x_content_sha256)
        async with receiver.body(request, _OCTET, manager.body_limit(record, "chunk"),
                                 to_file=True, owner=record.key_id) as body:
            chunks = await run_in_threadpool(manager.put_chunk, record, name, index, body,
                                             x_content_sha256)
        return UploadStatus(name=name, committed=False, sha256=None, chunks=chunks)

    @uploads.get("/{name}", response_model=UploadStatus)
    def upload_status(name: str, record: CurrentSession) -> dict:
        """Which chunks arrived (to resume an interrupted upload), or that it is committed."""
        return manager.upload_status(record, name)

    @uploads.post("/{name}/commit", responses=_MESSAGE_REPLY, openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": CommitRequest.model_json_schema()}}}})
    async def commit(request: Request, name: str,
                     record: CurrentSession) -> Response:
        """Assemble the chunks (checked against size and SHA-256) into a setup or labels
        message and hand it to the protocol; a retried commit returns the same reply."""
        async with receiver.body(request, "application/json", _MAX_JSON_BYTES) as body:
            request_body = _commit_request(body.read())
        # The assembled message is read into memory: it takes a large-body slot.
        async with receiver.slot(request_body.size, record.key_id):
            reply = await run_in_threadpool(manager.commit, record, name,
                                            request_body.n_chunks, request_body.size,
                                            request_body.sha256)
        return Response(reply, media_type=_OCTET)

    training = APIRouter(prefix="/v1/sessions/{session_id}", tags=["training"],
                         responses=_ERRORS)

    @training.post("/rounds", responses=_MESSAGE_REPLY, openapi_extra=_MESSAGE_BODY)
    async def post_round(request: Request,
                         record: CurrentSession) -> Response:
        """A ``train`` or ``answer`` message; the reply is the next query or ``trained``.
        The level is persisted before the reply is sent."""
        async with receiver.body(request, _OCTET, manager.body_limit(record, "rounds"),
                                 owner=record.key_id) as body:
            reply = await run_in_threadpool(lambda: manager.round(record, body.read()))
        return Response(reply, media_type=_OCTET)

    @training.get("/rounds/current", responses=_MESSAGE_REPLY)
    def current_round(record: CurrentSession) -> Response:
        """The reply to the last training request: the open query, or ``trained``."""
        return Response(manager.current_reply(record), media_type=_OCTET)

    @training.post("/predict", responses=_MESSAGE_REPLY, openapi_extra=_MESSAGE_BODY)
    async def predict(request: Request,
                      record: CurrentSession) -> Response:
        """A ``predict`` message (GIPE-encrypted rows); the reply holds encrypted leaf counts."""
        limit = manager.body_limit(record, "predict")
        async with receiver.body(request, _OCTET, limit, owner=record.key_id) as body:
            reply = await run_in_threadpool(lambda: manager.predict(record, body.read()))
        return Response(reply, media_type=_OCTET)

    for router in (health, sessions, uploads, training):
        app.include_router(router)

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError) -> JSONResponse:
        busy = exc.status == 503 or exc.code == "key_busy"
        headers = {"Retry-After": "1"} if busy else None
        if exc.status == 413 and request.headers.get("expect", "").lower() == "100-continue":
            headers = {"Connection": "close"}  # the body it held back is not wanted
        if exc.status == 499:
            _log.info("client disconnected mid-body on %s %s", request.method,
                      request.url.path)
        return JSONResponse({"error": exc.code, "detail": exc.message}, status_code=exc.status,
                            headers=headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": "invalid_request", "detail": _validation_text(
            exc.errors())}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 404:
            detail = f"no endpoint {request.method} {request.url.path}"
        return JSONResponse({"error": code, "detail": detail}, status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        _log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse({"error": "internal", "detail": f"internal server error "
                             f"({type(exc).__name__}); the server keeps serving"},
                            status_code=500)

    app.add_middleware(RequestLog, metrics=manager.metrics)
    app.state.manager = manager
    app.state.receiver = receiver
    return app


def _validation_text(errors) -> str:
    parts = []
    for error in errors:
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
        parts.append(f"{where or 'request'}: {error.get('msg', 'invalid')}")
    return "; ".join(parts)
