"""The encrypted-forest protocol: messages, parameters, planning, decisions, both sides.

* :mod:`.messages` — :class:`Message` and its byte format (:func:`encode_message`,
  :func:`decode_message`, :func:`verify_message_file` for a stored one), :class:`ProtocolError`.
* :mod:`.params` — the one table of the forest's parameters (:data:`PARAMETERS`) and the
  validated :class:`ForestSpec` a ``setup`` message carries.
* :mod:`.planner` — the label-free growth plan that server and client both compute.
* :mod:`.decisions` — the client's split choices from the squares of decrypted counts.
* :mod:`.replies` — the client's checked reading of decrypted replies.
* :mod:`.transport` — the :class:`Transport` protocol, :class:`InProcessTransport`;
  :mod:`.http` — :class:`HTTPTransport` to a ``cipherforest serve`` process.
* :mod:`.session` — :class:`ClientSession`: ``encrypt / upload / train / predict_proba``;
  :func:`new_gipe_encryptor`, the unfitted encryptor an estimator's fit uses.
* :mod:`.server` — :class:`PrivateForestServer` and its sessions.

The names are imported on first use (SEAL and numba load only when needed).
"""

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

_MODULES = {  # submodule -> the public names it defines
    ".messages": ("MAX_MESSAGE_BYTES", "Message", "ProtocolError", "decode_message",
                  "encode_message", "message_header", "verify_message_file"),
    ".params": ("PARAMETERS", "SPLIT_SELECTIONS", "ForestSpec", "check_selection_params",
                "constraints", "forest_meta"),
    ".planner": ("route_tree_rows",),
    ".transport": ("InProcessTransport", "ResumableTransport", "Transport"),
    ".http": ("HTTPTransport", "ServiceRequestError", "ServiceTLSError",
              "ServiceUnavailableError"),
    ".session": ("ClientSession", "ProtocolStats", "new_gipe_encryptor"),
    ".server": ("PrivateForestServer", "SessionState", "ShardError"),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers see the names (X as X marks a re-export)
    from .http import HTTPTransport as HTTPTransport
    from .http import ServiceRequestError as ServiceRequestError
    from .http import ServiceTLSError as ServiceTLSError
    from .http import ServiceUnavailableError as ServiceUnavailableError
    from .messages import MAX_MESSAGE_BYTES as MAX_MESSAGE_BYTES
    from .messages import Message as Message
    from .messages import ProtocolError as ProtocolError
    from .messages import decode_message as decode_message
    from .messages import encode_message as encode_message
    from .messages import message_header as message_header
    from .messages import verify_message_file as verify_message_file
    from .params import PARAMETERS as PARAMETERS
    from .params import SPLIT_SELECTIONS as SPLIT_SELECTIONS
    from .params import ForestSpec as ForestSpec
    from .params import check_selection_params as check_selection_params
    from .params import constraints as constraints
    from .params import forest_meta as forest_meta
    from .planner import route_tree_rows as route_tree_rows
    from .server import PrivateForestServer as PrivateForestServer
    from .server import SessionState as SessionState
    from .server import ShardError as ShardError
    from .session import ClientSession as ClientSession
    from .session import ProtocolStats as ProtocolStats
    from .session import new_gipe_encryptor as new_gipe_encryptor
    from .transport import InProcessTransport as InProcessTransport
    from .transport import ResumableTransport as ResumableTransport
    from .transport import Transport as Transport
