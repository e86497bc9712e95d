"""What an evaluation run does: :class:`ExperimentConfig` and the quick preset."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

__all__ = ["ExperimentConfig", "PAPER_DATASETS", "quick_config"]

# The six sets docs/results.md reports: three bundled with scikit-learn, three of the
# paper's CSVs (when a CSV folder is given).
PAPER_DATASETS = ("breast_cancer", "wine", "digits", "breastw", "cancer", "pendigits")


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
    protocol_trees, protocol_max_train_rows, protocol_trials : int or None
        Reductions of the expensive GIPE + CKKS protocol runs: trees, training rows per fold
        (stratified subsample), and the first trials only. None: no reduction.
        ``protocol_trials`` also applies to the simulated encrypted forests.
    simulated_variants : tuple of str
        Privacy settings of the simulated encrypted forest: ``"gini"`` (library defaults),
        ``"paper"`` (paper GIPE + the paper's leaf rule), ``"blind"``, ``"dp"`` (one per
        ``label_epsilons``).
    simulated_trees, simulated_max_train_rows : int or None
        Reductions of the simulated runs.
    attacks, attack_* :
        The attack table (:mod:`.attack_table`): rows per dataset, trees of the proximity
        forest, draws of the known labels, and the protocol run for the transcript attack
        (rows, trees; None: no protocol run).
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
    split_selections: tuple[str, ...] = ("gini", "blind", "dp")
    label_epsilons: tuple[float, ...] = (1.0, 10.0)
    protocol_trees: int | None = None
    protocol_max_train_rows: int | None = None
    protocol_trials: int | None = None
    simulated_variants: tuple[str, ...] = ("gini", "paper", "blind", "dp")
    simulated_trees: int | None = None
    simulated_max_train_rows: int | None = None
    diffpriv_epsilon: float = 1.0
    anonymity_k: int = 10
    pivot_depth: int = 4
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
                     "protocol_trials"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be None or at least 1, got {value!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    def replace(self, **changes) -> ExperimentConfig:
        return replace(self, **changes)


def quick_config(**changes) -> ExperimentConfig:
    """A run that finishes in minutes on 2 cores: every table and figure, small numbers.

    Two bundled datasets (breast cancer at most 300 rows), 1 trial × 3-fold CV, 10 trees;
    the protocol with 3 trees on at most 120 training rows.
    """
    base = ExperimentConfig(
        datasets=("breast_cancer", "wine"), trials=1, folds=3, n_estimators=10, max_rows=300,
        label_epsilons=(1.0,), protocol_trees=3, protocol_max_train_rows=120,
        simulated_trees=10, simulated_max_train_rows=150, attack_max_rows=150,
        attack_proximity_trees=10, attack_draws=1, attack_protocol_rows=60,
        attack_protocol_trees=2,
        notes=("Quick run: 1 trial x 3-fold CV, 10 trees, at most 300 rows per dataset; "
               "the protocol with 3 trees on at most 120 training rows per fold; simulated "
               "encrypted forests with 10 trees on at most 150.",))
    return replace(base, **changes)
