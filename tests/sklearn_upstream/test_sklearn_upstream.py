"""scikit-learn's own tree/ensemble tests run against cipherforest (see ``upstream_runner``).

The full run takes minutes, so it only runs with ``CIPHERFOREST_SKLEARN_UPSTREAM=1``
(``make sklearn-tests``, which CI runs); the checks of the harness itself always run.
"""

import os
import textwrap

import pytest
from upstream_runner import (
    EXPECTED_FILE,
    ExpectedList,
    compare,
    read_expected,
    rewrite_imports,
    run_upstream,
)

RUN_UPSTREAM = os.environ.get("CIPHERFOREST_SKLEARN_UPSTREAM") == "1"


def test_rewrite_switches_only_the_names_cipherforest_provides():
    source = textwrap.dedent("""\
        import numpy as np
        from sklearn.ensemble import (
            RandomForestClassifier,
            RandomTreesEmbedding,
        )
        from sklearn.ensemble._forest import _generate_unsampled_indices
        from sklearn.tree import DecisionTreeClassifier as DTC


        def test_x():
            from sklearn.tree import DecisionTreeRegressor
            return 1
        """)
    provided = {"sklearn.ensemble": {"RandomForestClassifier"},
                "sklearn.tree": {"DecisionTreeClassifier", "DecisionTreeRegressor"}}
    out = rewrite_imports(source, provided)
    assert "from sklearn.ensemble import (RandomTreesEmbedding)" in out
    assert "from cipherforest.ensemble import (RandomForestClassifier)" in out
    assert "from sklearn.ensemble._forest import _generate_unsampled_indices" in out
    assert "from cipherforest.tree import (DecisionTreeClassifier as DTC)" in out
    assert "    from cipherforest.tree import (DecisionTreeRegressor)" in out
    # Line numbers of everything after the imports are unchanged.
    assert out.splitlines().index("def test_x():") == source.splitlines().index("def test_x():")
    compile(out, "rewritten", "exec")


def test_expected_list_parses_and_every_entry_has_a_reason():
    expected = read_expected(EXPECTED_FILE)
    for test_id, (category, reason) in {**expected.failures, **expected.deselected}.items():
        assert "::" in test_id and category and len(reason) > 10


def test_read_expected_rejects_an_id_without_a_section(tmp_path):
    path = tmp_path / "expected.txt"
    path.write_text("test_tree.py::test_a\n")
    with pytest.raises(ValueError, match="before any"):
        read_expected(path)


def test_compare_flags_unexpected_and_stale_and_counts_exercised_only():
    expected = ExpectedList(failures={"f.py::known": ("c", "reason"),
                                      "f.py::fixed": ("c", "reason"),
                                      "f.py::gone": ("c", "reason")})
    results = {
        "f.py::known": {"outcome": "failed", "exercised": True, "message": ""},
        "f.py::fixed": {"outcome": "passed", "exercised": True, "message": ""},
        "f.py::new": {"outcome": "failed", "exercised": True, "message": "boom"},
        "f.py::ok": {"outcome": "passed", "exercised": True, "message": ""},
        "f.py::other": {"outcome": "passed", "exercised": False, "message": ""},
        "f.py::skip": {"outcome": "skipped", "exercised": True, "message": ""},
    }
    result = compare(results, expected)
    assert result.unexpected_failures == ["f.py::new  ->  boom"]
    assert sorted(result.stale_entries) == ["f.py::fixed  (passed)", "f.py::gone  (not collected)"]
    assert (result.passed, result.counted) == (2, 4)
    assert result.other == {"not exercising cipherforest": 1, "skipped": 1}


@pytest.mark.skipif(not RUN_UPSTREAM, reason="set CIPHERFOREST_SKLEARN_UPSTREAM=1 "
                                              "(make sklearn-tests) to run scikit-learn's tests")
def test_scikit_learn_upstream_tests_match_the_expected_list():
    results = run_upstream(workers=int(os.environ.get("CIPHERFOREST_SKLEARN_UPSTREAM_WORKERS", 2)))
    comparison = compare(results, read_expected())
    print(comparison.summary())
    problems = []
    if comparison.unexpected_failures:
        problems.append("unexpected failures:\n  " + "\n  ".join(comparison.unexpected_failures))
    if comparison.stale_entries:
        problems.append("listed in expected_failures.txt but did not fail (remove them):\n  "
                        + "\n  ".join(comparison.stale_entries))
    assert not problems, "\n".join(problems) + "\n" + comparison.summary()
