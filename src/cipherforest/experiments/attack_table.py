"""The attack table: label and value recovery per dataset and cipher scheme.

Uses :mod:`cipherforest.privacy.attacks`. Per
dataset (a stratified subsample of at most ``max_rows`` rows: the proximity attack builds an
n × n matrix) and per scheme — plaintext, GIPE in each mode, the OPE baseline — the server's
view is the whole subsample encrypted by the scheme, and:

* ``alternation``: binary labels from the ciphers alone (class counts known);
* ``shared cipher``: label spreading over rows sharing a cipher, one known label per class;
* ``proximity``: each row takes the label of the known row it lands with most often in a
  ``proximity_trees``-tree forest grown on the ciphers (the trees the server grows);
* ``value within 5 %``: values recovered from cipher ranks and an auxiliary sample (the
  other half of the rows), the fraction within 5 % of the feature's range (and Spearman ρ).

Label successes are fractions of the rows whose label the attacker was not given, beside
the majority-class baseline. Known-label attacks average ``draws`` draws of the known rows.

With ``protocol_rows`` the real protocol also runs (CKKS, embedded server recorded by
:class:`~cipherforest.privacy.attacks.RecordingServer`) on a smaller subsample, in the
paper's configuration (GIPE paper mode, the paper's leaf rule) and the library defaults,
and the transcript attack (rows sharing a client-declared leaf share a label) is scored.
"""

from __future__ import annotations

import numpy as np

from .baselines import OrderPreservingEncryptor
from .common import GIPE_MODES, experiment_ledger, gipe_encryptor, stratified_subsample
from .datasets import Dataset

__all__ = ["attack_rows"]

def _encrypt(scheme: str, X: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    if scheme == "plaintext":
        return X.astype(np.float64)
    if scheme == "ope":
        return OrderPreservingEncryptor(random_state=seed).fit_transform(X)
    return gipe_encryptor(scheme[5:], seed).fit_transform(X, y).astype(np.float64)


def _label_attacks(C: np.ndarray, y: np.ndarray, proximity_trees: int, draws: int,
                   seed: int) -> dict:
    from ..ensemble import RandomForestClassifier
    from ..privacy import attacks

    counts = np.bincount(y)
    out = {"majority baseline": attacks.majority_baseline(y), "alternation": np.nan}
    if counts.shape[0] == 2:
        out["alternation"] = attacks.score_labels(
            "alternation", attacks.alternation_labels(C, counts), y).success
    forest = RandomForestClassifier(proximity_trees, random_state=seed).fit(C, y)
    proximity = attacks.proximity_matrix(attacks.forest_trees(forest), C)
    out["shared cipher"], out["proximity"] = attacks.known_label_success(C, proximity, y,
                                                                         draws, seed)
    return out


def _value_attack(scheme: str, X: np.ndarray, y: np.ndarray, seed: int) -> dict:
    from ..privacy import attacks

    rng = np.random.default_rng(seed)
    half = rng.permutation(X.shape[0])
    aux, target = half[: X.shape[0] // 2], half[X.shape[0] // 2:]
    result = attacks.score_value_recovery(_encrypt(scheme, X[target], y[target], seed),
                                          X[target], X[aux])
    return {"value within 5 %": result.within, "value baseline": result.baseline_within,
            "value Spearman": result.rank_correlation}


def _protocol_attacks(X: np.ndarray, y: np.ndarray, params: dict, n_trees: int, draws: int,
                      seed: int) -> dict:
    from ..privacy import PrivateForestClient, PrivateForestServer, attacks

    counts = np.bincount(y)
    recorder = attacks.RecordingServer(PrivateForestServer())
    client = PrivateForestClient(n_estimators=n_trees, max_bins=16, random_state=seed,
                                 server=recorder, privacy_ledger=experiment_ledger(), **params)
    client.fit(X, y)
    transcript = recorder.transcript
    C = transcript.X_cipher
    leaves = attacks.declared_leaves(transcript)
    bootstrap = attacks.server_bootstrap_counts(transcript.first("setup"))
    union = []
    for draw in range(draws):
        rows, labels = attacks.one_known_per_class(y, seed + draw)
        union.append(attacks.score_labels("leaf union", attacks.leaf_union_labels(
            C, transcript.trees, leaves, bootstrap, rows, labels, counts), y, rows).success)
    client.close()
    return {"majority baseline": attacks.majority_baseline(y),
            "transcript leaf union": float(np.mean(union)), "declared leaves": len(leaves)}


PROTOCOL_CONFIGS = {"protocol, paper (GIPE paper, paper's leaf rule)":
                    {"gipe_mode": "paper", "reveal_leaves": True, "split_selection": "gini"},
                    "protocol, Gini selection (hidden leaves)": {"split_selection": "gini"},
                    "protocol, library defaults (rr, ε = 2)": {}}


def attack_rows(datasets: list[Dataset], *, max_rows: int = 600, proximity_trees: int = 30,
                draws: int = 3, protocol_rows: int | None = None, protocol_trees: int = 5,
                seed: int = 0, progress=None) -> list[dict]:
    """One row per (dataset, scheme) with every attack's success (see the module doc)."""
    schemes = ["plaintext", *[f"gipe_{m}" for m in GIPE_MODES], "ope"]
    rows = []
    for data in datasets:
        keep = stratified_subsample(data.y, max_rows, seed)
        X, y = data.X[keep], data.y[keep]
        for scheme in schemes:
            C = _encrypt(scheme, X, y, seed)
            row = {"dataset": data.name, "scheme": scheme, "rows": int(y.shape[0])}
            row |= _label_attacks(C, y, proximity_trees, draws, seed)
            row |= _value_attack(scheme, X, y, seed)
            rows.append(row)
            if progress is not None:
                progress(f"attacks {data.name} {scheme}")
        if protocol_rows:
            keep = stratified_subsample(data.y, protocol_rows, seed)
            for name, params in PROTOCOL_CONFIGS.items():
                row = {"dataset": data.name, "scheme": name, "rows": int(keep.shape[0])}
                row |= _protocol_attacks(data.X[keep], data.y[keep], params, protocol_trees,
                                         draws, seed)
                rows.append(row)
                if progress is not None:
                    progress(f"attacks {data.name} {name}")
    return rows
