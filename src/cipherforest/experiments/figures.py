"""PNG figures of the report (matplotlib, Agg backend, fixed colour scales)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["leakage_figure", "time_figure", "tradeoff_figure"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def time_figure(times: list[dict], labels: dict[str, str], path: Path) -> None:
    """Grouped bars per dataset, one bar per measured method; log-scale seconds; two panels
    (training, prediction)."""
    plt = _pyplot()
    datasets = list(dict.fromkeys(t["dataset"] for t in times))
    methods = list(dict.fromkeys(t["method"] for t in times))
    lookup = {(t["dataset"], t["method"]): t for t in times}
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.6 * len(datasets) + 4), 8), sharex=True)
    width = 0.8 / max(len(methods), 1)
    x = np.arange(len(datasets))
    colours = plt.get_cmap("tab20")(np.linspace(0, 1, max(len(methods), 2)))
    for ax, column, title in zip(axes, ("fit_seconds", "predict_seconds"),
                                 ("training", "prediction"), strict=True):
        for i, m in enumerate(methods):
            vals = [lookup[(d, m)][column] if (d, m) in lookup else np.nan for d in datasets]
            ax.bar(x + (i - (len(methods) - 1) / 2) * width, vals, width,
                   label=labels.get(m, m), color=colours[i])
        ax.set_yscale("log")
        ax.set_ylabel(f"{title} seconds per fold (log)")
        ax.grid(axis="y", alpha=0.3, which="both")
    axes[1].set_xticks(x, datasets)
    axes[0].legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def leakage_figure(security: dict[str, np.ndarray], titles: dict[str, str], heading: str,
                   path: Path) -> None:
    """One heatmap per scheme of ``1 - L`` (rows: ranks, columns: bits 1..m, MSB first).

    The colour scale is fixed to [0, 1] for every panel (white 0: bit known; red: secure);
    values are drawn as computed, nothing is clipped, smoothed or rescaled.
    """
    plt = _pyplot()
    names = list(security)
    fig, axes = plt.subplots(1, len(names), figsize=(1.9 * len(names) + 1, 4.2), sharey=True,
                             squeeze=False)
    image = None
    for ax, name in zip(axes[0], names, strict=True):
        m = security[name]
        image = ax.imshow(m, aspect="auto", cmap="Reds", vmin=0.0, vmax=1.0,
                          interpolation="nearest",
                          extent=(0.5, m.shape[1] + 0.5, m.shape[0] + 0.5, 0.5))
        ax.set_title(f"{titles.get(name, name)}\nmean {m.mean():.3f}", fontsize=8)
        ax.set_xticks(range(1, m.shape[1] + 1))
        ax.set_xlabel("bit", fontsize=7)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel("rank of the sampled value")
    fig.suptitle(f"{heading}; bit 1 = most significant", fontsize=9)
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="bitwise security 1 − L")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def tradeoff_figure(points: list[dict], path: Path, ylabel: str) -> None:
    """One labelled marker per method: accuracy (x) against a privacy measure (y)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 5))
    markers = "osD^vP*Xh<>p"
    for i, p in enumerate(points):
        ax.scatter(p["accuracy"], p["privacy"], s=50, marker=markers[i % len(markers)],
                   label=p["label"])
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_xlabel("accuracy (mean over datasets and folds)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
