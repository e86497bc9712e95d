"""The compared methods, one small module each, and the registry that builds them.

Our methods: RF on GIPE ciphers per mode (:mod:`.gipe_rf`), the full GIPE + CKKS protocol
per split selection (:mod:`.gipe_ckks`), and its decisions on clear labels per privacy setting
(:mod:`.simulated`). Plaintext references: :mod:`.plaintext`. The paper's six baselines:
DiffPrivRFs from its library (:mod:`.diffpriv`), AnonyRFs and HEldpRFs re-implemented from
their papers (:mod:`.anony_rf`, :mod:`.heldp_rf`), and stand-ins for the MPC systems that
cannot run here (PPD-ERTs, PivotRFs, MulPRFs: :mod:`.reimplementations`). One extra
comparison that is not among the six: an OPE forest (:mod:`.ope_rf`).
"""

from __future__ import annotations

from . import (
    anony_rf,
    diffpriv,
    gipe_ckks,
    gipe_rf,
    heldp_rf,
    ope_rf,
    plaintext,
    reimplementations,
    simulated,
)
from .base import ForestSetting, Method, MethodOutput

__all__ = ["ForestSetting", "Method", "MethodOutput", "build_methods"]

# The protocol's split selections whose client answers query rounds (decrypts candidates'
# class counts): far more work per training row than the others.
_ROUND_SELECTIONS = ("gini", "dp")


def build_methods(config) -> list[Method]:
    """The methods an :class:`~cipherforest.experiments.ExperimentConfig` asks for."""
    methods = [plaintext.ours(), plaintext.sklearn()]
    methods += [gipe_rf.method(m, config.quantile_bins if m == "quantile" else None)
                for m in config.gipe_modes]
    selections = config.split_selections
    round_rows = (config.protocol_max_train_rows if config.protocol_round_max_train_rows is None
                  else config.protocol_round_max_train_rows)
    protocol_epsilons = (config.label_epsilons if config.protocol_label_epsilons is None
                         else config.protocol_label_epsilons)
    for selection in selections:
        protocol = {"n_estimators": config.protocol_trees, "max_train_rows": (
            round_rows if selection in _ROUND_SELECTIONS
            else config.protocol_max_train_rows)}
        if selection == "dp":
            methods += [gipe_ckks.method("dp", label_epsilon=eps, **protocol)
                        for eps in protocol_epsilons]
        else:
            methods.append(gipe_ckks.method(selection, **protocol))
    sim = {"n_estimators": config.simulated_trees,
           "max_train_rows": config.simulated_max_train_rows}
    for variant in config.simulated_variants:
        if variant == "paper":
            methods.append(simulated.method("gini", gipe_mode="paper", reveal_leaves=True,
                                            **sim))
        elif variant == "dp":
            methods += [simulated.method("dp", label_epsilon=eps, **sim)
                        for eps in config.label_epsilons]
        else:
            methods.append(simulated.method(variant, **sim))
    methods += [diffpriv.method(config.diffpriv_epsilon), anony_rf.method(config.anonymity_k),
                reimplementations.ppd_erts(), reimplementations.pivot_rfs(config.pivot_depth),
                reimplementations.mulprfs(), heldp_rf.method(config.heldp), ope_rf.method()]
    if config.methods is not None:
        unknown = set(config.methods) - {m.key for m in methods}
        if unknown:
            raise ValueError(f"unknown or unavailable methods: {', '.join(sorted(unknown))}; "
                             f"available: {', '.join(m.key for m in methods)}")
        methods = [m for m in methods if m.key in config.methods]
    return methods
