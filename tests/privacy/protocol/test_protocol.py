"""Wire format of the encrypted-forest protocol (``cipherforest.privacy.protocol``).

Proves: :class:`Message` objects with arrays of every allowed dtype (any shape, byte order or
memory layout), byte blobs and JSON metadata survive ``encode_message``/``decode_message``
exactly (also on hypothesis-generated arrays); ``decode_message`` raises
:class:`ProtocolError` — never another exception — for non-bytes input, a bad magic, every
truncation and padding of a message, any flipped body byte (digest), header garbage, headers
whose sizes do not add up or describe disallowed dtypes, and a kind other than the expected
one; ``Message.array/value/blob_list`` raise ProtocolError for missing or wrongly typed entries.
"""

from __future__ import annotations

import hashlib
import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cipherforest.privacy.protocol import Message, ProtocolError, decode_message, encode_message
from cipherforest.privacy.protocol import messages as protocol

MAGIC = b"CFMSG1\n"
ALLOWED = ("int8", "uint8", "int32", "int64", "float64")


def _small_message() -> Message:
    return Message("answer", {"session": "ab12", "round": 3, "token": "t"},
                   {"node": np.array([1, 2, 5], dtype=np.int64),
                    "flag": np.array([[1, 0]], dtype=np.uint8)},
                   {"squares": [b"xyz", b"", b"\x00\x01"]})


def _split(data: bytes) -> tuple[dict, bytes, int]:
    """(header, body, offset of the body) of an encoded message."""
    (size,) = struct.unpack_from("<I", data, len(MAGIC))
    start = len(MAGIC) + 4
    return json.loads(data[start: start + size]), data[start + size:], start + size


def _raw(header, body: bytes = b"") -> bytes:
    """A message from a header (dict, or raw bytes) and a body, bypassing encode_message."""
    if not isinstance(header, bytes):
        header = json.dumps(header).encode()
    return MAGIC + struct.pack("<I", len(header)) + header + body


def _header(arrays=(), blobs=(), body=b"", kind="probe", meta=None) -> dict:
    """A well-formed header whose digest matches it and ``body``: SHA-256 of the header's
    other fields as canonical JSON (sorted keys, no spaces) followed by the body."""
    header = {"kind": kind, "meta": {} if meta is None else meta, "arrays": list(arrays),
              "blobs": list(blobs)}
    canonical = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    header["sha256"] = hashlib.sha256(canonical + body).hexdigest()
    return header


def _assert_same(decoded: Message, original: Message) -> None:
    assert decoded.kind == original.kind
    assert decoded.meta == original.meta
    assert list(decoded.arrays) == list(original.arrays)
    for name, value in original.arrays.items():
        got = decoded.arrays[name]
        assert got.dtype == np.dtype(value.dtype.name)  # native byte order
        assert got.shape == value.shape
        np.testing.assert_array_equal(got, value)
    assert decoded.blobs == {k: [bytes(b) for b in v] for k, v in original.blobs.items()}


# ---------------------------------------------------------------------- round trips
@pytest.mark.parametrize("dtype", ALLOWED)
def test_round_trip_each_dtype(dtype):
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else np.finfo(dtype)
    values = np.array([info.min, 0, 1, info.max], dtype=dtype)
    if dtype == "float64":
        values = np.array([info.min, -0.0, np.pi, info.max, np.inf, -np.inf, info.tiny])
    message = Message("probe", {"n": 4}, {
        "flat": values,
        "matrix": np.arange(12).reshape(3, 4).astype(dtype),
        "cube": np.ones((2, 1, 3), dtype=dtype),
        "empty": np.zeros((0, 5), dtype=dtype),
        "single": np.array([7], dtype=dtype),
    })
    decoded = decode_message(encode_message(message))
    _assert_same(decoded, message)
    assert decoded.arrays["empty"].shape == (0, 5)


def test_round_trip_nan_bits():
    values = np.array([np.nan, 1.5])
    decoded = decode_message(encode_message(Message("p", arrays={"v": values})))
    assert np.isnan(decoded.arrays["v"][0]) and decoded.arrays["v"][1] == 1.5


def test_round_trip_big_endian_and_non_contiguous_arrays():
    big = np.arange(6, dtype=">i4").reshape(2, 3)
    strided = np.arange(20, dtype=np.float64).reshape(4, 5)[::2, 1::2]
    fortran = np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3))
    message = Message("p", arrays={"big": big, "strided": strided, "fortran": fortran})
    decoded = decode_message(encode_message(message))
    _assert_same(decoded, message)
    assert decoded.arrays["big"].dtype == np.dtype("int32")
    assert decoded.arrays["big"].dtype.isnative


def test_round_trip_blobs_and_meta():
    meta = {"session": "s", "round": 0, "x": -2.5, "flag": True, "none": None,
            "nested": {"a": [1, "two", [3.0]], "ü": "ünïcode ✓"}, "empty": {}}
    blobs = {"none": [], "one": [b""], "many": [b"a", bytes(range(256)), b"\x00" * 1000],
             "ba": [bytearray(b"xy")]}
    message = Message("setup", meta, {}, blobs)
    data = encode_message(message)
    assert data.startswith(MAGIC) and isinstance(data, bytes)
    _assert_same(decode_message(data), message)
    for wrapped in (bytearray(data), memoryview(data)):
        _assert_same(decode_message(wrapped), message)


def test_decoded_arrays_are_independent_writable_copies():
    data = bytearray(encode_message(Message("p", arrays={"a": np.arange(3)})))
    decoded = decode_message(data)
    decoded.arrays["a"][0] = 42  # writable
    data[-8:] = b"\xff" * 8
    assert decoded.arrays["a"].tolist() == [42, 1, 2]


def test_encoding_is_deterministic():
    assert encode_message(_small_message()) == encode_message(_small_message())


@pytest.mark.parametrize("dtype", ["float32", "bool", "int16", "uint64", "complex128", "object",
                                   "U3"])
def test_encode_rejects_disallowed_dtype(dtype):
    value = np.array([1, 0], dtype=dtype) if dtype != "U3" else np.array(["abc"])
    with pytest.raises(TypeError, match="is not allowed"):
        encode_message(Message("p", arrays={"a": value}))


def test_encode_rejects_nan_in_meta():
    with pytest.raises(ValueError):
        encode_message(Message("p", {"x": float("nan")}))


_array_strategy = hnp.arrays(
    dtype=st.sampled_from([np.dtype(d) for d in ALLOWED]),
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4))


@settings(max_examples=60, deadline=None)
@given(arrays=st.dictionaries(st.text(max_size=6), _array_strategy, max_size=4),
       blobs=st.dictionaries(st.text(max_size=6), st.lists(st.binary(max_size=20), max_size=3),
                             max_size=3),
       meta=st.dictionaries(st.text(max_size=6), st.one_of(
           st.integers(-2**53, 2**53), st.text(max_size=10), st.booleans(), st.none(),
           st.floats(allow_nan=False, allow_infinity=False)), max_size=4))
def test_round_trip_property(arrays, blobs, meta):
    message = Message("prop", meta, arrays, blobs)
    decoded = decode_message(encode_message(message), "prop")
    assert decoded.kind == "prop" and decoded.meta == meta and decoded.blobs == blobs
    assert set(decoded.arrays) == set(arrays)
    for name, value in arrays.items():
        assert decoded.arrays[name].dtype == value.dtype.newbyteorder("=")
        assert decoded.arrays[name].shape == value.shape
        np.testing.assert_array_equal(decoded.arrays[name], value)  # NaN == NaN here


# ---------------------------------------------------------------------- rejection
@pytest.mark.parametrize("data", ["CFMSG1\n", None, 17, [b"CFMSG1\n"], {"kind": "x"}],
                         ids=["str", "none", "int", "list", "dict"])
def test_decode_rejects_non_bytes(data):
    with pytest.raises(ProtocolError, match="must be bytes"):
        decode_message(data)


@pytest.mark.parametrize("data", [b"", b"CFMSG1", b"CFMSG1\n", b"CFMSG2\n" + b"\x00" * 20,
                                  b"cfmsg1\n" + b"\x00" * 20, b"\x00" * 64],
                         ids=["empty", "short-magic", "magic-only", "other-version",
                              "lowercase", "zeros"])
def test_decode_rejects_bad_magic(data):
    with pytest.raises(ProtocolError, match="bad magic or too short"):
        decode_message(data)


def test_decode_rejects_bad_magic_of_real_message():
    data = bytearray(encode_message(_small_message()))
    data[0] ^= 0x20
    with pytest.raises(ProtocolError, match="bad magic"):
        decode_message(bytes(data))


def test_every_truncation_raises_protocol_error():
    data = encode_message(_small_message())
    assert len(data) < 1000
    for cut in range(len(data)):
        try:
            decode_message(data[:cut])
        except ProtocolError:
            continue
        except Exception as exc:  # noqa: BLE001 - the point is the exception type
            pytest.fail(f"cut at {cut}: {type(exc).__name__}: {exc}")
        pytest.fail(f"cut at {cut} of {len(data)} was accepted")


@pytest.mark.parametrize("extra", [b"\x00", b"x" * 9, b"CFMSG1\n"])
def test_padding_raises_protocol_error(extra):
    with pytest.raises(ProtocolError, match="truncated or padded"):
        decode_message(encode_message(_small_message()) + extra)


def test_every_flipped_body_byte_fails_the_digest():
    data = encode_message(_small_message())
    _, body, offset = _split(data)
    assert len(body) > 20
    for pos in range(offset, len(data)):
        for bit in (0x01, 0x80):
            bad = bytearray(data)
            bad[pos] ^= bit
            with pytest.raises(ProtocolError, match="SHA-256 digest"):
                decode_message(bytes(bad))


def test_swapped_blobs_fail_the_digest():
    message = _small_message()
    data = encode_message(message)
    header, body, offset = _split(data)
    # Same sizes, other order: [b"xyz", b"", b"\x00\x01"] -> body tail differs.
    swapped = body[:-5] + b"\x00\x01" + b"xyz"
    header["blobs"][0]["sizes"] = [2, 0, 3]
    with pytest.raises(ProtocolError, match="digest"):
        decode_message(_raw(header, swapped))


@pytest.mark.parametrize("header", [b"{not json", b"\xff\xfe\xfd\xfc", b"", b"[1, 2",
                                    b'{"kind": "x",}', b"NaN garbage"],
                         ids=["brace", "non-utf8", "empty", "unclosed", "trailing-comma",
                              "words"])
def test_decode_rejects_header_garbage(header):
    with pytest.raises(ProtocolError, match="not valid JSON"):
        decode_message(_raw(header))


@pytest.mark.parametrize("header", [
    [], "text", 5, None,
    {"kind": "x", "meta": {}, "arrays": [], "blobs": []},
    {"kind": "x", "meta": {}, "arrays": [], "blobs": [], "sha256": "", "extra": 1},
])
def test_decode_rejects_header_without_exact_fields(header):
    with pytest.raises(ProtocolError, match="exactly kind, meta, arrays, blobs, sha256"):
        decode_message(_raw(header))


@pytest.mark.parametrize("change,match", [
    ({"kind": 5}, "kind must be a string"),
    ({"kind": None}, "kind must be a string"),
    ({"meta": []}, "meta an object"),
    ({"meta": "x"}, "meta an object"),
    ({"sha256": 12}, "sha256 must be a string"),
    ({"arrays": {}}, "malformed array description"),
    ({"arrays": "a"}, "malformed array description"),
    ({"blobs": {}}, "malformed blob description"),
    ({"blobs": 3}, "malformed blob description"),
])
def test_decode_rejects_wrongly_typed_header_fields(change, match):
    header = _header()
    header.update(change)
    with pytest.raises(ProtocolError, match=match):
        decode_message(_raw(header))


def _spec(**change):
    spec = {"name": "a", "dtype": "int64", "shape": [2], "size": 16}
    spec.update(change)
    return {k: v for k, v in spec.items() if v is not _DROP}


_DROP = object()


@pytest.mark.parametrize("spec", [
    _spec(dtype="float32"), _spec(dtype="bool"), _spec(dtype="object"), _spec(dtype="<i8"),
    _spec(dtype="O"), _spec(dtype="V16"), _spec(dtype=None), _spec(dtype="S16"),
], ids=["float32", "bool", "object", "<i8", "O", "void", "none", "bytes"])
def test_decode_rejects_disallowed_dtype(spec):
    body = b"\x00" * 16
    with pytest.raises(ProtocolError, match="malformed array description"):
        decode_message(_raw(_header([spec], body=body), body))


@pytest.mark.parametrize("spec", [
    _spec(shape=[-2]), _spec(shape=[2.0]), _spec(shape=["2"]), _spec(shape=2),
    _spec(size=-16), _spec(size=16.0), _spec(size="16"), _spec(name=3), _spec(name=None),
    _spec(size=_DROP), _spec(extra=1), "a", None, [],
], ids=["neg-dim", "float-dim", "str-dim", "int-shape", "neg-size", "float-size", "str-size",
        "int-name", "none-name", "no-size", "extra-key", "str", "none", "list"])
def test_decode_rejects_malformed_array_spec(spec):
    body = b"\x00" * 16
    with pytest.raises(ProtocolError, match="malformed array description"):
        decode_message(_raw(_header([spec], body=body), body))


@pytest.mark.parametrize("spec", [
    {"name": "b", "sizes": [-1]}, {"name": "b", "sizes": [1.0]}, {"name": "b", "sizes": 1},
    {"name": 1, "sizes": [1]}, {"name": "b"}, {"name": "b", "sizes": [1], "x": 0}, "b", None,
])
def test_decode_rejects_malformed_blob_spec(spec):
    with pytest.raises(ProtocolError, match="malformed blob description"):
        decode_message(_raw(_header(blobs=[spec], body=b"x"), b"x"))


def test_decode_rejects_duplicate_array_names():
    body = b"\x00" * 32
    specs = [_spec(), _spec()]
    with pytest.raises(ProtocolError, match="appears twice"):
        decode_message(_raw(_header(specs, body=body), body))


@pytest.mark.parametrize("arrays,blobs,body", [
    ([_spec()], [], b"\x00" * 15),  # one byte short
    ([_spec()], [], b"\x00" * 17),  # one byte extra
    ([], [{"name": "b", "sizes": [3, 4]}], b"abcdef"),
    ([], [{"name": "b", "sizes": [3, 4]}], b"abcdefgh"),
    ([_spec(size=2**70)], [], b""),
    ([_spec(size=0, shape=[0])], [{"name": "b", "sizes": [2**64]}], b"ab"),
], ids=["array-short", "array-long", "blob-short", "blob-long", "huge-size", "huge-blob"])
def test_decode_rejects_sizes_not_adding_up(arrays, blobs, body):
    """The digest matches (an attacker can recompute it); the sizes still must add up."""
    with pytest.raises(ProtocolError, match="truncated or padded"):
        decode_message(_raw(_header(arrays, blobs, body), body))


@pytest.mark.parametrize("spec", [
    _spec(shape=[3], size=16), _spec(shape=[1], size=16), _spec(shape=[2, 2], size=16),
    _spec(shape=[], size=16), _spec(dtype="int32", shape=[2], size=16),
    _spec(shape=[0], size=16),
], ids=["3x8", "1x8", "2x2x8", "scalar", "int32", "empty"])
def test_decode_rejects_shape_not_matching_size(spec):
    body = b"\x00" * 16
    with pytest.raises(ProtocolError, match="does not match 16 bytes"):
        decode_message(_raw(_header([spec], body=body), body))


def test_decode_rejects_header_size_beyond_data():
    data = encode_message(_small_message())
    (size,) = struct.unpack_from("<I", data, len(MAGIC))
    for bad_size in (size + len(data), 2**32 - 1, (16 << 20) + 1):
        bad = data[: len(MAGIC)] + struct.pack("<I", bad_size) + data[len(MAGIC) + 4:]
        with pytest.raises(ProtocolError, match="truncated or too large"):
            decode_message(bad)


def test_decode_rejects_header_size_inside_json():
    data = encode_message(_small_message())
    (size,) = struct.unpack_from("<I", data, len(MAGIC))
    bad = data[: len(MAGIC)] + struct.pack("<I", size - 1) + data[len(MAGIC) + 4:]
    with pytest.raises(ProtocolError, match="not valid JSON"):
        decode_message(bad)


def test_decode_rejects_oversized_message(monkeypatch):
    data = encode_message(_small_message())
    monkeypatch.setattr(protocol, "MAX_MESSAGE_BYTES", len(data) - 1)
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        decode_message(data)


def test_decode_checks_expected_kind():
    data = encode_message(_small_message())
    assert decode_message(data, "answer").kind == "answer"
    assert decode_message(data, ("query", "answer")).kind == "answer"
    with pytest.raises(ProtocolError, match="expected a query message, got 'answer'"):
        decode_message(data, "query")
    with pytest.raises(ProtocolError, match="expected a query or trained message"):
        decode_message(data, ("query", "trained"))


def test_kind_check_comes_after_integrity_checks():
    bad = bytearray(encode_message(_small_message()))
    bad[-1] ^= 1
    with pytest.raises(ProtocolError, match="digest"):
        decode_message(bytes(bad), "query")


# ---------------------------------------------------------------------- typed accessors
def test_message_array_accessor():
    message = decode_message(encode_message(_small_message()))
    assert message.array("node", "int64", 1).tolist() == [1, 2, 5]
    with pytest.raises(ProtocolError, match="answer message lacks array 'choice'"):
        message.array("choice", "int64", 1)
    with pytest.raises(ProtocolError, match="array 'node' must be 1-d int32, got 1-d int64"):
        message.array("node", "int32", 1)
    with pytest.raises(ProtocolError, match="array 'node' must be 2-d int64, got 1-d int64"):
        message.array("node", "int64", 2)
    with pytest.raises(ProtocolError, match="must be 1-d float64"):
        message.array("flag", "float64", 1)


def test_message_value_accessor():
    message = Message("setup", {"n": 3, "name": "x", "flag": True, "ratio": 0.5, "none": None})
    assert message.value("n", int) == 3
    assert message.value("name", str) == "x"
    assert message.value("flag", bool) is True
    assert message.value("ratio", (int, float)) == 0.5
    with pytest.raises(ProtocolError, match="setup message lacks field 'missing'"):
        message.value("missing", int)
    with pytest.raises(ProtocolError, match="field 'name' must be int, got str"):
        message.value("name", int)
    with pytest.raises(ProtocolError, match="field 'n' must be str, got int"):
        message.value("n", str)
    with pytest.raises(ProtocolError, match="field 'flag' has the wrong type"):
        message.value("flag", int)  # bool is not an int here
    with pytest.raises(ProtocolError, match="field 'none'"):
        message.value("none", int)
    with pytest.raises(ProtocolError, match="field 'ratio'"):
        message.value("ratio", int)


def test_message_blob_list_accessor():
    message = decode_message(encode_message(_small_message()))
    assert message.blob_list("squares") == [b"xyz", b"", b"\x00\x01"]
    with pytest.raises(ProtocolError, match="answer message lacks blobs 'labels'"):
        message.blob_list("labels")


# ---------------------------------------------------------------------- fixed gaps
def test_round_trip_zero_dimensional_array():
    decoded = decode_message(encode_message(Message("p", arrays={"s": np.array(7)})))
    assert decoded.arrays["s"].shape == ()


def _expect_protocol_error(data):
    with pytest.raises(ProtocolError):
        decode_message(data)


@pytest.mark.parametrize("header", [b"[" * 100_000, b'{"a":' * 50_000], ids=["list", "dict"])
def test_decode_rejects_deeply_nested_header(header):
    _expect_protocol_error(_raw(header))


@pytest.mark.parametrize("spec,body", [
    (_spec(shape=[2**32, 2**32], size=0), b""),  # product overflows int64 to 0
    (_spec(shape=[2**70], size=0), b""),
    (_spec(dtype="int8", shape=[True], size=1), b"\x01"),
], ids=["int64-overflow", "huge-int", "bool-dim"])
def test_decode_rejects_absurd_shapes(spec, body):
    _expect_protocol_error(_raw(_header([spec], body=body), body))


def test_decode_accepts_non_contiguous_memoryview():
    message = _small_message()
    data = encode_message(message)
    doubled = np.frombuffer(bytes(b for b in data for _ in range(2)), dtype=np.uint8)
    _assert_same(decode_message(memoryview(doubled)[::2]), message)


def test_digest_covers_header_metadata():
    data = bytearray(encode_message(Message("setup", {"n_estimators": 100})))
    at = bytes(data).index(b'"n_estimators":100')
    data[at + len('"n_estimators":')] = ord("9")  # 100 -> 900, still valid JSON
    with pytest.raises(ProtocolError, match="SHA-256 digest"):
        decode_message(bytes(data))


def test_duplicate_blob_names_rejected():
    spec = {"name": "b", "sizes": [1]}
    body = b"xy"
    with pytest.raises(ProtocolError, match="appear twice"):
        decode_message(_raw(_header(blobs=[spec, spec], body=body), body))


# ---------------------------------------------------------------------- stored messages
def _outcome(check, data):
    """("ok", None) or ("error", message) of ``check(data)``."""
    try:
        check(data)
    except ProtocolError as exc:
        return "error", str(exc)
    return "ok", None


def _verify_bytes(tmp_path, data: bytes, kind=None) -> None:
    path = tmp_path / "stored.msg"
    path.write_bytes(data)
    protocol.verify_message_file(path, kind)


def _mutations(data: bytes) -> list[bytes]:
    """Every truncation, a flip of every byte, and some paddings of ``data``."""
    flipped = [data[:pos] + bytes([data[pos] ^ 0x41]) + data[pos + 1:] for pos in
               range(len(data))]
    return [data, *(data[:cut] for cut in range(len(data))), *flipped, data + b"\x00",
            data + b"CFMSG1\n"]


def test_verify_message_file_agrees_with_decode_on_every_mutation(tmp_path):
    """A stored message passes the streamed check exactly when decode_message accepts its
    bytes, and fails with the same message otherwise (truncations, flipped bytes anywhere —
    magic, header size, header JSON, body —, padding)."""
    data = encode_message(_small_message())
    for i, mutated in enumerate(_mutations(data)):
        for kind in (None, "answer", "query"):
            expected = _outcome(lambda d, k=kind: decode_message(d, k), mutated)
            got = _outcome(lambda d, k=kind: _verify_bytes(tmp_path, d, k), mutated)
            assert got == expected, f"mutation {i}, kind {kind}"


@settings(max_examples=30, deadline=None)
@given(arrays=st.dictionaries(st.text(max_size=6), _array_strategy, max_size=3),
       blobs=st.dictionaries(st.text(max_size=6), st.lists(st.binary(max_size=3000),
                                                            max_size=3), max_size=2),
       flip=st.integers(min_value=0))
def test_verify_message_file_property(tmp_path_factory, arrays, blobs, flip):
    data = encode_message(Message("prop", {}, arrays, blobs))
    tmp = tmp_path_factory.mktemp("stored")
    _verify_bytes(tmp, data, "prop")
    bad = bytearray(data)
    bad[flip % len(bad)] ^= 0x10
    assert _outcome(lambda d: _verify_bytes(tmp, d), bytes(bad)) == _outcome(
        decode_message, bytes(bad))


def test_verify_message_file_reads_a_large_body_in_bounded_memory(tmp_path):
    """A 64 MiB message with a wrong digest is refused with about 1 MiB of Python
    allocations (the reading buffer), not a copy of the file."""
    import tracemalloc

    body = b"\x07" * (64 << 20)
    header = _header(blobs=[{"name": "b", "sizes": [len(body)]}], body=b"other")
    path = tmp_path / "big.msg"
    path.write_bytes(_raw(header, body))
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError, match="SHA-256 digest"):
            protocol.verify_message_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20
    path.write_bytes(_raw(_header(blobs=[{"name": "b", "sizes": [len(body)]}], body=body),
                          body))
    protocol.verify_message_file(path)
