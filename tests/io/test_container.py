"""The zip+JSON container shared by model files and secret state files
(``cipherforest/_container.py``): files written before it was shared load unchanged, and
reading is bounded before it allocates — a forged ``.npy`` shape, a compressed member, a
member declaring more bytes than it stores and an oversized ``meta.json`` are each refused
with the caller's error naming the file, in both kinds of file."""

from __future__ import annotations

import io as stdlib_io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_iris

from cipherforest import _container
from cipherforest.io import ModelFormatError, load_model, save_model
from cipherforest.privacy.state_file import StateFileError, read_state_file, write_state_file
from cipherforest.tree import DecisionTreeClassifier

DATA = Path(__file__).parent / "data"


def test_files_written_before_the_shared_container_load():
    """A model file and a state file written by the previous readers' code (committed in
    tests/io/data/) load: same predictions, same arrays."""
    X, _ = load_iris(return_X_y=True)
    model = load_model(DATA / "tree_v1.model")
    np.testing.assert_array_equal(model.predict_proba(X),
                                  np.load(DATA / "tree_v1_predict_proba.npy"))
    meta, arrays = read_state_file(DATA / "state_v1.npz", "test-state", 1)
    assert meta["note"] == "written before the shared container"
    np.testing.assert_array_equal(arrays["ints"], np.arange(5))
    np.testing.assert_array_equal(arrays["grid"], np.linspace(0, 1, 6).reshape(2, 3))
    np.testing.assert_array_equal(arrays["names"], ["a", "bc"])


def test_a_model_saves_and_loads_to_the_same_bytes_and_predictions(tmp_path):
    X, y = load_iris(return_X_y=True)
    model = DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, y)
    save_model(model, tmp_path / "m")
    again = load_model(tmp_path / "m")
    for field in ("children_left", "children_right", "feature", "threshold", "value"):
        np.testing.assert_array_equal(getattr(again.tree_, field), getattr(model.tree_, field))
    with zipfile.ZipFile(tmp_path / "m") as archive:
        assert {info.compress_type for info in archive.infolist()} == {zipfile.ZIP_STORED}


# ------------------------------------------------------------------------------ bounds
def _model(tmp_path) -> Path:
    path = tmp_path / "model.cfmodel"
    X, y = load_iris(return_X_y=True)
    save_model(DecisionTreeClassifier(max_depth=2, random_state=0).fit(X, y), path)
    return path


def _state(tmp_path) -> Path:
    path = tmp_path / "state.npz"
    write_state_file(path, "test-state", 1, {}, {"values": np.arange(40, dtype=np.float64)})
    return path


def _load_model(path):
    return load_model(path)


def _load_state(path):
    return read_state_file(path, "test-state", 1)


KINDS = pytest.mark.parametrize(("make", "load", "error", "member"), [
    (_model, _load_model, ModelFormatError, "tree_.value.npy"),
    (_state, _load_state, StateFileError, "values.npy"),
], ids=["model", "state"])


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _write(path: Path, members: dict[str, bytes], compression: int = zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _with_shape(npy: bytes, shape: tuple[int, ...]) -> bytes:
    """The same .npy member with another shape in its header (same header length)."""
    source = stdlib_io.BytesIO(npy)
    version = np.lib.format.read_magic(source)
    _, fortran, dtype = np.lib.format.read_array_header_1_0(source)
    assert version == (1, 0)
    header = stdlib_io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": fortran,
                 "shape": shape})
    assert header.tell() == source.tell()
    return header.getvalue() + npy[source.tell():]


@KINDS
def test_a_forged_shape_is_refused_before_numpy_allocates_it(tmp_path, make, load, error,
                                                              member):
    """A header claiming 8 TB of data in a member of a few hundred bytes: numpy would
    allocate the claimed array before reading (a MemoryError, or the machine's memory)."""
    path = make(tmp_path)
    members = _members(path)
    members[member] = _with_shape(members[member], (10**12,))
    _write(path, members)
    with pytest.raises(error, match=f"{path}.*header declares 8000000000000 bytes"):
        load(path)


@KINDS
def test_a_compressed_member_is_refused(tmp_path, make, load, error, member):
    path = make(tmp_path)
    _write(path, _members(path), compression=zipfile.ZIP_DEFLATED)
    with pytest.raises(error, match=f"{path}.*is compressed"):
        load(path)


def _declare_size(path: Path, member: str, size: int) -> None:
    """Rewrite the uncompressed size of ``member`` in the zip's central directory."""
    data = bytearray(path.read_bytes())
    name = member.encode()
    at = 0
    while True:
        at = data.index(b"PK\x01\x02", at)
        name_length = struct.unpack_from("<H", data, at + 28)[0]
        if bytes(data[at + 46: at + 46 + name_length]) == name:
            break
        at += 4
    struct.pack_into("<I", data, at + 24, size)
    path.write_bytes(bytes(data))


@KINDS
def test_a_member_declaring_more_than_it_stores_is_refused(tmp_path, make, load, error,
                                                           member):
    path = make(tmp_path)
    _declare_size(path, "meta.json", 1 << 30)
    with pytest.raises(error, match=f"{path}.*meta.json.*declares 1073741824 bytes"):
        load(path)


@KINDS
def test_meta_json_above_the_bound_is_refused(tmp_path, monkeypatch, make, load, error,
                                              member):
    path = make(tmp_path)
    size = len(_members(path)["meta.json"])
    monkeypatch.setattr(_container, "MAX_META_BYTES", size - 1)
    with pytest.raises(error, match=f"meta.json' is {size} bytes, more than {size - 1}"):
        load(path)
    monkeypatch.setattr(_container, "MAX_META_BYTES", size)
    load(path)


def test_the_shared_reader_keeps_each_files_messages(tmp_path):
    """Model files and state files keep their own wording for a foreign format."""
    path = _state(tmp_path)
    with pytest.raises(ModelFormatError, match="not a cipherforest model file .*has no format"):
        load_model(path)
    members = _members(path)
    members["meta.json"] = json.dumps({"format": "other", "format_version": 1}).encode()
    _write(path, members)
    with pytest.raises(StateFileError, match="not a test-state file .format is 'other'"):
        _load_state(path)
