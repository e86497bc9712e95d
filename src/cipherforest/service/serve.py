"""``cipherforest serve``: the access key and the uvicorn process around the app."""

from __future__ import annotations

import json
import logging
import os
import secrets
import sys

from .sessions import Limits, SessionManager
from .storage import Storage

__all__ = ["ACCESS_KEY_ENV", "ACCESS_KEY_FILE", "LOGGERS", "JSONLines", "build_app",
           "dask_cluster", "load_access_key", "log_json_to", "serve", "uvicorn_config"]

ACCESS_KEY_ENV = "CIPHERFOREST_SERVER_KEY"
ACCESS_KEY_FILE = "access_key"


def load_access_key(data_dir: str, out=sys.stdout) -> str:
    """The server's access key: ``$CIPHERFOREST_SERVER_KEY``, else the key file under
    ``data_dir``, else a new random key written there (mode 0600 from its creation) and
    printed once."""
    key = os.environ.get(ACCESS_KEY_ENV, "").strip()
    if key:
        return key
    os.makedirs(data_dir, mode=0o700, exist_ok=True)
    path = os.path.join(data_dir, ACCESS_KEY_FILE)
    try:
        with open(path, encoding="ascii") as file:
            key = file.read().strip()
        if not key:
            raise ValueError(f"{path} is empty: delete it to generate a new key, or set "
                             f"{ACCESS_KEY_ENV}")
        return key
    except FileNotFoundError:
        pass
    key = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as file:
        file.write(key + "\n")
        file.flush()
        os.fsync(file.fileno())
    print(f"generated the server access key (saved 0600 in {path}; shown only now):\n{key}",
          file=out, flush=True)
    return key


def build_app(data_dir: str, access_key: str | None, limits: Limits | None = None,
              n_jobs: int | None = None, dask_client=None):
    """The FastAPI app over a session manager on ``data_dir`` (``access_key``: the default
    key, or None for per-user keys only; ``n_jobs``: worker processes per tree level;
    ``dask_client``: a Dask client doing the level work instead, see
    :class:`~cipherforest.service.sessions.SessionManager`)."""
    from .app import create_app

    return create_app(SessionManager(Storage(data_dir), access_key, limits, n_jobs=n_jobs,
                                     dask_client=dask_client))


def uvicorn_config(app, host: str = "127.0.0.1", port: int = 0, **options):
    """uvicorn's settings for an app of :func:`build_app`: its h11 protocol guarded by a
    :class:`~.connections.ConnectionGuard` with the manager's header deadline and keyless
    caps, no access log of uvicorn's own (the app logs each request) and no logging setup
    of uvicorn's (its loggers go through :func:`serve`'s JSON handler). ``options``:
    further ``uvicorn.Config`` arguments."""
    import uvicorn

    from .connections import ConnectionGuard

    limits = app.state.manager.limits
    guard = ConnectionGuard(limits.header_timeout, limits.max_keyless_per_ip,
                            max(4 * limits.max_keyless_per_ip, 128))
    app.state.connection_guard = guard
    return uvicorn.Config(app, host=host, port=port, http=guard.protocol_class(),
                          log_config=None, log_level="warning", access_log=False, **options)


def dask_cluster(scheduler: str | None, workers: int | None):
    """``(client, cluster)`` for ``--dask-scheduler`` (a client of that scheduler, no
    cluster) or ``--dask-workers`` (a local cluster of that many single-threaded worker
    processes, and its client); ``(None, None)`` without either.

    Raises
    ------
    OSError
        The scheduler cannot be reached.
    """
    if scheduler is None and workers is None:
        return None, None
    from distributed import Client, LocalCluster

    # Operators see where the shards go, each level's bytes and seconds, and recoveries.
    dask_log = logging.getLogger("cipherforest.privacy.dask")
    if not dask_log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: "
                                               "%(message)s"))
        dask_log.addHandler(handler)
        dask_log.setLevel(logging.INFO)

    if scheduler is not None:
        try:
            return Client(scheduler, timeout="10s", set_as_default=False), None
        except (OSError, TimeoutError) as exc:
            raise OSError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    return Client(cluster, set_as_default=False), cluster


class JSONLines(logging.Formatter):
    """Log records as JSON lines: access lines (JSON already) as they are, others as
    ``{"time", "level", "logger", "message"}`` and, with a traceback, ``"exception"``
    (the traceback's text in the one line)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.name == "cipherforest.service.access":
            return message
        line = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname,
                "logger": record.name, "message": message}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = record.stack_info
        return json.dumps(line, separators=(",", ":"))


#: The loggers whose records :func:`serve` writes (uvicorn's own included).
LOGGERS = ("cipherforest.service", "uvicorn", "uvicorn.error", "uvicorn.access",
           "uvicorn.asgi")


def log_json_to(stream) -> None:
    """Write the service's log records and uvicorn's own (:data:`LOGGERS`) to ``stream``,
    one JSON object a line (:class:`JSONLines`)."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JSONLines())
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler] if name in ("cipherforest.service", "uvicorn") else []
        logger.propagate = name not in ("cipherforest.service", "uvicorn")
    logging.getLogger("cipherforest.service").setLevel(logging.INFO)
    logging.getLogger("uvicorn").setLevel(logging.INFO)


def serve(host: str = "127.0.0.1", port: int = 8000, data_dir: str = "cipherforest-data",
          limits: Limits | None = None, out=sys.stdout, n_jobs: int | None = None, *,
          default_key: bool = True, ssl_certfile: str | None = None,
          ssl_keyfile: str | None = None, limit_concurrency: int | None = None,
          log_stream=sys.stderr, sock=None, restart_above: int = 0,
          restart_idle: float = 60.0, dask_scheduler: str | None = None,
          dask_workers: int | None = None) -> int:
    """Run the service until interrupted (loopback by default); the exit code.

    Parameters
    ----------
    n_jobs : int or None
        Worker processes per tree level.
    default_key : bool, default=True
        Accept the server's default access key (``$CIPHERFOREST_SERVER_KEY`` or the
        generated key file); False: only the per-user keys of ``serve keys``.
    ssl_certfile, ssl_keyfile : str or None
        PEM certificate (chain) and private key: serve HTTPS (uvicorn's own TLS).
    limit_concurrency : int or None
        Connections and tasks at once beyond which uvicorn answers 503.
    log_stream : file
        Where the JSON log lines go (one per request).
    sock : socket or None
        A bound, listening socket to serve on (from :func:`.supervisor.supervise`) instead
        of ``host:port``.
    dask_scheduler, dask_workers
        Do the level work on Dask (:func:`dask_cluster`): a scheduler's address, or a
        local cluster of that many worker processes.
    restart_above, restart_idle
        With ``sock``: stop with :data:`.supervisor.RESTART_EXIT_CODE` once no session is
        in memory, no request has come for ``restart_idle`` seconds, and the resident
        memory has grown more than ``restart_above`` bytes since the start (0: never).
    """
    os.umask(0o077)  # whatever the server creates is its own
    log_json_to(log_stream)
    key = load_access_key(data_dir, out) if default_key else None
    client, cluster = dask_cluster(dask_scheduler, dask_workers)
    try:
        return _run(host, port, build_app(data_dir, key, limits, n_jobs, client), out,
                    data_dir, client, ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile,
                    limit_concurrency=limit_concurrency, sock=sock,
                    restart_above=restart_above, restart_idle=restart_idle)
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


def _run(host: str, port: int, app, out, data_dir: str, client, *, ssl_certfile,
         ssl_keyfile, limit_concurrency, sock, restart_above: int,
         restart_idle: float) -> int:
    """Serve ``app`` with uvicorn until it stops; the exit code (:func:`serve`)."""
    import uvicorn

    from .supervisor import RESTART_EXIT_CODE, RestartWhenIdle

    if sock is None:
        scheme = "https" if ssl_certfile else "http"
        where = ("" if client is None else
                 f"; label work on Dask at {client.scheduler.address}, "
                 f"{len(client.ncores())} workers")
        print(f"cipherforest server on {scheme}://{host}:{port} (data in "
              f"{os.path.abspath(data_dir)}{where})", file=out, flush=True)
    server = uvicorn.Server(uvicorn_config(
        app, host, port, ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile,
        limit_concurrency=limit_concurrency))
    restart = None
    if sock is not None and restart_above > 0:
        manager = app.state.manager

        def idle_seconds() -> float:
            return 0.0 if len(manager.residency) else manager.metrics.idle_seconds()

        restart = RestartWhenIdle(idle_seconds, lambda: setattr(server, "should_exit", True),
                                  restart_above, restart_idle)
    try:
        server.run(sockets=None if sock is None else [sock])
    finally:
        if restart is not None:
            restart.close()
    return RESTART_EXIT_CODE if restart is not None and restart.requested else 0
