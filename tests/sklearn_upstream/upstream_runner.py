"""Run scikit-learn's own tree and ensemble tests against cipherforest's estimators.

The five test files are copied from the installed scikit-learn into a fresh folder. In each
copy only the ``from sklearn.tree import ...`` and ``from sklearn.ensemble import ...``
statements change: every imported name that cipherforest also provides is imported from
``cipherforest.tree`` / ``cipherforest.ensemble`` instead; the other names (e.g.
``RandomTreesEmbedding``, ``HistGradientBoostingClassifier``) and every import of
scikit-learn's private modules stay as they are. The copies run in a pytest subprocess with
``upstream_plugin.py`` as their ``conftest.py``, which records per test id the outcome and
whether the test *exercised our estimators* (see that module).

Pass rate: over the test ids that *exercise our estimators* — during their setup or call,
``__init__`` or ``fit`` of a cipherforest estimator class ran (``upstream_plugin`` wraps
those methods of every class the switched imports bind, and of their cipherforest base
classes) — and that ended passed or failed (an error counts as failed). Ids that never touch
our classes (e.g. tests of ``RandomTreesEmbedding`` or scikit-learn's Cython helpers alone)
and ids skipped by scikit-learn's own marks are reported apart.

Outcomes are compared with ``expected_failures.txt``. Its format is::

    [category] reason shared by the ids below
    test_tree.py::test_name[param]
    ...

A section whose category starts with ``deselect`` lists ids that are not run at all (each
such section's reason says why, e.g. runtime). Lines starting with ``#`` are comments.

Command line: ``python tests/sklearn_upstream/upstream_runner.py [-n WORKERS] [-k EXPR]`` prints the
summary and the differences from the list, and exits 1 when there are any; ``--prune`` removes
listed ids that now pass, ``--json``/``--from-json`` save and re-check a run's raw results.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_SRC = HERE.parent.parent / "src"
EXPECTED_FILE = HERE / "expected_failures.txt"
PLUGIN_FILE = HERE / "upstream_plugin.py"

UPSTREAM_FILES = (
    "tree/tests/test_tree.py",
    "ensemble/tests/test_forest.py",
    "ensemble/tests/test_bagging.py",
    "ensemble/tests/test_gradient_boosting.py",
    "ensemble/tests/test_weight_boosting.py",
)
SWITCHED_MODULES = {
    "sklearn.tree": "cipherforest.tree",
    "sklearn.ensemble": "cipherforest.ensemble",
}
PASSING = ("passed",)
COUNTED = ("passed", "failed")
PER_TEST_TIMEOUT_S = 900  # generous: a loaded shared machine ran test_classification_toy > 300 s


@dataclass
class ExpectedList:
    """The checked-in expected outcome: failing ids and deselected ids, each with a reason."""

    failures: dict[str, tuple[str, str]] = field(default_factory=dict)
    deselected: dict[str, tuple[str, str]] = field(default_factory=dict)


def read_expected(path: Path = EXPECTED_FILE) -> ExpectedList:
    """Parse ``expected_failures.txt``; every id must sit under a ``[category] reason`` header."""
    expected = ExpectedList()
    section = None
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            category, _, reason = line[1:].partition("]")
            if not category.strip() or not reason.strip():
                raise ValueError(f"{path.name}:{number}: header needs '[category] reason'")
            section = (category.strip(), reason.strip())
            continue
        if section is None:
            raise ValueError(f"{path.name}:{number}: test id before any '[category] reason'")
        target = expected.deselected if section[0].startswith("deselect") else expected.failures
        if line in expected.failures or line in expected.deselected:
            raise ValueError(f"{path.name}:{number}: {line} listed twice")
        target[line] = section
    return expected


def rewrite_imports(source: str, provided: dict[str, set[str]]) -> str:
    """Switch names imported from ``sklearn.tree``/``sklearn.ensemble`` to cipherforest's.

    Only top-level-style ``from sklearn.tree import A, B`` statements (at any indentation) are
    touched, and only the names in ``provided[module]``; the rest of the file is unchanged.
    """
    lines = source.splitlines(keepends=True)
    edits = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom) or node.module not in SWITCHED_MODULES:
            continue
        ours = [a for a in node.names if a.name in provided[node.module]]
        if not ours:
            continue
        theirs = [a for a in node.names if a.name not in provided[node.module]]
        indent = " " * node.col_offset

        def spell(aliases):
            return ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in aliases)

        replacement = f"{indent}from {SWITCHED_MODULES[node.module]} import ({spell(ours)})\n"
        if theirs:
            replacement = f"{indent}from {node.module} import ({spell(theirs)})\n" + replacement
        # keep the line count so upstream line numbers in tracebacks still match
        span = node.end_lineno - node.lineno + 1
        replacement += "\n" * (span - replacement.count("\n")) if span > 2 else ""
        edits.append((node.lineno - 1, node.end_lineno, replacement))
    for start, stop, replacement in sorted(edits, reverse=True):
        lines[start:stop] = [replacement]
    return "".join(lines)


def provided_names() -> dict[str, set[str]]:
    """Public names of cipherforest's tree and ensemble packages (as imported by this checkout)."""
    sys.path.insert(0, str(REPO_SRC))
    try:
        import importlib

        return {
            module: set(getattr(importlib.import_module(ours), "__all__", ()))
            for module, ours in SWITCHED_MODULES.items()
        }
    finally:
        sys.path.remove(str(REPO_SRC))


def prepare_folder(folder: Path) -> list[str]:
    """Copy and rewrite the upstream files plus the plugin into ``folder``; return file names."""
    import sklearn

    sklearn_root = Path(sklearn.__file__).parent
    provided = provided_names()
    names = []
    for relative in UPSTREAM_FILES:
        source = (sklearn_root / relative).read_text(encoding="utf-8")
        target = folder / Path(relative).name
        target.write_text(rewrite_imports(source, provided), encoding="utf-8")
        names.append(target.name)
    (folder / "conftest.py").write_text(PLUGIN_FILE.read_text(encoding="utf-8"), encoding="utf-8")
    ini = "[pytest]\naddopts = -p no:cacheprovider\n"
    (folder / "pytest.ini").write_text(ini, encoding="utf-8")
    return names


def run_upstream(workers: int = 2, keyword: str | None = None, verbose: bool = False) -> dict:
    """Run the rewritten upstream tests; return ``{test_id: {outcome, exercised, message}}``."""
    expected = read_expected()
    with tempfile.TemporaryDirectory(prefix="cf-sklearn-upstream-") as tmp:
        folder = Path(tmp)
        names = prepare_folder(folder)
        results_path = folder / "results.json"
        deselect_path = folder / "deselect.txt"
        deselect_path.write_text("".join(f"--deselect={i}\n" for i in expected.deselected))
        command = [sys.executable, "-m", "pytest", "-c", str(folder / "pytest.ini"),
                   "--rootdir", str(folder), "-q", "-p", "no:cacheprovider",
                   f"@{deselect_path}", *names]
        if workers > 1:
            command += ["-n", str(workers)]
        if keyword:
            command += ["-k", keyword]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_SRC), env.get("PYTHONPATH")]))
        env["CIPHERFOREST_UPSTREAM_RESULTS"] = str(results_path)
        env["CIPHERFOREST_UPSTREAM_TIMEOUT"] = str(PER_TEST_TIMEOUT_S)
        completed = subprocess.run(command, cwd=folder, env=env, capture_output=not verbose,
                                   text=True, check=False)
        if not results_path.exists():
            output = "" if verbose else completed.stdout[-4000:] + completed.stderr[-4000:]
            raise RuntimeError(f"upstream pytest run wrote no results (exit {completed.returncode})"
                               f"\n{output}")
        return json.loads(results_path.read_text(encoding="utf-8"))


@dataclass
class Comparison:
    """Outcome of comparing one run with the expected list."""

    unexpected_failures: list[str]
    stale_entries: list[str]
    passed: int
    counted: int
    other: dict[str, int]

    @property
    def pass_rate(self) -> float:
        return self.passed / self.counted if self.counted else 0.0

    def summary(self) -> str:
        others = ", ".join(f"{n} {k}" for k, n in sorted(self.other.items())) or "none"
        return (f"scikit-learn upstream tests exercising cipherforest estimators: "
                f"{self.passed} of {self.counted} pass ({100 * self.pass_rate:.1f} %); "
                f"not counted: {others}")


def compare(results: dict, expected: ExpectedList, complete_run: bool = True) -> Comparison:
    """Check ``results`` against ``expected`` and compute the pass rate.

    The pass rate counts the ids that exercised our estimators and ended ``passed`` or
    ``failed`` (an error in setup or teardown counts as failed); ids skipped or xfailed by
    scikit-learn's own marks, and ids that never constructed or fitted a cipherforest
    estimator, are reported apart. A listed id that now passes is *stale*. With
    ``complete_run=False`` (a ``-k`` subset) listed ids that did not run are not stale.
    """
    unexpected, stale = [], []
    passed = counted = 0
    other: dict[str, int] = {}
    for test_id, record in sorted(results.items()):
        outcome = record["outcome"]
        if outcome == "failed" and test_id not in expected.failures:
            unexpected.append(f"{test_id}  ->  {record['message']}")
        if outcome != "failed" and test_id in expected.failures and outcome != "skipped":
            stale.append(f"{test_id}  ({outcome})")
        if record["exercised"] and outcome in COUNTED:
            counted += 1
            passed += outcome in PASSING
        else:
            key = outcome if record["exercised"] else "not exercising cipherforest"
            other[key] = other.get(key, 0) + 1
    if complete_run:
        stale += [f"{i}  (not collected)" for i in expected.failures if i not in results]
    return Comparison(unexpected, stale, passed, counted, other)


def prune_expected(results: dict, path: Path = EXPECTED_FILE) -> int:
    """Remove from ``path`` the listed failures that ran and did not fail (and sections left
    empty); return how many ids were removed. Comments and the other entries are kept."""
    kept, removed = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = line.strip()
        record = results.get(entry)
        if record is not None and record["outcome"] not in ("failed", "skipped"):
            removed += 1
            continue
        kept.append(line)
    lines = []
    for i, line in enumerate(kept):
        following = next((x.strip() for x in kept[i + 1:] if x.strip()), "[")
        if line.startswith("[") and following.startswith("["):
            continue  # section with no ids left
        lines.append(line)
    text = "\n".join(lines).rstrip("\n") + "\n"
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    path.write_text(text, encoding="utf-8")
    return removed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--workers", type=int, default=2)
    parser.add_argument("-k", "--keyword", default=None, help="pytest -k expression (subset)")
    parser.add_argument("--json", type=Path, default=None, help="also save raw results here")
    parser.add_argument("-v", "--verbose", action="store_true", help="show pytest's output")
    parser.add_argument("--prune", action="store_true",
                        help="remove listed ids that now pass from expected_failures.txt")
    parser.add_argument("--from-json", type=Path, default=None,
                        help="compare saved results instead of running the tests")
    args = parser.parse_args(argv)
    if args.from_json:
        results = json.loads(args.from_json.read_text(encoding="utf-8"))
    else:
        results = run_upstream(args.workers, args.keyword, args.verbose)
    if args.prune:
        print(f"pruned {prune_expected(results)} ids that now pass")
    if args.json:
        args.json.write_text(json.dumps(results, indent=0, sort_keys=True))
    comparison = compare(results, read_expected(), complete_run=args.keyword is None)
    for title, items in (("Unexpected failures", comparison.unexpected_failures),
                         ("Listed as failing but did not fail (stale)", comparison.stale_entries)):
        if items:
            print(f"{title} ({len(items)}):")
            print("\n".join(f"  {i}" for i in items))
    print(comparison.summary())
    return 1 if comparison.unexpected_failures or comparison.stale_entries else 0


if __name__ == "__main__":
    sys.exit(main())
