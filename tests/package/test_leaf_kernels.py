"""Kernels compiled without numba's reference counting (``LEAF_JIT_OPTIONS``) must neither
allocate arrays nor call a kernel that does: numba may compile such a callee for the
caller's settings and fail ("Only accept returning of array passed into the function as
argument") — whether it does depends on what was compiled first, so a test suite can pass
while a fresh installation's first fit fails (the general grower's node summary, which calls
the sorting weighted median, once did). Checked on the sources: every kernel such a kernel
calls, directly or through others, by name."""

from __future__ import annotations

import ast
from pathlib import Path

import cipherforest

PACKAGE = Path(cipherforest.__file__).parent
#: NumPy functions that make a new array.
ALLOCATING = {"empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like",
              "full_like", "arange", "array", "argsort", "sort", "concatenate", "where",
              "unique", "copy", "cumsum", "linspace"}


def numba_kernels() -> dict[str, list[tuple[str, ast.FunctionDef]]]:
    """Every ``@njit`` function of the package by name: (its decorator's source, node)."""
    kernels: dict[str, list[tuple[str, ast.FunctionDef]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef):
                for decorator in node.decorator_list:
                    source = ast.unparse(decorator)
                    if source.startswith("njit"):
                        kernels.setdefault(node.name, []).append((source, node))
    return kernels


def allocations(node: ast.FunctionDef) -> list[str]:
    """The array-making calls in a function's body (``np.zeros(...)``, ``x.copy()``)."""
    found = []
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
            owner = call.func.value
            if ((isinstance(owner, ast.Name) and owner.id == "np"
                 and call.func.attr in ALLOCATING) or call.func.attr == "copy"):
                found.append(ast.unparse(call.func))
    return found


def called_names(node: ast.FunctionDef) -> set[str]:
    return {call.func.id for call in ast.walk(node)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)}


def allocating_paths(name, kernels, path=()) -> list[str]:
    """Call chains from kernel ``name`` to an allocation (``a -> b: np.empty``)."""
    found = []
    for _, node in kernels.get(name, []):
        chain = (*path, name)
        found += [f"{' -> '.join(chain)}: {call}" for call in allocations(node)]
        for callee in called_names(node) - set(chain):
            found += allocating_paths(callee, kernels, chain)
    return found


def test_kernels_without_reference_counting_allocate_nothing():
    kernels = numba_kernels()
    leaves = [name for name, definitions in kernels.items()
              if any("LEAF_JIT_OPTIONS" in source for source, _ in definitions)]
    assert len(leaves) > 20  # the scan finds the package's kernels
    problems = [path for name in leaves for path in allocating_paths(name, kernels)]
    assert problems == []


def test_the_scan_finds_an_allocating_callee():
    # The case the scan exists for, as the general grower had it before the fix.
    source = '''
@njit(**LEAF_JIT_OPTIONS)
def summary(y, w):
    return median(y, w)

@njit(**JIT_OPTIONS)
def median(y, w):
    order = np.argsort(y, kind="mergesort")
    return y[order[0]]
'''
    kernels: dict[str, list[tuple[str, ast.FunctionDef]]] = {}
    for node in ast.parse(source).body:
        kernels.setdefault(node.name, []).append((ast.unparse(node.decorator_list[0]), node))
    assert allocating_paths("summary", kernels) == ["summary -> median: np.argsort"]
