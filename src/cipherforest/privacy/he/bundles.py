"""The byte format of homomorphic key bundles: public (for the server) and secret (0600 files).

A bundle is ``magic | u32 header length | JSON {part: size} | parts``; loading checks the magic,
that exactly the expected parts are present and that their sizes add up to the data, and
raises :class:`~.schemes.HEError` otherwise. The fingerprint of the public bundle names the
homomorphic context in every protocol message.
"""

from __future__ import annotations

import hashlib
import json
import struct

from .schemes import HEError

__all__ = ["BUNDLE_MAGIC", "PUBLIC_PARTS", "SECRET_MAGIC", "SECRET_PARTS", "fingerprint",
           "pack_bundle",
           "unpack_bundle"]

BUNDLE_MAGIC = b"CFHE1\n"
PUBLIC_PARTS = ("params", "public_key", "relin_keys", "galois_keys")
SECRET_MAGIC = b"CFHESECRET2\n"
SECRET_PARTS = (*PUBLIC_PARTS, "secret_key")


def fingerprint(bundle: bytes) -> str:
    return hashlib.sha256(bundle).hexdigest()[:32]


def pack_bundle(parts: dict[str, bytes], names: tuple[str, ...] = PUBLIC_PARTS,
                 magic: bytes = BUNDLE_MAGIC) -> bytes:
    header = json.dumps({name: len(parts[name]) for name in names}).encode()
    return magic + struct.pack("<I", len(header)) + header + b"".join(
        parts[name] for name in names)


def unpack_bundle(data: bytes, names: tuple[str, ...] = PUBLIC_PARTS,
                   magic: bytes = BUNDLE_MAGIC) -> dict[str, bytes]:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise HEError(f"a public context must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if not data.startswith(magic) or len(data) < len(magic) + 4:
        raise HEError("not a cipherforest public context (bad magic)")
    offset = len(magic)
    (header_size,) = struct.unpack_from("<I", data, offset)
    offset += 4
    try:
        sizes = json.loads(data[offset: offset + header_size])
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise HEError("public context header is not valid JSON") from None
    if not isinstance(sizes, dict) or sorted(sizes) != sorted(names) or not all(
            isinstance(sizes[k], int) and sizes[k] >= 0 for k in names):
        raise HEError(f"a public context holds exactly the parts {names}")
    offset += header_size
    if offset + sum(sizes.values()) != len(data):
        raise HEError("public context is truncated or has trailing bytes")
    parts = {}
    for name in names:
        parts[name] = data[offset: offset + sizes[name]]
        offset += sizes[name]
    return parts
