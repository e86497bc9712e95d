"""PNG figures of the report (matplotlib, Agg backend, fixed colour scales).

Legends sit outside the plotting area and figures are saved with a tight bounding box, so a
long legend widens the image instead of squeezing the axes; bars of different workloads
(forest size, training rows) never share an axis: each workload gets its own panels, titled
with it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

__all__ = ["leakage_figure", "time_figure", "tradeoff_figure"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def time_figure(times: list[dict], labels: dict[str, str], workloads: dict[str, str],
                path: Path) -> None:
    """Grouped bars per dataset, one bar per measured method, log-scale seconds.

    ``workloads[method]`` names what the method's bars measure (e.g. "100 trees, all
    training rows"); each workload gets a row of two panels (training, prediction) titled
    with it, and its own legend to the right of the row.
    """
    plt = _pyplot()
    datasets = list(dict.fromkeys(t["dataset"] for t in times))
    lookup = {(t["dataset"], t["method"]): t for t in times}
    groups: dict[str, list[str]] = {}
    for m in dict.fromkeys(t["method"] for t in times):
        groups.setdefault(workloads.get(m, ""), []).append(m)
    fig = plt.figure(figsize=(max(9.0, 1.1 * len(datasets) + 5), 3.9 * len(groups)),
                     layout="constrained")
    rows = fig.subfigures(len(groups), 1, squeeze=False)[:, 0]
    x = np.arange(len(datasets))
    colours = plt.get_cmap("tab20")(np.linspace(0, 1, max(sum(map(len, groups.values())), 2)))
    colour = 0
    for sub, (workload, methods) in zip(rows, groups.items(), strict=True):
        sub.suptitle(workload, fontsize=10, fontweight="bold")
        axes = sub.subplots(1, 2)
        width = 0.8 / len(methods)
        for ax, column, title in zip(axes, ("fit_seconds", "predict_seconds"),
                                     ("training", "prediction"), strict=True):
            for i, m in enumerate(methods):
                vals = [lookup[(d, m)][column] if (d, m) in lookup else np.nan
                        for d in datasets]
                ax.bar(x + (i - (len(methods) - 1) / 2) * width, vals, width,
                       label=labels.get(m, m), color=colours[colour + i])
            ax.set_yscale("log")
            ax.set_title(title, fontsize=9)
            ax.set_ylabel("seconds per fold (log)", fontsize=8)
            ax.grid(axis="y", alpha=0.3, which="both")
            ax.set_xticks(x, datasets, rotation=45, ha="right", fontsize=8)
            ax.tick_params(axis="y", labelsize=8)
        handles, names = axes[0].get_legend_handles_labels()
        sub.legend(handles, names, fontsize=7, loc="outside right upper")
        colour += len(methods)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def leakage_figure(security: dict[str, np.ndarray], titles: dict[str, str], heading: str,
                   path: Path) -> None:
    """One heatmap per scheme of ``1 - L`` (rows: ranks, columns: bits 1..m, MSB first).

    The colour scale is fixed to [0, 1] for every panel (white 0: bit known; red: secure);
    values are drawn as computed, nothing is clipped, smoothed or rescaled.
    """
    plt = _pyplot()
    names = list(security)
    fig, axes = plt.subplots(1, len(names), figsize=(2.2 * len(names) + 1.5, 4.6),
                             sharey=True, squeeze=False)
    image = None
    for ax, name in zip(axes[0], names, strict=True):
        m = security[name]
        image = ax.imshow(m, aspect="auto", cmap="Reds", vmin=0.0, vmax=1.0,
                          interpolation="nearest",
                          extent=(0.5, m.shape[1] + 0.5, m.shape[0] + 0.5, 0.5))
        title = textwrap.fill(titles.get(name, name), 14)
        ax.set_title(f"{title}\nmean {m.mean():.3f}", fontsize=8)
        ax.set_xticks(range(1, m.shape[1] + 1))
        ax.set_xlabel("bit", fontsize=7)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel("rank of the sampled value")
    fig.suptitle(f"{heading}; bit 1 = most significant", fontsize=9, y=1.0)
    fig.subplots_adjust(top=0.78, wspace=0.15)
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="bitwise security 1 − L")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def tradeoff_figure(points: list[dict], path: Path, ylabel: str) -> None:
    """One labelled marker per method: accuracy (x) against a privacy measure (y)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    markers = "osD^vP*Xh<>p"
    for i, p in enumerate(points):
        ax.scatter(p["accuracy"], p["privacy"], s=50, marker=markers[i % len(markers)],
                   label=p["label"])
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    ax.set_xlabel("accuracy (mean over datasets and folds)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
