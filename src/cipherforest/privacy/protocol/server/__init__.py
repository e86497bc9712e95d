"""The encrypted-forest server, transport-free: bytes in, bytes out.

* :mod:`.server` — :class:`PrivateForestServer`: dispatch of protocol messages, the sessions
  it holds, and their state exported for persistence and restored after a restart.
* :mod:`.session` — :class:`ServerSession`, one client's forest.
* :mod:`.labels` — the label rotations held per row and the sums over them.
* :mod:`.level` — the encrypted work of one tree level (leaf sums, packed query blocks).
* :mod:`.growth` — trees grown without rounds (``"rr"``, ``"blind"``) in compiled code.
* :mod:`.routing` — the compiled walk: leaf ids of cipher rows in every tree.
* :mod:`.dask_levels` (with ``cipherforest[dask]``) and :mod:`.shards` — the same work on
  Dask workers holding shards of rows.
* :mod:`.row_sums` — predictions summed over the trees on the server (CKKS).
* :mod:`.state` — :class:`SessionState`, a session's training state as arrays and bytes.
"""

from .server import MAX_LABEL_CHUNK, PrivateForestServer
from .session import SESSION_STATES, ServerSession, ServerStats
from .shards import ShardError
from .state import SessionState, state_from_arrays, state_to_arrays

__all__ = ["MAX_LABEL_CHUNK", "PrivateForestServer", "SESSION_STATES", "ServerSession",
           "ServerStats", "SessionState", "ShardError", "state_from_arrays",
           "state_to_arrays"]
