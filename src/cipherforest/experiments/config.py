"""What an evaluation run does: :class:`ExperimentConfig`, the full and the quick presets."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from .methods.heldp_rf import HEldpSetting

__all__ = ["ExperimentConfig", "HEldpCkksCase", "PAPER_DATASETS", "full_config",
           "quick_config"]

# The eleven distinct sets docs/results.md reports: nine bundled in installable packages and
# two of the paper's CSVs (breastw, pendigits: from a CSV folder). The paper's third CSV,
# cancer.csv, is scikit-learn's breast cancer with its columns rotated and its labels
# swapped (same rows): it is not run twice.
PAPER_DATASETS = ("breast_cancer", "wine", "digits", "iris", "breastw", "pendigits",
                  "phishing", "segment", "shuttle", "mnist_5k", "acsf1")


@dataclass(frozen=True)
class HEldpCkksCase:
    """The small HEldpRFs training run through CKKS (timed; it calibrates the cost model).

    ``dataset`` (if the run has it, else the run's first dataset), stratified subsample of
    ``rows``, its first ``features`` features, ``trees`` trees of ``depth`` on
    ``thresholds`` thresholds.
    """

    dataset: str = "breast_cancer"
    rows: int = 256
    features: int = 6
    thresholds: int = 4
    depth: int = 2
    trees: int = 2


@dataclass(frozen=True)
class ExperimentConfig:
    """Parameters of a run. Defaults are the paper's protocol (section 5, appendix D).

    Parameters
    ----------
    datasets : tuple of str
        Bundled names (``breast_cancer``, ``wine``, ``digits``, ``iris``), names of CSVs
        in ``csv_dir`` (file stem, or ``breastw`` / ``cancer`` / ``pendigits``), or
        ``openml:<name or id>``.
    trials, folds : int
        ``trials`` repetitions of stratified ``folds``-fold CV (paper: 5 × 5).
    n_estimators : int
        Trees per forest (paper: 100); ⌊√d⌋ features per split; α = 10 below 20,000 rows,
        else 100 (decided on the dataset's full size).
    max_rows : int or None
        Stratified subsample of each dataset before CV (None: all rows).
    protocol_trees, protocol_max_train_rows, protocol_trials, protocol_folds : int or None
        Reductions of the expensive GIPE + CKKS protocol runs: trees, training rows per fold
        (stratified subsample), the first trials and the first folds of each only. None: no
        reduction. ``protocol_trials`` also applies to the simulated encrypted forests
        unless ``simulated_trials`` is set.
    protocol_round_max_train_rows : int or None
        Training rows per fold of the protocol runs whose split selection asks the client
        query rounds (``gini``, ``dp``), which cost far more per row than the others
        (None: ``protocol_max_train_rows``).
    simulated_variants : tuple of str
        Privacy settings of the simulated encrypted forest: ``"gini"`` (library defaults),
        ``"paper"`` (paper GIPE + the paper's leaf rule), ``"blind"``, ``"dp"`` (one per
        ``label_epsilons``).
    simulated_trees, simulated_max_train_rows, simulated_trials : int or None
        Reductions of the simulated runs (``simulated_trials`` None: ``protocol_trials``).
    attacks : bool
        Whether to compute the attack table (:mod:`.attack_table`).
    attack_max_rows, attack_proximity_trees, attack_draws : int
        The attack table's rows per dataset, trees of the proximity forest and draws of the
        known labels.
    attack_protocol_rows, attack_protocol_trees : int or None, int
        The protocol run for the transcript attack (rows, trees; rows None: no protocol run).
    protocol_label_epsilons : tuple of float or None
        Label ε of the protocol's DP runs (None: ``label_epsilons``, which the simulated
        runs use).
    heldp, heldp_ckks : HEldpSetting, HEldpCkksCase
        HEldpRFs' parameters (depth, threshold grid, polynomial) and its small CKKS run.
    reference : str
        Method key the win/tie/loss rows compare against (paired t-test, 95 %).
    """

    datasets: tuple[str, ...] = PAPER_DATASETS
    csv_dir: str | None = None
    openml_cache: str | None = None
    trials: int = 5
    folds: int = 5
    n_estimators: int = 100
    max_rows: int | None = None
    methods: tuple[str, ...] | None = None
    gipe_modes: tuple[str, ...] = ("paper", "order", "quantile")
    quantile_bins: int | None = None
    split_selections: tuple[str, ...] = ("rr", "gini", "blind", "dp")
    label_epsilons: tuple[float, ...] = (1.0, 10.0)
    protocol_label_epsilons: tuple[float, ...] | None = None
    protocol_trees: int | None = None
    protocol_max_train_rows: int | None = None
    protocol_round_max_train_rows: int | None = None
    protocol_trials: int | None = None
    protocol_folds: int | None = None
    simulated_variants: tuple[str, ...] = ("rr", "gini", "paper", "blind", "dp")
    simulated_trees: int | None = None
    simulated_max_train_rows: int | None = None
    simulated_trials: int | None = None
    diffpriv_epsilon: float = 1.0
    anonymity_k: int = 10
    pivot_depth: int = 4
    heldp: HEldpSetting = HEldpSetting()
    heldp_ckks: HEldpCkksCase = HEldpCkksCase()
    reference: str = "gipe_ckks_gini"
    leakage_samples: int = 200
    leakage_bits: int = 7
    leakage_dp_epsilon: float = 1.0
    leakage_k: int = 10
    attacks: bool = True
    attack_max_rows: int = 600
    attack_proximity_trees: int = 30
    attack_draws: int = 3
    attack_protocol_rows: int | None = 100
    attack_protocol_trees: int = 5
    n_jobs: int = 1
    seed: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self):
        for name in ("trials", "n_estimators", "leakage_samples", "leakage_bits",
                     "anonymity_k", "leakage_k", "pivot_depth"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)!r}")
        if self.folds < 2:
            raise ValueError(f"folds must be at least 2, got {self.folds!r}")
        if not self.datasets:
            raise ValueError("datasets must not be empty")
        for name in ("max_rows", "protocol_trees", "protocol_max_train_rows",
                     "protocol_round_max_train_rows", "protocol_trials", "protocol_folds",
                     "simulated_trials"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be None or at least 1, got {value!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    def replace(self, **changes) -> ExperimentConfig:
        return replace(self, **changes)


def full_config(**changes) -> ExperimentConfig:
    """The run docs/results.md reports (``cipherforest experiments --full``).

    The paper's protocol (5 × 5-fold CV, 100 trees) for every plaintext, cipher and baseline
    forest on all rows of :data:`PAPER_DATASETS` (breastw and pendigits need the CSV folder),
    and for the simulated encrypted forests of the settings the protocol rows do not run
    (the paper's flow, dp at each label ε; 50 trees on at most 600 training rows); the full
    GIPE + CKKS protocol with 100 trees in all five trials, on every training row of a
    fold for the selections without query rounds (rr, blind) and on at most 300 (stratified)
    for those with rounds (gini, dp at label ε = 1); win/tie/loss against the forest on the
    paper's GIPE ciphers.
    """
    base = ExperimentConfig(
        protocol_round_max_train_rows=300,
        protocol_label_epsilons=(1.0,), simulated_variants=("paper", "dp"),
        simulated_trees=50, simulated_max_train_rows=600, simulated_trials=5,
        reference="gipe_rf_paper",
        notes=("The GIPE + CKKS protocol: all 5 trials, 100 trees; every training row "
               "of a fold for rr and blind, at most 300 (stratified) for gini and dp. "
               "Simulated encrypted forests (the paper's flow, dp): every trial, 50 trees, "
               "at most 600 training rows per fold (stratified).",))
    return replace(base, **changes)


def quick_config(**changes) -> ExperimentConfig:
    """A run that finishes in minutes on 2 cores: every table and figure, small numbers.

    Two bundled datasets (breast cancer at most 300 rows), 1 trial × 3-fold CV, 10 trees;
    the protocol with 3 trees on at most 120 training rows; HEldpRFs of depth 3 and its
    CKKS run on 128 rows, 4 features, one tree.
    """
    base = ExperimentConfig(
        datasets=("breast_cancer", "wine"), trials=1, folds=3, n_estimators=10, max_rows=300,
        label_epsilons=(1.0,), protocol_trees=3, protocol_max_train_rows=120,
        simulated_trees=10, simulated_max_train_rows=150, attack_max_rows=150,
        attack_proximity_trees=10, attack_draws=1, attack_protocol_rows=60,
        attack_protocol_trees=2, heldp=HEldpSetting(depth=3),
        heldp_ckks=HEldpCkksCase(rows=128, features=4, thresholds=3, trees=1),
        notes=("Quick run: 1 trial x 3-fold CV, 10 trees, at most 300 rows per dataset; "
               "the protocol with 3 trees on at most 120 training rows per fold; simulated "
               "encrypted forests with 10 trees on at most 150. HEldpRFs of depth 3.",))
    return replace(base, **changes)
