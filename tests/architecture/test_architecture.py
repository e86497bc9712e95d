"""The package boundaries hold: layers import downwards only, nobody imports private names.

The layers are import-linter contracts in pyproject.toml (``[tool.importlinter]``, every module
in a layer); ``test_import_contracts_are_kept`` runs them and the positive controls break each
contract kind on a copy of the package in a temporary folder.

Outside a package, only its public names are imported: no module path component and no
imported name starting with an underscore, unless the importing module lives inside the
package that owns it. The plaintext core (``tree`` and ``ensemble``, the ensembles being
built on the trees' kernels, with ``io`` that saves them and ``core`` that exports their
building blocks) counts as one package; the tests of its subjects (``tests/tree/``,
``tests/ensemble/``, ``tests/io/``, ``tests/package/``) may reach its internals, and so may the
kernel probes in ``dev/``. Every other layer (privacy, service, cli, experiments,
benchmarks) reaches the core through public modules such as :mod:`cipherforest.core`.
"""

from __future__ import annotations

import ast
import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
CORE = ("cipherforest.tree", "cipherforest.ensemble", "cipherforest.core", "cipherforest.io")
# Outside src/, these folders may reach the core's internals: the tests of the core's subjects
# (tests/README.md), and the investigation harnesses that probe kernels.
CORE_INSIDERS = (*(ROOT / "tests" / subject for subject in ("tree", "ensemble", "io", "package")),
                 ROOT / "dev")


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


def private_imports(files, root: Path = ROOT) -> list[str]:
    """``path:line: module [names]`` of every import of another package's private part."""
    found = []
    for path in files:
        importer = _module_name(path)
        for line, module, names in _imports(path):
            if not (module == "cipherforest" or module.startswith("cipherforest.")):
                continue
            owner = _private_owner(module, names)
            if owner is not None and not _inside(importer, owner, path):
                found.append(f"{path.relative_to(root)}:{line}: {module} {names or ''}")
    return found


def test_no_cross_package_private_imports():
    assert private_imports(_python_files()) == []


def test_the_walk_finds_a_private_import(tmp_path):
    """Positive control: a file outside the core importing a core module's private name."""
    probe = tmp_path / "probe.py"
    probe.write_text("from cipherforest.tree._fit import prepare_tree_data\n"
                     "from cipherforest.privacy.protocol import session\n")
    assert private_imports([probe], root=tmp_path) == [
        "probe.py:1: cipherforest.tree._fit ['prepare_tree_data']"]


def sklearn_private_imports(files, root: Path = ROOT) -> list[str]:
    """``path:line: module [names]`` of every import of scikit-learn's private parts."""
    found = []
    for path in files:
        for line, module, names in _imports(path):
            if module == "sklearn" or module.startswith("sklearn."):
                owner = _private_owner(module, names)
                if owner is not None:
                    found.append(f"{path.relative_to(root)}:{line}: {module} {names or ''}")
    return found


def test_sklearn_private_names_come_through_one_module():
    """scikit-learn's private names are imported in cipherforest/_sklearn_compat.py only."""
    compat = SRC / "cipherforest" / "_sklearn_compat.py"
    sources = [p for p in sorted((SRC / "cipherforest").rglob("*.py")) if p != compat]
    assert sklearn_private_imports(sources) == []
    assert sklearn_private_imports([compat])  # positive control: the module's own imports


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


def _lint_imports(root: Path, contracts: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run import-linter on the package under ``root/src`` with ``root/pyproject.toml``."""
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, "
            f"limit_to_contracts={contracts!r}))")
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run([sys.executable, "-c", code], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def test_import_contracts_are_kept():
    """The layers and the core facade of pyproject's [tool.importlinter] hold on the sources."""
    run = _lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 kept, 0 broken" in run.stdout


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory):
    """A copy of the package and pyproject.toml, for the contracts' positive controls."""
    root = tmp_path_factory.mktemp("copy")
    shutil.copytree(SRC / "cipherforest", root / "src" / "cipherforest",
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


@pytest.mark.parametrize(("contract", "module", "line"), [
    ("layers", "io.py", "from cipherforest import privacy"),
    ("layers", "core.py", "from cipherforest.privacy import dp"),
    ("layers", "experiments/common.py", "from cipherforest import cli"),
    # independent siblings of one layer
    ("layers", "service/app.py", "from cipherforest.experiments import run"),
    # a module in no layer
    ("layers", "_unlisted.py", "X = 1"),
    ("core-facade", "privacy/dp.py", "from cipherforest.tree import DecisionTreeClassifier"),
])
def test_contracts_fail_on_a_forbidden_import(package_copy, contract, module, line):
    """Positive controls: each contract kind breaks on a copy with one forbidden import."""
    path = package_copy / "src" / "cipherforest" / module
    original = path.read_text() if path.exists() else None
    assert _lint_imports(package_copy, (contract,)).returncode == 0
    path.write_text((original or "") + f"\n{line}\n")
    try:
        run = _lint_imports(package_copy, (contract,))
    finally:
        if original is None:
            path.unlink()
        else:
            path.write_text(original)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "0 kept, 1 broken" in run.stdout
