"""Saving and loading fitted models without pickle.

A model file is a zip archive written with :func:`numpy.savez`: one ``.npy`` member per array
plus a ``meta.json`` member::

    {"format": "cipherforest-model", "format_version": 1, "library_version": "0.1.0",
     "class": "DecisionTreeClassifier", "params": {...}, "attributes": {...}}

``params`` is ``get_params(deep=False)`` and ``attributes`` holds every public fitted
attribute (a name ending with ``_`` in ``vars(estimator)``), each described by a spec:

* ``{"kind": "value", "value": v}``: a Python scalar, or a list / tuple of scalars;
* ``{"kind": "array", "key": k, "dtype": d, "shape": s, "object": b}``: a numpy array (or,
  with ``"scalar": true``, a numpy scalar) stored as member ``k``; object arrays of strings
  are stored as unicode arrays and flagged ``"object": true``;
* ``{"kind": "tree", "prefix": p, "n_features": n, "n_classes": [...]}``: a
  :class:`~cipherforest.tree._tree.Tree` whose node arrays are the members ``p.<field>``;
  a tree with categorical splits adds ``"categorical": true`` and the member
  ``p.categorical_bitsets`` (uint32, one row of left categories per node), and its file
  has ``"format_version": 2`` (``CATEGORICAL_FORMAT_VERSION``), which older readers refuse
  instead of dropping the category sets; files without such trees stay version 1; an
  estimator whose ``category_bins_`` give some feature bins other than its categories
  (a categorical column with a category of ``max_bins`` or more) makes the file
  ``"format_version": 3`` (``CATEGORY_BINS_FORMAT_VERSION``): a reader that predates them
  would read such a column's categories as bins;
* ``{"kind": "estimator", "class": c, "params": {...}, "attributes": {...}}``: a fitted
  sub-estimator (e.g. a member of an ensemble's ``estimators_``), recursively;
* ``{"kind": "list", "tuple": b, "items": [...]}``: a list or tuple of any of the above;
* ``{"kind": "estimator_array", "shape": s, "items": [...]}``: an object array of fitted
  sub-estimators (gradient boosting's ``estimators_``), items in C order; ``"object_array"``
  the same for an object array of other items (``KBinsDiscretizer.bin_edges_``: arrays).

A scikit-learn class of the allow-list in :mod:`cipherforest._sklearn_models` (``Pipeline``,
``ColumnTransformer`` and well-known transformers) is named by its public path
(``"sklearn.preprocessing.StandardScaler"``); its spec may also hold ``"state"`` (the
private fitted attributes its entry lists, same specs as ``attributes``) and
``"fitted_params"`` (parameters holding fitted estimators, such as ``Pipeline.steps``).
``meta.json`` records ``"sklearn_version"``, which loading checks for those classes only.

Array members are named after the attribute path (``estimators_.3.tree_.value``). JSON values
that JSON cannot represent faithfully are tagged: ``{"$tuple": [...]}``,
``{"$dict": [[key, value], ...]}`` (so integer keys stay integers), ``{"$float": "nan"}``,
``{"$numpy": dtype, "value": v}``, ``{"$ndarray": dtype, "shape": s, "data": [...]}``,
``{"$slice": [start, stop, step]}``, ``{"$dtype": dtype}`` (a numpy dtype, or with
``"type": true`` its scalar type) and ``{"$estimator": class, "params": {...}}`` (an unfitted
estimator used as a parameter).

Loading only instantiates classes registered with :func:`register_model_class` and the
allow-listed scikit-learn classes, and never unpickles anything. Reading is bounded before it
allocates: ``meta.json``'s size, each member's declared size and each array's header are
checked first (the container shared with secret state files, ``cipherforest/_container.py``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import math
import os
import re
import sys
from typing import Any, NoReturn

import numpy as np

from . import _sklearn_models as sklearn_models
from ._atomic_file import atomic_write  # noqa: F401 - privacy and service import it from here
from ._container import READ_ERRORS, ContainerReader, write_container
from ._registry import MODEL_CLASSES, qualified_name, register_model_class
from .tree._tree import NODE_FIELDS, Tree

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MODEL_CLASSES",
    "ModelFormatError",
    "load_model",
    "register_model_class",
    "save_model",
]

#: Value of ``meta.json["format"]``.
FORMAT = "cipherforest-model"
#: Version of the layout described in the module docstring; bump on incompatible changes.
FORMAT_VERSION = 1
#: Version of files holding trees with categorical splits (the layout plus their bitsets).
CATEGORICAL_FORMAT_VERSION = 2
#: Version of files with category bins (``category_bins_``, module docstring).
CATEGORY_BINS_FORMAT_VERSION = 3
#: The versions :func:`load_model` reads.
READABLE_FORMAT_VERSIONS = (FORMAT_VERSION, CATEGORICAL_FORMAT_VERSION,
                            CATEGORY_BINS_FORMAT_VERSION)
#: Classes that :func:`load_model` may instantiate, by class name.

_TREE_FIELDS = {**NODE_FIELDS, "value": np.float64}
_ARRAY_KINDS = "biufcUS"  # bool, integers, floats, complex, unicode and byte strings
_ATTRIBUTE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*_\Z")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Modules whose import registers the built-in estimators, tried when a class is unknown.
_BUILTIN_MODEL_MODULES = ("cipherforest.tree", "cipherforest.ensemble")



class ModelFormatError(ValueError):
    """A file is not a valid cipherforest model file (corrupt, foreign or unsupported)."""


def library_version() -> str:
    """Installed cipherforest version, recorded in every file the library writes."""
    package = sys.modules.get("cipherforest")
    version = getattr(package, "__version__", None)
    if version is not None:
        return str(version)
    try:
        return importlib.metadata.version("cipherforest")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# ------------------------------------------------------------------------------ encoding
def _model_name(obj: Any) -> str | None:
    """The class name a model file gives ``obj``: a registered class's name, an allow-listed
    scikit-learn class's public path, or None when ``obj`` cannot be saved."""
    if MODEL_CLASSES.get(type(obj).__name__) is type(obj):
        return type(obj).__name__
    model = sklearn_models.sklearn_model_of(obj)
    return None if model is None else model.path


def _is_registered(obj: Any) -> bool:
    return _model_name(obj) is not None


def _unregistered_message(cls: type) -> str:
    return (f"class {qualified_name(cls)} is not registered for saving: "
            f"{sklearn_models.supported_message()}")


def _to_json(obj: Any, where: str) -> Any:
    """JSON-safe, faithfully decodable form of a parameter or scalar value."""
    # numpy scalars first: np.float64 and np.str_ subclass float and str.
    if isinstance(obj, np.generic) and obj.dtype.kind in "biufU":
        return {"$numpy": obj.dtype.str, "value": _to_json(obj.item(), where)}
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else {"$float": repr(float(obj))}
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "biufU":
        return {"$ndarray": obj.dtype.str, "shape": list(obj.shape),
                "data": _to_json(obj.ravel().tolist(), where)}
    if isinstance(obj, list):
        return [_to_json(item, where) for item in obj]
    if isinstance(obj, tuple):
        return {"$tuple": [_to_json(item, where) for item in obj]}
    if isinstance(obj, dict):
        return {"$dict": [[_to_json(k, where), _to_json(v, where)] for k, v in obj.items()]}
    if isinstance(obj, slice):
        return {"$slice": [_to_json(obj.start, where), _to_json(obj.stop, where),
                           _to_json(obj.step, where)]}
    if isinstance(obj, np.dtype) or (isinstance(obj, type) and issubclass(obj, np.generic)):
        return {"$dtype": np.dtype(obj).str, "type": isinstance(obj, type)}
    if _is_registered(obj):
        model = sklearn_models.sklearn_model_of(obj)
        if model is not None:
            sklearn_models.check_saveable(model, obj)
        return {"$estimator": _model_name(obj),
                "params": _to_json(obj.get_params(deep=False), where)}
    raise TypeError(f"cannot save {where}: values of type {type(obj).__qualname__} are not "
                    "supported")


def _is_plain_scalar(obj: Any) -> bool:
    return obj is None or type(obj) in (bool, int, float, str)


class _Encoder:
    """Turns an estimator into a JSON spec plus a dict of arrays to store.

    ``path`` arguments are attribute paths such as ``estimators_[3].tree_``, used in error
    messages; ``key`` arguments are the matching array-name prefixes.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.arrays: dict[str, np.ndarray] = {}
        self.format_version = FORMAT_VERSION

    def error(self, path: str, message: str) -> TypeError:
        return TypeError(f"cannot save attribute {path!r} of {self.owner}: {message}")

    def estimator(self, est: Any, key: str, path: str) -> dict[str, Any]:
        if not _is_registered(est):
            message = _unregistered_message(type(est))
            raise self.error(path, message) if path else TypeError(f"cannot save: {message}")
        model = sklearn_models.sklearn_model_of(est)
        if model is not None:
            sklearn_models.check_saveable(model, est)
        spec = {"class": _model_name(est), "params": {}, "attributes": {}}
        for name, value in est.get_params(deep=False).items():
            if model is not None and name in model.fitted_params:
                spec.setdefault("fitted_params", {})[name] = self.attribute(
                    value, key + name, f"{path}.{name}" if path else name)
                continue
            where = f"parameter {path + '.' if path else ''}{name!r} of {self.owner}"
            spec["params"][name] = _to_json(value, where)
        for name, value in vars(est).items():
            if name.endswith("_") and not name.startswith("_"):
                spec["attributes"][name] = self.attribute(
                    value, key + name, f"{path}.{name}" if path else name)
                if (name == "category_bins_" and isinstance(value, list)
                        and any(kept is not None for kept in value)):
                    self.format_version = max(self.format_version,
                                              CATEGORY_BINS_FORMAT_VERSION)
        if model is not None:
            state = sklearn_models.private_state(model, est)
            if state:
                spec["state"] = {name: self.attribute(value, key + name,
                                                      f"{path}.{name}" if path else name)
                                 for name, value in state.items()}
        return spec

    def attribute(self, obj: Any, key: str, path: str) -> dict[str, Any]:
        if isinstance(obj, Tree):
            for field in _TREE_FIELDS:
                self.store(f"{key}.{field}", getattr(obj, field), path)
            spec = {"kind": "tree", "prefix": key, "n_features": obj.n_features,
                    "n_classes": [int(k) for k in obj.n_classes]}
            if obj.categorical_bitsets is not None:
                self.store(f"{key}.categorical_bitsets", obj.categorical_bitsets, path)
                spec["categorical"] = True
                self.format_version = max(self.format_version, CATEGORICAL_FORMAT_VERSION)
            return spec
        if (isinstance(obj, np.ndarray) and obj.dtype.kind == "O" and obj.size > 0
                and not all(isinstance(item, str) for item in obj.flat)):
            items = [self.attribute(item, f"{key}.{i}", f"{path}.flat[{i}]")
                     for i, item in enumerate(obj.flat)]
            kind = ("estimator_array" if all(item["kind"] == "estimator" for item in items)
                    else "object_array")
            return {"kind": kind, "shape": list(obj.shape), "items": items}
        if isinstance(obj, np.ndarray | np.generic):
            return self.array(obj, key, path)
        if _is_registered(obj):
            return {"kind": "estimator", **self.estimator(obj, key + ".", path)}
        if isinstance(obj, list | tuple):
            if all(_is_plain_scalar(item) for item in obj):
                return {"kind": "value", "value": _to_json(obj, repr(path))}
            items = [self.attribute(item, f"{key}.{i}", f"{path}[{i}]")
                     for i, item in enumerate(obj)]
            return {"kind": "list", "tuple": isinstance(obj, tuple), "items": items}
        if _is_plain_scalar(obj) or isinstance(obj, dict | slice | np.dtype):
            return {"kind": "value",
                    "value": _to_json(obj, f"attribute {path!r} of {self.owner}")}
        if hasattr(obj, "get_params"):
            raise self.error(path, _unregistered_message(type(obj)))
        raise self.error(path, f"values of type {type(obj).__qualname__} are not supported")

    def array(self, obj: np.ndarray | np.generic, key: str, path: str) -> dict[str, Any]:
        array = np.asarray(obj)
        is_object = array.dtype.kind == "O"
        if is_object:
            if not all(isinstance(item, str) for item in array.flat):
                raise self.error(path, "object arrays are only supported when all their "
                                       "elements are strings")
            array = array.astype(str)
        if array.dtype.kind not in _ARRAY_KINDS or array.dtype.fields is not None:
            raise self.error(path, f"arrays of dtype {array.dtype} are not supported")
        self.store(key, array, path)
        return {"kind": "array", "key": key, "dtype": array.dtype.str, "shape": list(array.shape),
                "object": is_object, "scalar": isinstance(obj, np.generic)}

    def store(self, key: str, array: np.ndarray, path: str) -> None:
        if key in self.arrays:
            raise self.error(path, f"array name {key!r} is used twice")
        self.arrays[key] = array


# ------------------------------------------------------------------------------ decoding
class _Decoder:
    """Rebuilds an estimator from ``meta.json`` and the arrays of an open model file."""

    def __init__(self, path: str, container: ContainerReader, sklearn_version: Any = None):
        self.path = path
        self.container = container
        self.sklearn_version = sklearn_version  # meta.json's, for scikit-learn classes

    def fail(self, message: str) -> NoReturn:
        raise ModelFormatError(f"{self.path}: {message}")

    def expect(self, spec: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
        if not isinstance(spec, dict) or key not in spec:
            self.fail(f"malformed model file: {where} has no {key!r} entry")
        value = spec[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            self.fail(f"malformed model file: {where}[{key!r}] has type "
                      f"{type(value).__name__}")
        return value

    def model_class(self, name: str) -> type:
        model = sklearn_models.SKLEARN_MODELS.get(name)
        if model is not None:
            reason = sklearn_models.check_sklearn_version(self.sklearn_version)
            if reason is not None:
                self.fail(reason)
            return model.load_class()
        if name not in MODEL_CLASSES:
            _import_builtin_models()
        cls = MODEL_CLASSES.get(name)
        if cls is None:
            known = ", ".join(sorted(MODEL_CLASSES)) or "none"
            self.fail(f"unknown model class {name!r} (registered classes: {known})")
        return cls

    def estimator(self, spec: dict, where: str) -> Any:
        cls = self.model_class(self.expect(spec, "class", str, where))
        params = self.expect(spec, "params", dict, where)
        attributes = self.expect(spec, "attributes", dict, where)
        for name in params:
            if not _PARAM_NAME.match(name):
                self.fail(f"malformed model file: invalid parameter name {name!r} in {where}")
        decoded = {name: self.json(value, f"parameter {name!r} of {where}")
                   for name, value in params.items()}
        model = sklearn_models.SKLEARN_MODELS.get(spec["class"])
        fitted = self.sklearn_part(spec, "fitted_params", model, where)
        decoded.update({name: self.attribute(value, f"parameter {name!r} of {where}")
                        for name, value in fitted.items()})
        try:
            est = cls(**decoded)
        except (TypeError, ValueError) as exc:
            self.fail(f"cannot create {cls.__name__} from the saved parameters: {exc}")
        for name, attr_spec in attributes.items():
            if not _ATTRIBUTE_NAME.match(name):
                self.fail(f"malformed model file: invalid attribute name {name!r} in {where}")
            setattr(est, name, self.attribute(attr_spec, f"{where}.{name}"))
        for name, attr_spec in self.sklearn_part(spec, "state", model, where).items():
            setattr(est, name, self.attribute(attr_spec, f"{where}.{name}"))
        if model is not None:
            try:
                sklearn_models.check_saveable(model, est)
            except TypeError as exc:
                self.fail(str(exc))
        return est

    def sklearn_part(self, spec: dict, key: str, model: Any, where: str) -> dict:
        """``spec[key]`` (``"fitted_params"`` or ``"state"``) of a scikit-learn class's
        spec, checked against its allow-list entry ``model``; empty when absent."""
        part = spec.get(key, {})
        allowed = (() if model is None else model.fitted_params if key == "fitted_params"
                   else sklearn_models.allowed_private_names(model))
        if not isinstance(part, dict) or not set(part) <= set(allowed):
            self.fail(f"malformed model file: {key} {sorted(part)!r} of {where} are not "
                      f"among those its class may have ({sorted(allowed)!r})")
        return part

    def attribute(self, spec: Any, where: str) -> Any:
        kind = self.expect(spec, "kind", str, where)
        if kind == "value":
            return self.json(spec.get("value"), where)
        if kind == "array":
            return self.array(spec, where)
        if kind == "tree":
            return self.tree(spec, where)
        if kind == "estimator":
            return self.estimator(spec, where)
        if kind in ("estimator_array", "object_array"):
            shape = self.expect(spec, "shape", list, where)
            items = self.expect(spec, "items", list, where)
            if (not all(type(n) is int and n > 0 for n in shape)
                    or int(np.prod(shape)) != len(items)
                    or not all(isinstance(item, dict) and (
                        kind == "object_array" or item.get("kind") == "estimator")
                        for item in items)):
                self.fail(f"malformed {kind.replace('_', ' ')} for {where}")
            out = np.empty(len(items), dtype=object)
            for i, item in enumerate(items):
                out[i] = self.attribute(item, f"{where}.flat[{i}]")
            return out.reshape(shape)
        if kind == "list":
            items = [self.attribute(item, f"{where}[{i}]")
                     for i, item in enumerate(self.expect(spec, "items", list, where))]
            return tuple(items) if spec.get("tuple") else items
        self.fail(f"malformed model file: unknown attribute kind {kind!r} for {where}")

    def load_array(self, key: str, where: str) -> np.ndarray:
        try:
            return self.container.array(f"{key}.npy")
        except KeyError:
            self.fail(f"array {key!r} of {where} is missing")
        except READ_ERRORS as exc:
            self.fail(f"array {key!r} of {where} is corrupt ({type(exc).__name__}: {exc})")

    def array(self, spec: dict, where: str) -> np.ndarray | np.generic:
        key = self.expect(spec, "key", str, where)
        array = self.load_array(key, where)
        if array.dtype.str != spec.get("dtype") or list(array.shape) != spec.get("shape"):
            self.fail(f"array {key!r} of {where} has dtype {array.dtype.str} and shape "
                      f"{array.shape}, expected {spec.get('dtype')} and {spec.get('shape')}")
        if spec.get("object"):
            array = array.astype(object)
        if spec.get("scalar"):
            return array[()]
        return array

    def tree(self, spec: dict, where: str) -> Tree:
        prefix = self.expect(spec, "prefix", str, where)
        n_features = self.expect(spec, "n_features", int, where)
        n_classes = self.expect(spec, "n_classes", list, where)
        arrays = {}
        for field, dtype in _TREE_FIELDS.items():
            key = f"{prefix}.{field}"
            array = self.load_array(key, where)
            if array.dtype != dtype:
                self.fail(f"tree array {key!r} of {where} has dtype {array.dtype}, expected "
                          f"{np.dtype(dtype)}")
            arrays[field] = array
        if spec.get("categorical", False) is True:
            key = f"{prefix}.categorical_bitsets"
            array = self.load_array(key, where)
            if array.dtype != np.uint32:
                self.fail(f"tree array {key!r} of {where} has dtype {array.dtype}, expected "
                          "uint32")
            arrays["categorical_bitsets"] = array
        try:
            if not n_classes or not all(type(k) is int and k > 0 for k in n_classes):
                raise ValueError(f"invalid n_classes {n_classes!r}")
            return Tree(n_features, np.array(n_classes, dtype=np.intp), arrays)
        except ValueError as exc:
            self.fail(f"invalid tree in {where}: {exc}")

    def json(self, value: Any, where: str) -> Any:
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if isinstance(value, list):
            return [self.json(item, where) for item in value]
        if not isinstance(value, dict) or len(value) == 0:
            self.fail(f"malformed value for {where}")
        try:
            return self._tagged(value, where)
        except (TypeError, ValueError, KeyError, IndexError) as exc:
            if isinstance(exc, ModelFormatError):
                raise
            self.fail(f"malformed value for {where}: {exc}")

    def _tagged(self, value: dict, where: str) -> Any:
        if "$tuple" in value:
            return tuple(self.json(value["$tuple"], where))
        if "$dict" in value:
            return {self.json(k, where): self.json(v, where) for k, v in value["$dict"]}
        if "$float" in value:
            if value["$float"] not in ("nan", "inf", "-inf"):
                raise ValueError(f"unknown float {value['$float']!r}")
            return float(value["$float"])
        if "$numpy" in value:
            dtype = np.dtype(value["$numpy"])
            if dtype.kind not in "biufU":
                raise ValueError(f"unsupported dtype {dtype}")
            return dtype.type(self.json(value["value"], where))
        if "$ndarray" in value:
            dtype = np.dtype(value["$ndarray"])
            if dtype.kind not in "biufU":
                raise ValueError(f"unsupported dtype {dtype}")
            data = np.array(self.json(value["data"], where), dtype=dtype)
            return data.reshape(tuple(value["shape"]))
        if "$slice" in value:
            start, stop, step = self.json(value["$slice"], where)
            if not all(v is None or type(v) is int for v in (start, stop, step)):
                raise ValueError("slice bounds must be integers or null")
            return slice(start, stop, step)
        if "$dtype" in value:
            dtype = np.dtype(value["$dtype"])
            if dtype.kind not in "biufcUSO":
                raise ValueError(f"unsupported dtype {dtype}")
            return dtype.type if value.get("type") else dtype
        if "$estimator" in value:
            cls = self.model_class(value["$estimator"])
            params = self.json(value["params"], where)
            if not isinstance(params, dict):
                raise ValueError("estimator parameters are not a dict")
            return cls(**params)
        raise ValueError(f"unknown tag in {sorted(value)}")


def _import_builtin_models() -> None:
    # The packages export their classes lazily: touching every public name imports (and so
    # registers) them.
    for module in _BUILTIN_MODEL_MODULES:
        try:
            package = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module.startswith(exc.name):
                raise
            continue
        for name in package.__all__:
            getattr(package, name)


# ------------------------------------------------------------------------------ files
def save_model(estimator: Any, path: str | os.PathLike[str]) -> None:
    """Save a fitted estimator to ``path`` without pickle.

    The file is written atomically: to a temporary file in the same directory, flushed and
    fsynced, then renamed over ``path``. On any error ``path`` is left untouched and the
    temporary file is removed.

    Parameters
    ----------
    estimator : estimator
        An instance of a class registered with :func:`register_model_class`. Its parameters
        and its public fitted attributes (names ending with ``_``) are saved; private
        attributes are not.
    path : str or os.PathLike
        Destination file; no extension is added (``.cfmodel`` is customary).

    Raises
    ------
    TypeError
        If the estimator's class is not registered, or a parameter or attribute has a type
        the format does not support (the message names it).
    """
    path = os.fspath(path)
    encoder = _Encoder(type(estimator).__name__)
    spec = encoder.estimator(estimator, "", "")
    meta = {"format": FORMAT, "format_version": encoder.format_version,
            "library_version": library_version(), **spec}
    # Read back only for scikit-learn classes (their private state is version-bound).
    meta["sklearn_version"] = sklearn_models.sklearn_version()
    write_container(path, meta, encoder.arrays)


def load_model(path: str | os.PathLike[str]) -> Any:
    """Load an estimator saved with :func:`save_model`.

    Parameters
    ----------
    path : str or os.PathLike
        The model file.

    Returns
    -------
    estimator : estimator
        A new instance of the saved (registered) class with the saved parameters and
        fitted attributes; arrays keep their dtypes.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ModelFormatError
        If the file is not a zip archive, is truncated or corrupt, is not a cipherforest
        model, has an unsupported ``format_version``, names an unregistered class, lacks an
        array, or holds an invalid tree. The message names the file and the problem.
    """
    path = os.fspath(path)

    def fail(message: str) -> NoReturn:
        raise ModelFormatError(f"{path}: {message}")

    with ContainerReader(path, fail, "cipherforest model file", "corrupt model file") as file:
        meta = file.meta()
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            fail(f"not a cipherforest model file (meta.json has no format {FORMAT!r})")
        file.check_version(meta, READABLE_FORMAT_VERSIONS)
        return _Decoder(path, file, meta.get("sklearn_version")).estimator(meta, "model")
