"""The report of a run: every table, figure reference and paragraph, as a :class:`Report`."""

from __future__ import annotations

import math

import numpy as np

from .datasets import BUNDLED_SOURCES
from .heldp_study import CUTOFF_SECONDS
from .render import Report

__all__ = ["LABEL_ATTACKS", "SCHEME_TITLES", "build_report"]

SCHEME_TITLES = {"gipe_paper": "GIPE (paper)", "gipe_order": "GIPE (order)",
                 "gipe_quantile": "GIPE (quantile)", "ope": "OPE", "dp": "local DP",
                 "kanon": "k-anonymity", "he": "HE"}
LABEL_ATTACKS = ("alternation", "shared cipher", "proximity", "transcript leaf union")


def _fmt(x: float, digits: int = 2) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def build_report(result, config, full, heatmaps, tradeoff: bool,
                 label_tradeoff: bool) -> Report:
    """The report of ``result`` (an :class:`~.run.ExperimentResult`) run with ``config``."""
    r = Report("cipherforest evaluation: accuracy, time, leakage")
    labels = {m.key: m.label for m in result.methods}
    ref = labels[config.reference]
    r.heading("What ran")
    r.bullets([
        f"{config.trials} trial(s) × {config.folds}-fold stratified CV (shuffle seed = "
        f"{config.seed} + trial); {config.n_estimators} trees, ⌊√d⌋ features per split, "
        "α (min samples to split) = 10 below 20,000 rows else 100.",
        f"Reference for win/tie/loss: **{ref}** (paired t-test at 95 % over the folds both "
        "ran).",
        f"Leakage: one random feature per dataset scaled to {config.leakage_bits}-bit "
        f"integers, {config.leakage_samples} samples; local DP ε = "
        f"{config.leakage_dp_epsilon:g}, k-anonymity k = {config.leakage_k}.",
        *(config.notes or ()),
        *([f"The encrypted protocol ran in the first {config.protocol_folds} fold(s) of "
           "each of its trials only."] if config.protocol_folds else []),
    ])
    rows = []
    for data, original in zip(result.datasets, full, strict=True):
        alpha = 10 if original.y.shape[0] < 20_000 else 100
        origin, licence = BUNDLED_SOURCES.get(data.name, ("", "", data.source, "—"))[2:]
        rows.append([data.name, f"{data.y.shape[0]:,}"
                     + (f" of {original.y.shape[0]:,}" if data is not original else ""),
                     data.X.shape[1], data.n_classes, alpha, data.source, origin, licence])
    r.table(["dataset", "rows used", "features", "classes", "α", "read from", "data",
             "licence"], rows, numeric=False)
    r.heading("Methods", 3)
    r.table(["key", "method", "kind", "what it is"],
            [[f"`{m.key}`", m.label, m.kind, m.description] for m in result.methods],
            numeric=False)

    r.heading("Accuracy")
    r.paragraph(f"Mean ± std accuracy (%) over the runs. • / ◦: {ref} is significantly "
                "better / worse than the method on that dataset (paired t-test, 95 %); "
                "the last column counts the reference's wins/ties/losses over datasets.")
    acc = {(a["dataset"], a["method"]): a for a in result.accuracy}
    cmp = {(c["dataset"], c["method"]): c for c in result.comparisons}
    wtl = {w["method"]: w for w in result.win_tie_loss}
    names = [d.name for d in result.datasets]
    rows = []
    for m in result.methods:
        cells = [m.label]
        for d in names:
            a = acc.get((d, m.key))
            if a is None:
                cells.append("—")
                continue
            mark = {"win": " •", "loss": " ◦"}.get(cmp.get((d, m.key), {}).get("outcome"), "")
            cells.append(f"{100 * a['mean']:.2f} ± {100 * a['std']:.2f}{mark}")
        w = wtl.get(m.key)
        cells.append("reference" if m.key == config.reference else
                     f"{w['win']}/{w['tie']}/{w['loss']}" + (f" ({w['n/a']} n/a)"
                                                             if w["n/a"] else ""))
        rows.append(cells)
    r.table(["method", *names, "win/tie/loss"], rows)

    r.heading("Time")
    r.paragraph("Mean seconds per fold on this machine (wall clock, shared CPU). Encryption "
                "counts as training/prediction time of the encrypted methods. Stand-ins for "
                "systems that cannot run here and the simulated encrypted forests (decisions "
                "on clear labels) are **not measured**; HEldpRFs' cell is the cost model's "
                "prediction of its encrypted training (see below), not a measurement.")
    tim = {(t["dataset"], t["method"]): t for t in result.times}
    predicted = {c["dataset"]: c["predicted_seconds"] for c in result.heldp_costs}
    rows = []
    for m in result.methods:
        cells = [m.label]
        for d in names:
            t = tim.get((d, m.key))
            if t is None:
                cells.append("—")
            elif m.key == "heldp_rf" and d in predicted:
                cells.append(f"predicted {predicted[d]:.3g} / —")
            elif not m.time_measured:
                cells.append("not measured")
            else:
                cells.append(f"{t['fit_seconds']:.3g} / {t['predict_seconds']:.3g}")
        rows.append(cells)
    r.table(["method (fit s / predict s)", *names], rows)
    r.image("figures/times.png", "training and prediction time per method (log scale)")
    protocol = [x for x in result.records if x["method"].startswith("gipe_ckks")
                and x.get("extra")]
    if protocol:
        r.heading("Encrypted protocol runs", 3)
        rows = []
        for d in names:
            for m in result.methods:
                mine = [x for x in protocol if x["dataset"] == d and x["method"] == m.key]
                if mine:
                    e = [x["extra"] for x in mine]
                    rows.append([d, m.label, len(mine), e[0]["trees"],
                                 int(np.mean([x["train_rows"] for x in e])),
                                 _fmt(np.mean([x["rounds"] for x in e]), 1),
                                 _fmt(np.mean([x["bytes_sent"] for x in e]) / 1e6, 1),
                                 _fmt(np.mean([x["server_seconds"] for x in e]), 1)])
        r.table(["dataset", "method", "folds", "trees", "training rows", "rounds",
                 "MB uploaded", "server s"], rows)

    if result.heldp_case:
        _heldp_section(r, result, config)

    r.heading("Bitwise leakage")
    r.paragraph("Bitwise security 1 − L (Roy et al., CCS 2022; the paper's appendix E) of one "
                "feature per dataset: rows are the ranks of the sampled values, columns the "
                "bits (1 = most significant). White = the adversary knows the bit; the colour "
                "scale is fixed to [0, 1] on every panel and no value is altered for display.")
    lk = {(x["dataset"], x["scheme"]): x for x in result.leakage}
    schemes = list(dict.fromkeys(x["scheme"] for x in result.leakage))
    r.table(["scheme (mean 1 − L)", *names],
            [[SCHEME_TITLES.get(s, s), *[_fmt(lk[(d, s)]["mean_security"], 3)
                                         if (d, s) in lk else "—" for d in names]]
             for s in schemes])
    for name, feature, path in heatmaps:
        r.image(path, f"bitwise security on {name}, feature {feature}")
    if tradeoff:
        r.paragraph("Accuracy against the bitwise security of the feature values each "
                    "method's server holds (mean over datasets; plaintext = 0 by definition; "
                    "the protocol's server holds GIPE cipher1; DiffPrivRFs perturbs inside "
                    "training, not the features, so it has no point here).")
        r.image("figures/tradeoff_value.png", "accuracy against feature-value security")

    r.heading("Attacks")
    if result.attacks:
        r.paragraph(
            "Label attacks (share of the labels the attacker was not given that it guesses "
            "right; majority = the constant guess) and value recovery (share of values "
            "within 5 % of the feature's range, guessed from cipher ranks and an auxiliary "
            f"sample; ρ = Spearman) on at most {config.attack_max_rows} rows per dataset; "
            f"proximity on a {config.attack_proximity_trees}-tree forest grown on the "
            f"ciphers; known-label attacks use one known row per class ({config.attack_draws}"
            " draws). Protocol rows: the real CKKS protocol on at most "
            f"{config.attack_protocol_rows} rows, {config.attack_protocol_trees} trees, "
            "attacked from its recorded transcript. Accuracy: CV accuracy of the method whose "
            "server has that view (RF on those ciphers; for the protocol rows the protocol "
            "run with that split selection, the simulated forest for the paper's flow).")
        cols = ["accuracy", "majority baseline", *LABEL_ATTACKS, "value within 5 %",
                "value baseline", "value Spearman"]
        rows = []
        for a in result.attacks:
            rows.append([a["dataset"], SCHEME_TITLES.get(a["scheme"], a["scheme"]),
                         *[_fmt(100 * a[c], 1) if c != "value Spearman" and c in a
                           else _fmt(a.get(c, math.nan), 3) for c in cols]])
        r.table(["dataset", "view", "accuracy %", "majority %", "alternation %",
                 "shared cipher %", "proximity %", "leaf union %", "values ±5 %",
                 "values baseline %", "ρ"], rows)
        if label_tradeoff:
            r.image("figures/tradeoff_labels.png", "accuracy against label attack success")
    else:
        reason = ("disabled in the configuration" if not config.attacks else
                  "this version of cipherforest has no `cipherforest.privacy.attacks`")
        r.paragraph(f"Not run: {reason}.")
    return r


def _heldp_section(r: Report, result, config) -> None:
    c, h = result.heldp_case, config.heldp
    r.heading("HEldpRFs through CKKS and its cost model", 3)
    r.paragraph(
        f"A small case ran through CKKS (SEAL, ring degree {c['poly_degree']}, "
        f"{c['levels']} levels of 40 bits): {c['dataset']}, {c['rows']} training rows "
        f"(stratified), its first {c['features']} features, {c['thresholds']} thresholds, "
        f"{c['trees']} tree(s) of depth {c['depth']}. It took {c['seconds']:.1f} s "
        f"(keys {c['key_seconds']:.1f} s more; client encryption and decryption "
        f"{c['client_seconds']:.1f} s of it) for {c['operations']:,} homomorphic operations "
        f"({c['multiplications']:,} ciphertext multiplications); the cost model, from "
        "operation counts × per-level operation times measured on a fresh context, "
        f"predicted {c['predicted_seconds']:.1f} s ({c['predicted_seconds'] / c['seconds']:.2f}"
        f" × the measurement). The decrypted soft counts differ from the clear-text form's by "
        f"at most {c['max_count_gap']:.2g}; the splits are "
        f"{'identical' if c['same_splits'] else '**not** identical'}, and the two forests "
        f"predict the same class on {100 * c['prediction_agreement']:.1f} % of the "
        f"{c['test_rows']} remaining rows.")
    r.paragraph(
        f"Predicted encrypted training of the accuracy table's HEldpRFs ({config.n_estimators} "
        f"trees of depth {h.depth}, {h.n_thresholds} thresholds, degree-{h.degree} step, "
        "⌊√d⌋ candidate features per node, every training row of a fold), against the paper's "
        f"cut-off of {CUTOFF_SECONDS:.0e} s. Client = encryption and decryption.")
    r.table(["dataset", "training rows", "features", "classes", "ring", "chunks",
             "ciphertext products", "predicted s", "client s", f"within {CUTOFF_SECONDS:.0e} s"],
            [[x["dataset"], f"{x['train_rows']:,}", x["features"], x["classes"],
              x["poly_degree"], x["chunks"], f"{x['multiplications']:,}",
              f"{x['predicted_seconds']:,.0f}", f"{x['client_seconds']:,.0f}",
              "yes" if x["within_cutoff"] else "**no**"] for x in result.heldp_costs])
