"""Run the evaluation (:func:`run_experiments`) and write the report folder.

Folder layout::

    report.md, report.html        the report (the HTML embeds its figures)
    tables/*.csv                   every table of the report, plus runs.csv (one row per fold)
    figures/*.png                  time chart, leakage heatmaps (one per dataset)
    config.json                    the configuration that produced it
    cache/                         per-(method, dataset, trial, fold) JSON results (default
                                   location; reused by the next run with the same parameters)
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import attack_table, figures, stats
from .config import ExperimentConfig
from .cv import run_cross_validation, subsample_dataset
from .datasets import BUNDLED, Dataset, load_bundled, load_csv_folder, load_openml, same_content
from .heldp_study import ckks_case, full_size_costs
from .methods import Method, build_methods
from .report import LABEL_ATTACKS, SCHEME_TITLES, build_report
from .security import scheme_security

__all__ = ["ExperimentResult", "load_datasets", "run_experiments"]



@dataclass
class ExperimentResult:
    """What a run produced: the records and tables, and where the report is."""

    folder: Path
    records: list[dict]
    accuracy: list[dict]
    comparisons: list[dict]
    win_tie_loss: list[dict]
    times: list[dict]
    leakage: list[dict]
    attacks: list[dict]
    methods: list[Method]
    datasets: list[Dataset]
    heldp_case: dict
    heldp_costs: list[dict]


def load_datasets(config: ExperimentConfig) -> list[Dataset]:
    """Resolve ``config.datasets`` (bundled, CSV-folder names, ``openml:<name or id>``)."""
    csvs = {}
    if config.csv_dir is not None:
        csvs = {d.name: d for d in load_csv_folder(config.csv_dir)}
    out = []
    for name in config.datasets:
        if name in BUNDLED:
            out.append(load_bundled(name))
        elif name.startswith("openml:"):
            out.append(load_openml(name[7:], cache_dir=config.openml_cache))
        elif name in csvs:
            out.append(csvs[name])
        else:
            where = (f"CSV folder {config.csv_dir} has {', '.join(sorted(csvs)) or 'no CSVs'}"
                     if config.csv_dir else "no CSV folder given (csv_dir / --data-dir)")
            raise ValueError(f"unknown dataset {name!r}: not bundled ({', '.join(BUNDLED)}), "
                             f"not openml:<name>, and {where}")
    for i, a in enumerate(out):
        for b in out[i + 1:]:
            if same_content(a, b):
                raise ValueError(f"datasets {a.name!r} and {b.name!r} hold the same rows (up "
                                 "to the order of rows and columns and the class names): "
                                 "keep one")
    return out


def run_experiments(config: ExperimentConfig, out_dir, *, cache_dir=None,
                    progress: bool = True, stream=None) -> ExperimentResult:
    """Run every method on every dataset, the leakage analysis, and write the report."""
    folder = Path(out_dir)
    cache = Path(cache_dir) if cache_dir is not None else folder / "cache"
    # Everything that can refuse the run is checked before any folder is made.
    full = load_datasets(config)
    alpha_rows = {d.name: d.y.shape[0] for d in full}
    datasets = [subsample_dataset(d, config.max_rows, config.seed) for d in full]
    methods = build_methods(config)
    keys = [m.key for m in methods]
    if config.reference not in keys:
        raise ValueError(f"reference method {config.reference!r} is not among the methods "
                         f"run: {', '.join(keys)}")
    (folder / "tables").mkdir(parents=True, exist_ok=True)
    (folder / "figures").mkdir(parents=True, exist_ok=True)
    _warm_up(methods, datasets[0])
    records = run_cross_validation(
        datasets, methods, trials=config.trials, folds=config.folds,
        n_estimators=config.n_estimators, cache_dir=cache, alpha_rows=alpha_rows,
        protocol_trials=config.protocol_trials, protocol_folds=config.protocol_folds,
        simulated_trials=config.simulated_trials,
        seed=config.seed, n_jobs=config.n_jobs,
        progress=progress, stream=stream)
    accuracy = stats.accuracy_table(records)
    comparisons = stats.compare_to_reference(records, config.reference)
    wtl = stats.win_tie_loss(comparisons)
    labels = {m.key: m.label for m in methods}
    measured = {m.key for m in methods if m.time_measured}
    times = [t | {"measured": t["method"] in measured} for t in stats.time_table(records)]
    leakage, heatmaps = _leakage(datasets, config, folder)
    attacks: list[dict] = []
    if config.attacks:
        attacks = attack_table.attack_rows(
            datasets, max_rows=config.attack_max_rows,
            proximity_trees=config.attack_proximity_trees, draws=config.attack_draws,
            protocol_rows=config.attack_protocol_rows,
            protocol_trees=config.attack_protocol_trees, seed=config.seed)
        _attach_accuracy(attacks, accuracy)
    heldp_case, heldp_costs = {}, []
    if "heldp_rf" in keys:
        heldp_case, heldp_costs = ckks_case(datasets, config), full_size_costs(full, config)
    result = ExperimentResult(folder, records, accuracy, comparisons, wtl, times, leakage,
                              attacks, methods, datasets, heldp_case, heldp_costs)
    _write_tables(result)
    figures.time_figure([t for t in times if t["measured"]], labels,
                        {m.key: _workload(m, config) for m in methods},
                        folder / "figures" / "times.png")
    tradeoff = _value_tradeoff(result, config)
    if tradeoff:
        figures.tradeoff_figure(tradeoff, folder / "figures" / "tradeoff_value.png",
                                "feature-value security: mean 1 − L (0 = plaintext)")
    label_points = _label_tradeoff(attacks)
    if label_points:
        figures.tradeoff_figure(label_points, folder / "figures" / "tradeoff_labels.png",
                                "best label attack's success (mean over datasets)")
    report = build_report(result, config, full, heatmaps, bool(tradeoff), bool(label_points))
    _write_text(folder / "report.md", report.markdown())
    _write_text(folder / "report.html", report.html(folder))
    _write_text(folder / "config.json", json.dumps(config.to_dict(), indent=2, default=str))
    return result


def _scheme_of(method: Method, config: ExperimentConfig) -> str | None:
    """The leakage scheme whose view of the features a method's server holds."""
    key = method.key
    if key in ("rf_ours", "rf_sklearn"):
        return "plaintext"
    if key.startswith("gipe_rf_"):
        return f"gipe_{method.params['mode']}"
    if method.protocol:
        return f"gipe_{method.params['gipe_mode']}"
    if key == "ope_rf":
        return "ope"
    if key.startswith("anony_rf") and method.params.get("k") == config.leakage_k:
        return "kanon"
    return None


def _value_tradeoff(result: ExperimentResult, config: ExperimentConfig) -> list[dict]:
    """Accuracy against the bitwise security of what the method's server sees."""
    security: dict[str, list[float]] = {}
    for row in result.leakage:
        security.setdefault(row["scheme"], []).append(row["mean_security"])
    points = []
    for m in result.methods:
        scheme = _scheme_of(m, config)
        acc = [a["mean"] for a in result.accuracy if a["method"] == m.key]
        if scheme is None or not acc or (scheme != "plaintext" and scheme not in security):
            continue
        value = 0.0 if scheme == "plaintext" else float(np.mean(security[scheme]))
        points.append({"method": m.key, "label": m.label, "scheme": scheme,
                       "accuracy": float(np.mean(acc)), "privacy": value})
    return points


# The method whose server has each attack row's view (keys: the attack table's schemes).
_ACCURACY_OF = {"plaintext": "rf_ours", "gipe_paper": "gipe_rf_paper",
                "gipe_order": "gipe_rf_order", "gipe_quantile": "gipe_rf_quantile",
                "ope": "ope_rf",
                "protocol, paper (GIPE paper, paper's leaf rule)": "sim_gini_paper_reveal",
                "protocol, Gini selection (hidden leaves)": "gipe_ckks_gini",
                "protocol, library defaults (rr, ε = 2)": "gipe_ckks_rr"}


def _attach_accuracy(rows: list[dict], accuracy: list[dict]) -> None:
    """Each attack row gets the CV accuracy of the method whose server has that view."""
    acc = {(a["dataset"], a["method"]): a["mean"] for a in accuracy}
    for row in rows:
        row["accuracy"] = acc.get((row["dataset"], _ACCURACY_OF.get(row["scheme"])), np.nan)
        best = [row[k] for k in LABEL_ATTACKS if k in row and not np.isnan(row[k])]
        row["best label attack"] = max(best) if best else np.nan


def _workload(method: Method, config: ExperimentConfig) -> str:
    """What a method's time measures: the forest size and the training rows."""
    rows = "all training rows" if config.max_rows is None else (
        f"datasets cut to {config.max_rows} rows")
    if not method.protocol:
        return f"{config.n_estimators} trees, {rows}"
    trees = method.params.get("n_estimators") or config.n_estimators
    limit = method.params.get("max_train_rows")
    return f"encrypted protocol, {trees} trees, " + (
        f"≤ {limit} training rows" if limit else rows)


def _label_tradeoff(rows: list[dict]) -> list[dict]:
    points = []
    for scheme in dict.fromkeys(r["scheme"] for r in rows):
        mine = [r for r in rows if r["scheme"] == scheme and not np.isnan(r["accuracy"])]
        if mine:
            points.append({"label": SCHEME_TITLES.get(scheme, scheme),
                           "accuracy": float(np.mean(
                [r["accuracy"] for r in mine])), "privacy": float(np.mean(
                    [r["best label attack"] for r in mine]))})
    return points


def _warm_up(methods: list[Method], data: Dataset) -> None:
    """Compile numba kernels and import baselines before anything is timed (not recorded):
    the encrypted protocol too, whose first fit would otherwise carry the compilation of
    its kernels; not the simulations, whose time is not measured."""
    from .methods import ForestSetting

    rows = np.concatenate([np.flatnonzero(data.y == c)[:15] for c in np.unique(data.y)])
    for method in methods:
        if not method.protocol or method.time_measured:
            method.run(data.X[rows], data.y[rows], data.X[rows], ForestSetting(n_estimators=2))


def _leakage(datasets: list[Dataset], config: ExperimentConfig, folder: Path):
    rows, heatmaps = [], []
    for i, data in enumerate(datasets):
        rng = np.random.default_rng(config.seed + i)
        feature = int(rng.integers(data.X.shape[1]))
        sec = scheme_security(data.X[:, feature], data.y, n_bits=config.leakage_bits,
                              n_samples=config.leakage_samples,
                              dp_epsilon=config.leakage_dp_epsilon, k=config.leakage_k,
                              random_state=config.seed)
        titles = dict(SCHEME_TITLES, dp=f"local DP ε={config.leakage_dp_epsilon:g}",
                      kanon=f"k-anonymity k={config.leakage_k}")
        name = f"leakage_{data.name}.png"
        figures.leakage_figure(sec, titles, f"{data.name}: feature {feature}, "
                               f"{next(iter(sec.values())).shape[0]} samples, "
                               f"{config.leakage_bits}-bit", folder / "figures" / name)
        heatmaps.append((data.name, feature, f"figures/{name}"))
        for scheme, m in sec.items():
            rows.append({"dataset": data.name, "feature": feature, "scheme": scheme,
                         "mean_security": float(m.mean()),
                         "share_of_bits_known": float(np.mean(m < 0.05)),
                         **{f"bit{j + 1}": float(m[:, j].mean()) for j in range(m.shape[1])}})
    return rows, heatmaps


def _write_text(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # a report, not a secret (mkstemp creates 0600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_csv(path: Path, rows: list[dict]) -> None:
    fields = list(dict.fromkeys(k for r in rows for k in r)) or ["empty"]
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            for r in rows:
                writer.writerow({k: (json.dumps(v, sort_keys=True) if isinstance(v, dict)
                                     else v) for k, v in r.items()})
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_tables(result: ExperimentResult) -> None:
    t = result.folder / "tables"
    _write_csv(t / "runs.csv", result.records)
    _write_csv(t / "accuracy.csv", result.accuracy)
    _write_csv(t / "comparisons.csv", result.comparisons)
    _write_csv(t / "win_tie_loss.csv", result.win_tie_loss)
    _write_csv(t / "times.csv", result.times)
    _write_csv(t / "leakage.csv", result.leakage)
    if result.attacks:
        _write_csv(t / "attacks.csv", result.attacks)
    if result.heldp_case:
        _write_csv(t / "heldp_ckks_case.csv", [result.heldp_case])
        _write_csv(t / "heldp_cost_model.csv", result.heldp_costs)


