"""``cipherforest serve``: the access key and the uvicorn process around the app."""

from __future__ import annotations

import logging
import os
import secrets
import sys

from .sessions import Limits, SessionManager
from .storage import Storage

__all__ = ["ACCESS_KEY_ENV", "ACCESS_KEY_FILE", "build_app", "dask_cluster", "load_access_key",
           "serve"]

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


def build_app(data_dir: str, access_key: str, limits: Limits | None = None,
              n_jobs: int | None = None, dask_client=None):
    """The FastAPI app over a session manager on ``data_dir`` (``n_jobs``: worker processes
    per tree level; ``dask_client``: a Dask client doing the level work instead, see
    :class:`~cipherforest.service.sessions.SessionManager`)."""
    from .app import create_app

    return create_app(SessionManager(Storage(data_dir), access_key, limits, n_jobs=n_jobs,
                                     dask_client=dask_client))


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


def serve(host: str = "127.0.0.1", port: int = 8000, data_dir: str = "cipherforest-data",
          limits: Limits | None = None, out=sys.stdout, n_jobs: int | None = None,
          dask_scheduler: str | None = None, dask_workers: int | None = None) -> None:
    """Run the service until interrupted (loopback by default); ``n_jobs`` worker processes
    per tree level, or the level work on Dask (:func:`dask_cluster`)."""
    import uvicorn

    key = load_access_key(data_dir, out)
    client, cluster = dask_cluster(dask_scheduler, dask_workers)
    try:
        app = build_app(data_dir, key, limits, n_jobs, client)
        where = ("" if client is None else
                 f"; label work on Dask at {client.scheduler.address}, "
                 f"{len(client.ncores())} workers")
        print(f"cipherforest server on http://{host}:{port} (data in "
              f"{os.path.abspath(data_dir)}{where})", file=out, flush=True)
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
