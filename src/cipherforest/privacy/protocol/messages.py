"""Wire format of the encrypted-forest protocol: typed messages as bytes, never pickles.

Client and server exchange nothing but :class:`Message` objects serialised by
:func:`encode_message`; the network service only moves these bytes. A message is::

    b"CFMSG1\\n" | u32 header length | JSON header | body

The JSON header names the message ``kind`` and carries small ``meta`` values (numbers, strings,
lists), the layout of the body's numeric ``arrays`` (name, dtype, shape) and ``blobs`` (named
lists of opaque byte strings such as serialised ciphertexts), and a SHA-256 digest of the rest
of the header (canonical JSON) and the body. The digest detects corruption and truncation; it
is not a MAC (authenticity is the transport's job, e.g. TLS).
:func:`decode_message` checks every part (magic, JSON, allowed dtypes, sizes adding up to the
body length exactly, digest) before anything is interpreted, and raises
:class:`ProtocolError` naming the problem.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Message", "ProtocolError", "decode_message", "encode_message", "MAX_MESSAGE_BYTES",
           "message_header", "verify_message_file"]

_MAGIC = b"CFMSG1\n"
_ALLOWED_DTYPES = ("int8", "uint8", "int32", "int64", "float64")
MAX_MESSAGE_BYTES = 8 << 30
_MAX_HEADER_BYTES = 16 << 20


class ProtocolError(ValueError):
    """A message that is malformed, tampered with, or not valid in the protocol's state."""


@dataclass
class Message:
    """One protocol message: a kind, small metadata, numeric arrays and byte blobs."""

    kind: str
    meta: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    blobs: dict[str, list[bytes]] = field(default_factory=dict)

    def array(self, name: str, dtype: str, ndim: int) -> np.ndarray:
        """The array ``name``, required to exist with the given dtype and dimension."""
        if name not in self.arrays:
            raise ProtocolError(f"{self.kind} message lacks array {name!r}")
        value = self.arrays[name]
        if value.dtype != np.dtype(dtype) or value.ndim != ndim:
            raise ProtocolError(f"{self.kind} message: array {name!r} must be {ndim}-d "
                                f"{dtype}, got {value.ndim}-d {value.dtype}")
        return value

    def blob_list(self, name: str) -> list[bytes]:
        if name not in self.blobs:
            raise ProtocolError(f"{self.kind} message lacks blobs {name!r}")
        return self.blobs[name]

    def value(self, name: str, kind: type | tuple[type, ...]):
        """The metadata value ``name``, required to exist with the given Python type."""
        if name not in self.meta:
            raise ProtocolError(f"{self.kind} message lacks field {name!r}")
        value = self.meta[name]
        if isinstance(value, bool) and kind is not bool:
            raise ProtocolError(f"{self.kind} message: field {name!r} has the wrong type")
        if not isinstance(value, kind):
            raise ProtocolError(f"{self.kind} message: field {name!r} must be "
                                f"{getattr(kind, '__name__', kind)}, got {type(value).__name__}")
        return value


def encode_message(message: Message) -> bytes:
    """Serialise ``message`` (arrays little-endian, C order)."""
    array_specs, parts = [], []
    for name, value in message.arrays.items():
        value = np.asarray(value)
        if not value.flags.c_contiguous:
            value = value.copy(order="C")
        if value.dtype.name not in _ALLOWED_DTYPES:
            raise TypeError(f"array {name!r}: dtype {value.dtype} is not allowed")
        data = value.astype(value.dtype.newbyteorder("<"), copy=False).tobytes()
        array_specs.append({"name": name, "dtype": value.dtype.name,
                            "shape": list(value.shape), "size": len(data)})
        parts.append(data)
    blob_specs = []
    for name, items in message.blobs.items():
        sizes = [len(item) for item in items]
        blob_specs.append({"name": name, "sizes": sizes})
        parts.extend(bytes(item) for item in items)
    body = b"".join(parts)
    header = {"kind": message.kind, "meta": message.meta, "arrays": array_specs,
              "blobs": blob_specs}
    header["sha256"] = _digest(header, body)
    encoded = json.dumps(header, allow_nan=False, separators=(",", ":")).encode()
    return _MAGIC + struct.pack("<I", len(encoded)) + encoded + body


def _digest(header: dict, body) -> str:
    """SHA-256 of the header without its digest (canonical JSON) followed by the body."""
    digest = _digest_of_header(header)
    digest.update(body)
    return digest.hexdigest()


def _digest_of_header(header: dict):
    """A SHA-256 object fed with the header without its digest, in canonical JSON: the body
    follows."""
    fields = {key: header[key] for key in ("kind", "meta", "arrays", "blobs")}
    try:
        canonical = json.dumps(fields, allow_nan=False, sort_keys=True,
                               separators=(",", ":"))
    except (ValueError, RecursionError):
        raise ProtocolError("message header cannot be put in canonical form") from None
    return hashlib.sha256(canonical.encode())


def _check_kind(kind: str, expected_kind: str | tuple[str, ...] | None) -> None:
    if expected_kind is not None:
        allowed = (expected_kind,) if isinstance(expected_kind, str) else expected_kind
        if kind not in allowed:
            raise ProtocolError(f"expected a {' or '.join(allowed)} message, got {kind!r}")


def _read_header(read_at, total: int) -> tuple[dict, int]:
    """``(header, body offset)`` of a message of ``total`` bytes whose bytes ``read_at(offset,
    size)`` returns: magic, header size, JSON, the header's fields, and a body length equal
    to what the header describes, all checked."""
    if total > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {total} bytes exceeds the limit of "
                            f"{MAX_MESSAGE_BYTES}")
    prefix = read_at(0, len(_MAGIC) + 4)
    if len(prefix) < len(_MAGIC) + 4 or prefix[: len(_MAGIC)] != _MAGIC:
        raise ProtocolError("not a cipherforest protocol message (bad magic or too short)")
    (header_size,) = struct.unpack_from("<I", prefix, len(_MAGIC))
    start = len(_MAGIC) + 4
    if header_size > _MAX_HEADER_BYTES or start + header_size > total:
        raise ProtocolError("message header is truncated or too large")
    try:
        header = json.loads(read_at(start, header_size), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise ProtocolError(f"message header is not valid JSON: {exc}") from None
    except RecursionError:
        raise ProtocolError("message header is nested too deeply") from None
    _check_header(header)
    body_size = total - start - header_size
    expected = sum(s["size"] for s in header["arrays"]) + sum(
        sum(s["sizes"]) for s in header["blobs"])
    if body_size != expected:
        raise ProtocolError(f"message body has {body_size} bytes, its header describes "
                            f"{expected}: truncated or padded")
    return header, start + header_size


def message_header(data: bytes | memoryview) -> dict:
    """The checked header of the message ``data`` — ``kind``, ``meta``, and the ``arrays``
    (name, dtype, shape, size) and ``blobs`` (name, sizes) its body holds — without
    decoding the body or checking its digest: what a receiver checks against its limits
    before it allocates anything for the arrays.

    Raises
    ------
    ProtocolError
        Wrong magic, malformed header, or sizes that do not add up to the body's length.
    """
    data = memoryview(data).cast("B")
    header, _ = _read_header(lambda offset, size: bytes(data[offset: offset + size]),
                             len(data))
    return header


def verify_message_file(path: str | os.PathLike,
                        expected_kind: str | tuple[str, ...] | None = None) -> dict:
    """Check a message stored in a file as :func:`decode_message` would — magic, header,
    sizes, digest, kind — reading its body in 1 MiB pieces, so that a file of any size costs
    1 MiB of memory to refuse (its pages stay in the kernel's cache, outside the process);
    its header (:func:`message_header`).

    Raises
    ------
    ProtocolError
        As :func:`decode_message`.
    OSError
        The file cannot be read.
    """
    with open(path, "rb") as file:
        fd = file.fileno()
        header, start = _read_header(lambda offset, size: os.pread(fd, size, offset),
                                     os.fstat(fd).st_size)
        digest = _digest_of_header(header)
        buffer = bytearray(1 << 20)
        view = memoryview(buffer)
        file.seek(start)
        while True:
            read = file.readinto(buffer)
            if not read:
                break
            digest.update(view[:read])
    if digest.hexdigest() != header["sha256"]:
        raise ProtocolError("message does not match its SHA-256 digest: corrupted or "
                            "tampered with in transit")
    _check_kind(header["kind"], expected_kind)
    return header


def _reject_constant(name: str):
    raise ValueError(f"{name} is not allowed in a message header")


def decode_message(data: bytes, expected_kind: str | tuple[str, ...] | None = None) -> Message:
    """Parse and verify bytes made by :func:`encode_message`.

    Raises
    ------
    ProtocolError
        Wrong magic, truncated or oversized data, malformed header, a body that does not match
        its digest (tampered or truncated), or a kind other than ``expected_kind``.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ProtocolError(f"a message must be bytes, got {type(data).__name__}")
    data = memoryview(data)
    if not data.contiguous:
        data = memoryview(data.tobytes())
    data = data.cast("B")
    header, start = _read_header(lambda offset, size: bytes(data[offset: offset + size]),
                                 len(data))
    body = data[start:]
    digest = _digest_of_header(header)
    digest.update(body)
    if digest.hexdigest() != header["sha256"]:
        raise ProtocolError("message does not match its SHA-256 digest: corrupted or "
                            "tampered with in transit")
    kind = header["kind"]
    _check_kind(kind, expected_kind)
    arrays, offset = {}, 0
    for spec in header["arrays"]:
        dtype = np.dtype(spec["dtype"]).newbyteorder("<")
        count = math.prod(spec["shape"])  # Python ints: no overflow
        if count * dtype.itemsize != spec["size"]:
            raise ProtocolError(f"array {spec['name']!r}: shape {spec['shape']} does not "
                                f"match {spec['size']} bytes")
        raw = np.frombuffer(body, dtype=dtype, count=count, offset=offset)
        arrays[spec["name"]] = raw.astype(dtype.newbyteorder("="), copy=True).reshape(
            spec["shape"])
        offset += spec["size"]
    blobs = {}
    for spec in header["blobs"]:
        items = []
        for size in spec["sizes"]:
            items.append(bytes(body[offset: offset + size]))
            offset += size
        blobs[spec["name"]] = items
    return Message(kind, header["meta"], arrays, blobs)


def _check_header(header: Any) -> None:
    if not isinstance(header, dict) or set(header) != {"kind", "meta", "arrays", "blobs",
                                                       "sha256"}:
        raise ProtocolError("message header must hold exactly kind, meta, arrays, blobs, "
                            "sha256")
    if not isinstance(header["kind"], str) or not isinstance(header["meta"], dict):
        raise ProtocolError("message header: kind must be a string and meta an object")
    if not isinstance(header["sha256"], str):
        raise ProtocolError("message header: sha256 must be a string")
    names = set()
    for spec in header["arrays"] if isinstance(header["arrays"], list) else [None]:
        if (not isinstance(spec, dict) or set(spec) != {"name", "dtype", "shape", "size"}
                or not isinstance(spec["name"], str) or spec["dtype"] not in _ALLOWED_DTYPES
                or not isinstance(spec["shape"], list) or len(spec["shape"]) > 32
                or not all(type(d) is int and d >= 0 for d in spec["shape"])
                or type(spec["size"]) is not int or spec["size"] < 0):
            raise ProtocolError("message header: malformed array description")
        if spec["name"] in names:
            raise ProtocolError(f"message header: array {spec['name']!r} appears twice")
        names.add(spec["name"])
    blob_names = set()
    for spec in header["blobs"] if isinstance(header["blobs"], list) else [None]:
        if (not isinstance(spec, dict) or set(spec) != {"name", "sizes"}
                or not isinstance(spec["name"], str) or not isinstance(spec["sizes"], list)
                or not all(type(s) is int and s >= 0 for s in spec["sizes"])):
            raise ProtocolError("message header: malformed blob description")
        if spec["name"] in blob_names:
            raise ProtocolError(f"message header: blobs {spec['name']!r} appear twice")
        blob_names.add(spec["name"])
