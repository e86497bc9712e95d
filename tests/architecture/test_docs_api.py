"""The API reference's completeness check (docs/_hooks/api_coverage.py, run by ``make docs``).

Proves: every public name has a ``:::`` entry on an API page and a docstring, and the check
reports a public name whose entry is removed, an entry that names nothing, and a public
function without a docstring.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("mkdocs")

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api"


@pytest.fixture(scope="module")
def coverage():
    spec = importlib.util.spec_from_file_location(
        "api_coverage", ROOT / "docs" / "_hooks" / "api_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_public_name_is_documented(coverage):
    assert coverage.problems(coverage.public_names(), coverage.directives(API)) == []


def test_a_missing_entry_is_reported(coverage):
    documented = [d for d in coverage.directives(API) if not d.endswith(".save_model")]
    assert coverage.problems(coverage.public_names(), documented) == [
        "cipherforest.io.save_model is public but no API page documents it"]


def test_an_entry_naming_nothing_is_reported(coverage):
    found = coverage.problems([], ["cipherforest.io.no_such_function"])
    assert len(found) == 1 and found[0].startswith("::: cipherforest.io.no_such_function")


def test_a_public_function_without_a_docstring_is_reported(coverage, monkeypatch):
    import cipherforest.io

    monkeypatch.setattr(cipherforest.io.save_model, "__doc__", None)
    assert coverage.problems(["cipherforest.io.save_model"],
                             ["cipherforest.io.save_model"]) == [
        "cipherforest.io.save_model has no docstring"]
