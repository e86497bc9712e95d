"""MkDocs hook: the build fails when a public name has no entry in the API reference.

mkdocstrings renders what a page asks for and says nothing about what no page asks for, so
this hook lists the public names (each public module's ``__all__`` and the entry points
below), resolves every ``::: dotted.name`` directive of the ``api/`` pages, and fails the
build naming each public name no directive documents and each class or function without a
docstring. A name re-exported under several modules (``cipherforest.DecisionTreeClassifier``
is ``cipherforest.tree.DecisionTreeClassifier``) is documented once.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

# Modules whose __all__ is public API.
PUBLIC_MODULES = (
    "cipherforest",
    "cipherforest.tree",
    "cipherforest.ensemble",
    "cipherforest.io",
    "cipherforest.dask",
    "cipherforest.privacy",
    "cipherforest.privacy.attacks",
    "cipherforest.experiments",
)
# Entry points of packages whose __all__ is empty or much larger than their user-facing part.
ENTRY_POINTS = (
    "cipherforest.cli.main",
    "cipherforest.service.serve.serve",
    "cipherforest.service.serve.build_app",
    "cipherforest.service.app.create_app",
    "cipherforest.service.sessions.SessionManager",
    "cipherforest.service.limits.Limits",
    "cipherforest.privacy.protocol.HTTPTransport",
)
DIRECTIVE = re.compile(r"^:::\s+([\w.]+)\s*$", re.MULTILINE)
NOT_DOCUMENTED = ("__version__",)


def resolve(dotted: str):
    """The object a dotted name names (the longest importable module prefix, then attributes)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(f"no module in {dotted!r}")


def public_names() -> list[str]:
    names = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        names += [f"{module_name}.{name}" for name in module.__all__
                  if name not in NOT_DOCUMENTED]
    return names + list(ENTRY_POINTS)


def directives(api_dir: Path) -> list[str]:
    return [m.group(1) for page in sorted(api_dir.glob("*.md"))
            for m in DIRECTIVE.finditer(page.read_text(encoding="utf-8"))]


def _is_code(obj) -> bool:
    return inspect.isclass(obj) or inspect.isfunction(obj)


def problems(names: list[str], documented: list[str]) -> list[str]:
    """What is missing: public names without a directive, code without a docstring."""
    targets = {}
    found = []
    for dotted in documented:
        try:
            targets[dotted] = resolve(dotted)
        except (ImportError, AttributeError) as exc:
            found.append(f"::: {dotted} names nothing ({exc})")
    code = [obj for obj in targets.values() if _is_code(obj)]
    for dotted in names:
        obj = resolve(dotted)
        covered = dotted in targets or (_is_code(obj) and any(obj is t for t in code))
        if not covered:
            found.append(f"{dotted} is public but no API page documents it")
        elif _is_code(obj) and not (obj.__doc__ or "").strip():
            found.append(f"{dotted} has no docstring")
    return found


def on_config(config):
    found = problems(public_names(), directives(Path(config["docs_dir"]) / "api"))
    if found:
        raise PluginError("API reference incomplete:\n  " + "\n  ".join(found))
    return config
