"""Summaries of the cross-validation records: mean ± std, paired t-tests, win/tie/loss."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import ttest_rel

__all__ = ["accuracy_table", "compare_to_reference", "time_table", "win_tie_loss"]

SIGNIFICANCE = 0.05


def accuracy_table(records: list[dict]) -> list[dict]:
    """One row per (dataset, method): mean and std accuracy over its runs."""
    groups: dict[tuple[str, str], list[float]] = {}
    for r in records:
        groups.setdefault((r["dataset"], r["method"]), []).append(r["accuracy"])
    return [{"dataset": d, "method": m, "mean": float(np.mean(a)), "std": float(np.std(a)),
             "runs": len(a)} for (d, m), a in groups.items()]


def compare_to_reference(records: list[dict], reference: str) -> list[dict]:
    """Paired t-test of ``reference`` against every other method, per dataset.

    Pairs are the (trial, fold) both ran. ``outcome`` is from the reference's side: "win"
    (reference significantly more accurate at 95 %), "loss", "tie", or "n/a" when fewer than
    two pairs exist. Identical accuracies on every pair count as a tie (p = 1).
    """
    by_key = {(r["dataset"], r["method"], r["trial"], r["fold"]): r["accuracy"]
              for r in records}
    datasets = list(dict.fromkeys(r["dataset"] for r in records))
    methods = list(dict.fromkeys(r["method"] for r in records))
    rows = []
    for dataset in datasets:
        ref_runs = {(t, f): a for (d, m, t, f), a in by_key.items()
                    if d == dataset and m == reference}
        for method in methods:
            if method == reference:
                continue
            pairs = [(ref_runs[(t, f)], a) for (d, m, t, f), a in by_key.items()
                     if d == dataset and m == method and (t, f) in ref_runs]
            row = {"dataset": dataset, "method": method, "pairs": len(pairs),
                   "difference": math.nan, "p_value": math.nan, "outcome": "n/a"}
            if len(pairs) >= 2:
                ref, other = np.array(pairs).T
                diff = ref - other
                p = 1.0 if not np.any(diff) else float(ttest_rel(ref, other).pvalue)
                if math.isnan(p):  # constant non-zero difference: t is infinite
                    p = 0.0
                outcome = "tie"
                if p < SIGNIFICANCE:
                    outcome = "win" if diff.mean() > 0 else "loss"
                row.update(difference=float(diff.mean()), p_value=p, outcome=outcome)
            rows.append(row)
    return rows


def win_tie_loss(comparisons: list[dict]) -> list[dict]:
    """Counts per method over datasets: the reference's wins, ties, losses (and n/a)."""
    counts: dict[str, dict[str, int]] = {}
    for row in comparisons:
        c = counts.setdefault(row["method"], {"win": 0, "tie": 0, "loss": 0, "n/a": 0})
        c[row["outcome"]] += 1
    return [{"method": m} | c for m, c in counts.items()]


def time_table(records: list[dict]) -> list[dict]:
    """Mean fit and predict seconds per (dataset, method), over runs computed this time
    or earlier (cached records keep the seconds measured when they ran)."""
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in records:
        groups.setdefault((r["dataset"], r["method"]), []).append(
            (r["fit_seconds"], r["predict_seconds"]))
    return [{"dataset": d, "method": m, "fit_seconds": float(np.mean([t[0] for t in v])),
             "predict_seconds": float(np.mean([t[1] for t in v])), "runs": len(v)}
            for (d, m), v in groups.items()]
