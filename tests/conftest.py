"""Shared test setup: the private forest's privacy ledger lives in a temporary directory,
under a fixed secret so that the randomized labels every private fit draws are the same on
every run."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _privacy_ledger_in_a_temporary_directory(tmp_path_factory):
    """Every client fit charges the privacy ledger; tests must not write the user's
    ``~/.cipherforest`` (subprocesses inherit the variable)."""
    previous = os.environ.get("CIPHERFOREST_PRIVACY_LEDGER")
    path = tmp_path_factory.mktemp("privacy-ledger")
    with pytest.MonkeyPatch.context() as patch:
        _create_fixed_secret_ledger(path, patch)
    os.environ["CIPHERFOREST_PRIVACY_LEDGER"] = str(path)
    yield
    if previous is None:
        del os.environ["CIPHERFOREST_PRIVACY_LEDGER"]
    else:
        os.environ["CIPHERFOREST_PRIVACY_LEDGER"] = previous


@pytest.fixture
def fixed_secret_ledger(tmp_path, monkeypatch):
    """A fresh privacy ledger directory of its own (nothing spent yet) whose secret is a fixed
    32 bytes instead of the OS's, as the session's ledger."""
    path = tmp_path / "fixed-secret-ledger"
    with monkeypatch.context() as patch:
        _create_fixed_secret_ledger(path, patch)
    return str(path)


def _create_fixed_secret_ledger(path, patch):
    """Create the ledger at ``path`` with the secret ``bytes(range(32))`` (a PRF under a
    known key is still a PRF; a test's outcome must not depend on the OS's bytes)."""
    import secrets

    from cipherforest.privacy.ledger import PrivacyLedger

    patch.setattr(secrets, "token_bytes", lambda n: bytes(range(n)))
    PrivacyLedger(path)
