"""Lazy public names for package ``__init__`` modules (PEP 562 module ``__getattr__``).

``import cipherforest`` must stay cheap: it runs in every joblib worker and every CLI call,
while scikit-learn, numba kernels and SEAL are needed only once an estimator is used. A
package lists its public names and the submodule defining each; the submodule is imported
on first access of one of its names, and the name is then stored in the package so later
lookups are plain attribute reads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for ``package`` exporting ``exports``.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    exports : mapping of str to str
        Public name -> relative module that defines it (e.g. ``"._classes"``).

    Returns
    -------
    getattr_ : callable
        Module ``__getattr__``: imports the defining module on first access.
    dir_ : callable
        Module ``__dir__``: the package's globals plus the public names.
    """
    namespace = importlib.import_module(package).__dict__

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return getattr_, dir_
