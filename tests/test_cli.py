"""The command-line entry points: ``cipherforest demo`` (encrypted forest) and ``compare``."""

from __future__ import annotations

import io

import pytest

from cipherforest.cli import main, run_private_demo


@pytest.mark.slow  # the whole encrypted protocol, end to end
def test_private_demo_matches_the_forest_on_ciphers():
    out = io.StringIO()
    result = run_private_demo(n_estimators=3, n_jobs=1, out=out)
    text = out.getvalue()
    for line in ("plaintext RF", "RF on GIPE ciphers", "GIPE + CKKS protocol", "rounds",
                 "largest round"):
        assert line in text
    # Same random_state, same ciphers: the encrypted forest predicts as the GIPE forest.
    assert result["agreement_with_gipe_forest"] == 1.0
    assert result["accuracy_gipe_ckks"] == result["accuracy_gipe"]
    assert result["accuracy_plaintext"] > 0.85
    assert 1 <= result["rounds"] <= 30
    # Packed labels: ~6 MB up (keys included); one ciphertext per row was ~170 MB.
    assert 0 < result["bytes_sent"] < 20e6 and result["bytes_received"] > 0


def test_demo_rejects_a_bad_tree_count(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--trees", "0"])
    assert "--trees must be at least 1" in capsys.readouterr().err
