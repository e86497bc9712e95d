"""The registry of estimator classes that model files may name.

Kept apart from :mod:`cipherforest.io` (which imports the tree package) so that estimator
modules can register themselves without an import cycle.
"""

from __future__ import annotations

from typing import TypeVar

_T = TypeVar("_T", bound=type)

#: Classes :func:`cipherforest.io.load_model` may instantiate, by class name.
MODEL_CLASSES: dict[str, type] = {}


def register_model_class(cls: _T) -> _T:
    """Class decorator allowing :func:`load_model` to instantiate ``cls``.

    Parameters
    ----------
    cls : type
        An estimator class with ``get_params`` whose constructor accepts its parameters as
        keyword arguments and whose fitted state is its public ``*_`` attributes.

    Returns
    -------
    cls : type
        The same class, now in ``MODEL_CLASSES`` under ``cls.__name__``.

    Raises
    ------
    TypeError
        If ``cls`` is not a class with a ``get_params`` method.
    ValueError
        If a different class is already registered under the same name.
    """
    if not isinstance(cls, type) or not callable(getattr(cls, "get_params", None)):
        raise TypeError(f"register_model_class expects an estimator class, got {cls!r}")
    name = cls.__name__
    existing = MODEL_CLASSES.get(name)
    # Re-registration of the "same" class happens when its module is reloaded.
    if existing is not None and qualified_name(existing) != qualified_name(cls):
        raise ValueError(f"model class name {name!r} is already registered for "
                         f"{qualified_name(existing)}")
    MODEL_CLASSES[name] = cls
    return cls


def qualified_name(cls: type) -> str:
    """``module.QualName`` of a class."""
    return f"{cls.__module__}.{cls.__qualname__}"
