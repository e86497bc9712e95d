"""The private-forest server as a network service (server side only).

* :mod:`~cipherforest.service.app` — the FastAPI app (``cipherforest serve``) over
  :class:`~cipherforest.service.sessions.SessionManager`, which wraps the transport-free
  :class:`~cipherforest.privacy.PrivateForestServer` with auth, limits, per-key quotas
  (:mod:`~cipherforest.service.keys`), memory residency (:mod:`~cipherforest.service.memory`)
  and persistence (:class:`~cipherforest.service.storage.Storage`: session folders of
  atomically written files, indexed by SQLite, :mod:`~cipherforest.service.index`).
* :mod:`~cipherforest.service.bodies` — request bodies streamed to disk against per-route
  limits; :mod:`~cipherforest.service.metrics` — ``/metrics`` and the JSON request log.
* :mod:`~cipherforest.service.serve` — building and running the app;
  :mod:`~cipherforest.service.supervisor` — the parent process that restarts it to give
  memory back.

The client's side of HTTP is :class:`cipherforest.privacy.protocol.HTTPTransport` (standard
library only: the client needs no web framework). The server side needs the ``service``
extra: ``pip install "cipherforest[service]"``.
"""

__all__: list[str] = []
