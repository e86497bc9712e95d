"""Shared test setup: the private forest's privacy ledger lives in a temporary directory."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _privacy_ledger_in_a_temporary_directory(tmp_path_factory):
    """Every client fit charges the privacy ledger; tests must not write the user's
    ``~/.cipherforest`` (subprocesses inherit the variable)."""
    previous = os.environ.get("CIPHERFOREST_PRIVACY_LEDGER")
    os.environ["CIPHERFOREST_PRIVACY_LEDGER"] = str(tmp_path_factory.mktemp("privacy-ledger"))
    yield
    if previous is None:
        del os.environ["CIPHERFOREST_PRIVACY_LEDGER"]
    else:
        os.environ["CIPHERFOREST_PRIVACY_LEDGER"] = previous


@pytest.fixture
def fixed_secret_ledger(tmp_path, monkeypatch):
    """A privacy ledger directory whose secret is a fixed 32 bytes instead of the OS's: the
    memoized randomized labels are then the same on every run (a PRF under a known key is
    still a PRF; tests that measure the draws must not depend on the OS's bytes)."""
    import secrets

    from cipherforest.privacy.ledger import PrivacyLedger

    path = tmp_path / "fixed-secret-ledger"
    with monkeypatch.context() as patch:
        patch.setattr(secrets, "token_bytes", lambda n: bytes(range(n)))
        PrivacyLedger(path)
    return str(path)
