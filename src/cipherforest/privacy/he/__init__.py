"""Homomorphic encryption of labels over Microsoft SEAL.

* :mod:`.schemes` — CKKS and BFV, one class each, looked up by name in :data:`SCHEMES`.
* :mod:`.contexts` — :class:`SecretContext` (the data owner's keys) and
  :class:`PublicContext` (the server's evaluation-only view).
* :mod:`.bundles` — the byte format of public and secret key bundles.
* :mod:`.blocks` — :class:`BlockLayout`, the slot layout of packed labels, query blocks,
  the leaf store and row sums, shared by client and server.
"""

from .blocks import BlockLayout
from .contexts import PublicContext, SecretContext
from .schemes import SCHEMES, HEError, HEScheme, scheme_named

__all__ = ["BlockLayout", "HEError", "HEScheme", "PublicContext", "SCHEMES", "SecretContext",
           "scheme_named"]
