"""The evaluation report end to end: a tiny quick run into a temporary folder."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from cipherforest.cli import main
from cipherforest.experiments import quick_config, run_experiments

TINY = {"datasets": ("wine", "iris"), "max_rows": 90, "trials": 1, "folds": 2,
        "n_estimators": 3, "protocol_trees": 2, "protocol_max_train_rows": 40,
        "simulated_trees": 2, "simulated_variants": ("gini", "paper"),
        "attack_max_rows": 60, "attack_protocol_rows": 40,
        "leakage_samples": 60}


def _csv(path):
    with path.open() as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    stream = io.StringIO()
    result = run_experiments(quick_config(**TINY), folder, stream=stream)
    return folder, result, stream.getvalue()


def test_every_table_and_figure_is_there_and_consistent(tiny_run):
    folder, result, progress = tiny_run
    n_datasets, n_methods = 2, len(result.methods)
    assert f"{len(result.records)}/{len(result.records)}" in progress  # the bar reached the end
    for name in ("runs", "accuracy", "comparisons", "win_tie_loss", "times", "leakage"):
        assert (folder / "tables" / f"{name}.csv").stat().st_size > 0, name
    runs = _csv(folder / "tables" / "runs.csv")
    assert len(runs) == n_datasets * 2 * n_methods  # every method ran on every fold
    assert all(0.0 <= float(r["accuracy"]) <= 1.0 for r in runs)
    accuracy = _csv(folder / "tables" / "accuracy.csv")
    assert len(accuracy) == n_datasets * n_methods
    wtl = _csv(folder / "tables" / "win_tie_loss.csv")
    assert len(wtl) == n_methods - 1  # everyone but the reference
    for row in wtl:
        assert sum(int(row[k]) for k in ("win", "tie", "loss", "n/a")) == n_datasets
    times = _csv(folder / "tables" / "times.csv")
    reimpl = {m.key for m in result.methods if not m.time_measured}
    assert {t["method"] for t in times if t["measured"] == "False"} == reimpl
    leakage = _csv(folder / "tables" / "leakage.csv")
    schemes = {r["scheme"] for r in leakage}
    assert {"gipe_paper", "ope", "dp", "kanon", "he"} <= schemes
    assert len(leakage) == n_datasets * len(schemes)

    figures = sorted(p.name for p in (folder / "figures").glob("*.png"))
    assert figures == ["leakage_iris.png", "leakage_wine.png", "times.png",
                       "tradeoff_labels.png", "tradeoff_value.png"]
    attacks = _csv(folder / "tables" / "attacks.csv")
    # per dataset: plaintext, 3 GIPE modes, OPE, and the protocol in 3 configurations
    assert len(attacks) == n_datasets * 8
    for row in attacks:
        assert 0.0 <= float(row["majority baseline"]) <= 1.0
        assert 0.0 <= float(row["best label attack"]) <= 1.0
        # every view's row carries the CV accuracy of the method whose server has that view
        assert 0.0 <= float(row["accuracy"]) <= 1.0, row["scheme"]
    plain = [r for r in attacks if r["scheme"] == "plaintext"]
    assert all(float(r["value Spearman"]) > 0.9 for r in plain)  # values in the clear
    md = (folder / "report.md").read_text()
    html = (folder / "report.html").read_text()
    for png in figures:
        assert f"figures/{png}" in md
        assert (folder / "figures" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert html.count("data:image/png;base64,") == len(figures)  # self-contained
    assert "figures/" not in html
    for m in result.methods:
        assert m.label in md
    assert md.count("not measured") >= len(reimpl) * n_datasets
    assert json.loads((folder / "config.json").read_text())["folds"] == 2
    # HEldpRFs: the small CKKS run agrees with the clear form; a prediction per dataset
    (case,) = _csv(folder / "tables" / "heldp_ckks_case.csv")
    assert case["same_splits"] == "True" and float(case["max_count_gap"]) < 0.05
    assert 0.2 < float(case["predicted_seconds"]) / float(case["seconds"]) < 5
    costs = _csv(folder / "tables" / "heldp_cost_model.csv")
    assert [c["dataset"] for c in costs] == ["wine", "iris"]
    assert all(float(c["predicted_seconds"]) > 0 for c in costs)
    assert "HEldpRFs through CKKS and its cost model" in md


def test_second_run_reads_every_fold_from_the_cache(tiny_run, tmp_path):
    folder, first, _ = tiny_run
    files = sorted((folder / "cache").rglob("*.json"))
    assert len(files) == len(first.records)
    files[0].unlink()  # an interrupted run: one result missing
    again = run_experiments(quick_config(**TINY, attacks=False), tmp_path / "again",
                            cache_dir=folder / "cache", progress=False)
    assert sum(not r["cached"] for r in again.records) == 1
    same = {(r["dataset"], r["method"], r["fold"]): r["accuracy"] for r in first.records}
    for r in again.records:
        if r["cached"]:
            assert r["accuracy"] == same[(r["dataset"], r["method"], r["fold"])]


def test_cli_rejects_unknown_datasets_and_methods(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["experiments", "--quick", "--out", str(tmp_path), "--datasets", "nope"])
    assert "unknown dataset 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["experiments", "--quick", "--out", str(tmp_path), "--methods", "magic"])
    assert "unknown or unavailable methods: magic" in capsys.readouterr().err


def test_full_preset_is_the_documented_run_and_presets_exclude_each_other(capsys):
    from cipherforest.experiments import PAPER_DATASETS, full_config
    from cipherforest.experiments.command import main as command_main
    from cipherforest.experiments.methods import build_methods

    config = full_config()
    assert len(set(PAPER_DATASETS)) == len(PAPER_DATASETS) >= 10
    assert "cancer" not in config.datasets and config.trials == 5 and config.n_estimators == 100
    assert (config.protocol_trials, config.protocol_trees, config.protocol_max_train_rows,
            config.protocol_round_max_train_rows, config.simulated_trials) == (
                None, None, None, 300, 5)
    rows = {m.key: m.params["max_train_rows"] for m in build_methods(config) if m.protocol}
    # the selections without query rounds train on every row; gini and dp on at most 300
    assert rows["gipe_ckks_rr"] is rows["gipe_ckks_blind"] is None
    assert rows["gipe_ckks_gini"] == rows["gipe_ckks_dp_eps1"] == 300
    with pytest.raises(SystemExit):
        command_main(["--quick", "--full", "--out", "x"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_the_warm_up_runs_every_timed_method_before_the_folds(tmp_path, monkeypatch):
    """The first timed fit of a method must not carry the compilation of its kernels."""
    from cipherforest.experiments.methods import Method, MethodOutput

    calls: list[tuple[str, int]] = []

    def fake(key, protocol=False, measured=True):
        def run(X_train, y_train, X_test, setting):
            calls.append((key, setting.n_estimators))
            return MethodOutput(np.zeros(X_test.shape[0], dtype=int), 0.01, 0.01)

        return Method(key, key, run, {"gipe_mode": "quantile"} if protocol else {},
                      protocol=protocol, time_measured=measured)

    methods = [fake("rf_ours"), fake("real", protocol=True),
               fake("sim", protocol=True, measured=False)]
    monkeypatch.setattr("cipherforest.experiments.run.build_methods", lambda config: methods)
    config = quick_config(datasets=("iris",), folds=2, n_estimators=5, attacks=False,
                          reference="rf_ours", leakage_samples=40)
    run_experiments(config, tmp_path, progress=False)
    warm = [key for key, trees in calls if trees == 2]  # the warm-up's tiny forests
    assert warm == ["rf_ours", "real"]  # the protocol too; not the simulation
    assert calls[:2] == [("rf_ours", 2), ("real", 2)]  # before any fold
