"""The package boundaries hold: nobody imports another package's private names.

Outside a package, only its public names are imported: no module path component and no
imported name starting with an underscore, unless the importing module lives inside the
package that owns it. The plaintext core (``tree`` and ``ensemble``, the ensembles being
built on the trees' kernels, with ``io`` that saves them and ``core`` that exports their
building blocks) counts as one package; tests of its internals live in ``tests/core/`` and
kernel probes in ``dev/``. Every other layer (privacy, service, cli, experiments,
benchmarks) reaches the core through public modules such as :mod:`cipherforest.core`.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CORE = ("cipherforest.tree", "cipherforest.ensemble", "cipherforest.core", "cipherforest.io")
# Outside src/, these folders may reach the core's internals: tests of those internals, and
# the investigation harnesses that probe kernels.
CORE_INSIDERS = (ROOT / "tests" / "core", ROOT / "dev")


def _module_name(path: Path) -> str | None:
    """Dotted name of a source module (None outside src/)."""
    try:
        parts = path.relative_to(SRC).with_suffix("").parts
    except ValueError:
        return None
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imports(path: Path):
    """``(line, module, names)`` of every import in ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = _module_name(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                package = module.split(".") if _is_package(path) else module.split(".")[:-1]
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([target] if target else []))
            yield node.lineno, target, [alias.name for alias in node.names]


def _private_owner(module: str, names: list[str]) -> str | None:
    """The package whose private part this import reaches, or None if all is public."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            return ".".join(parts[:i])
    if any(n.startswith("_") and not n.startswith("__") for n in names):
        return module
    return None


def _unit(name: str) -> str:
    """Packages that count as one: the plaintext core."""
    for core in CORE:
        if name == core or name.startswith(core + "."):
            return "cipherforest.core-unit"
    return name


def _inside(importer: str | None, owner: str, path: Path) -> bool:
    if importer is None:  # tests, benchmarks, dev: only the core's insiders are inside
        insider = any(path.is_relative_to(folder) for folder in CORE_INSIDERS)
        return insider and (owner == "cipherforest" or _unit(owner) == _unit(CORE[0]))
    if owner == "cipherforest":  # the root's private helpers serve every subpackage
        return True
    owner_unit = _unit(owner)
    if owner_unit != owner:
        return _unit(importer) == owner_unit
    return importer == owner or importer.startswith(owner + ".")


def _python_files():
    for folder in ("src", "tests", "benchmarks", "dev"):
        base = ROOT / folder
        if base.is_dir():
            yield from sorted(p for p in base.rglob("*.py") if "sklearn_upstream" not in p.parts)


def private_imports() -> list[str]:
    found = []
    for path in _python_files():
        importer = _module_name(path)
        for line, module, names in _imports(path):
            if not (module == "cipherforest" or module.startswith("cipherforest.")):
                continue
            owner = _private_owner(module, names)
            if owner is not None and not _inside(importer, owner, path):
                found.append(f"{path.relative_to(ROOT)}:{line}: {module} {names or ''}")
    return found


def test_no_cross_package_private_imports():
    assert private_imports() == []


def test_the_walk_finds_a_private_import(tmp_path, monkeypatch):
    """Positive control: a file outside the core importing a core module's private name."""
    probe = ROOT / "tests" / "_architecture_probe.py"
    monkeypatch.setattr(
        "test_architecture._python_files", lambda: iter([probe]))
    probe.write_text("from cipherforest.tree._fit import prepare_tree_data\n"
                     "from cipherforest.privacy.protocol import session\n")
    try:
        found = private_imports()
    finally:
        probe.unlink()
    assert found == ["tests/_architecture_probe.py:1: cipherforest.tree._fit "
                     "['prepare_tree_data']"]


@pytest.mark.parametrize("estimator", ["PrivateForestClient", "PrivateForestSimulator"])
def test_parameter_table_is_the_estimators(estimator):
    """One table of parameters: each estimator's defaults and constraints are the table's."""
    from cipherforest import privacy
    from cipherforest.privacy.protocol import PARAMETERS

    cls = getattr(privacy, estimator)
    signature = inspect.signature(cls.__init__)
    params = [p for p in signature.parameters.values() if p.name != "self"]
    assert params
    for p in params:
        assert p.default == PARAMETERS[p.name].default, p.name
    assert set(cls._parameter_constraints) == {p.name for p in params}


LAYERS = {  # package -> packages it must not import
    "cipherforest.tree": ("cipherforest.privacy", "cipherforest.service", "cipherforest.cli",
                          "cipherforest.experiments"),
    "cipherforest.ensemble": ("cipherforest.privacy", "cipherforest.service",
                              "cipherforest.cli", "cipherforest.experiments"),
    "cipherforest.privacy": ("cipherforest.service", "cipherforest.cli",
                             "cipherforest.experiments"),
    "cipherforest.service": ("cipherforest.cli", "cipherforest.experiments"),
}


def test_layers_import_downwards_only():
    """The core never imports the privacy layer, privacy never the service or the CLI."""
    found = []
    for path in (SRC / "cipherforest").rglob("*.py"):
        importer = _module_name(path)
        for package, forbidden in LAYERS.items():
            if importer == package or importer.startswith(package + "."):
                found += [f"{path.relative_to(ROOT)}:{line}: {module}"
                          for line, module, _ in _imports(path)
                          if any(module == f or module.startswith(f + ".") for f in forbidden)]
    assert found == []
