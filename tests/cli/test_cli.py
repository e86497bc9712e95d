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


def test_no_command_prints_help_and_succeeds(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: cipherforest") and "experiments" in out


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flags(flag, capsys):
    from cipherforest import __version__

    with pytest.raises(SystemExit) as exit_info:
        main([flag])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"cipherforest {__version__}"


def _parsers(parser):
    """``(prog, parser)`` of ``parser`` and every subcommand below it."""
    import argparse

    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_option_has_help():
    from cipherforest.cli import build_parser

    missing = [f"{prog} {action.option_strings}" for prog, parser in _parsers(build_parser())
               for action in parser._actions
               if action.option_strings and not (action.help or "").strip()]
    assert missing == []
