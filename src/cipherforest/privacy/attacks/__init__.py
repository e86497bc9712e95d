"""Attacks on the encrypted random forest: what a server learns about the labels and values.

Each attack takes exactly what the adversary holds — the training cipher matrix it received in
``setup``, the protocol messages (a :class:`RecordingServer` captures them during a real
:meth:`PrivateForestClient.fit <cipherforest.privacy.PrivateForestClient.fit>`), the trees it
grew — plus the side knowledge named in its docstring (class counts, one known label per class,
an auxiliary sample of a feature's distribution). The attacker's *guess* is computed by a pure
function of that view alone; the true labels or values enter only in the scoring step, which
returns an :class:`AttackResult` with the success rate next to the majority-class baseline
(the best a guess without the attack achieves).

One module per attack family; each module's docstring names what the adversary holds and the
positive control (the mode where the attack succeeds). ``docs/threat_model.md`` reports what
they recover in each mode, measured by ``benchmarks/privacy_attacks.py``:

* :mod:`.alternation` — :func:`alternation_labels`: binary labels from cipher1 alone: the
  paper's GIPE merges runs of same-label neighbours into one cipher, so along a feature
  consecutive distinct ciphers alternate labels.
* :mod:`.shared_cipher` — :func:`shared_cipher_labels`: label propagation over rows that share
  a cipher, one known label per class.
* :mod:`.leaf_union` — :func:`leaf_union_labels`: the paper's rule answers "leaf" exactly for
  pure nodes: rows sharing a client-declared leaf share a label; union over trees.
* :mod:`.proximity` — :func:`proximity_matrix`, :func:`proximity_cluster_labels`,
  :func:`proximity_nearest_labels`: what any revealed tree structure leaks: rows that keep
  landing together share labels.
* :mod:`.pair_oracle` — :class:`PairOracleServer` / :func:`pair_oracle_attack`: a malicious
  server asks crafted two-row "nodes" and reads "leaf" as "same label".
* :mod:`.content_substitution` — :class:`ContentSubstitutionServer` /
  :func:`content_substitution_attack`: a malicious server keeps every plan field honest and
  forges the counts, one "same class as the reference?" question per node.
* :mod:`.selective_failure` — :class:`SelectiveFailureServer` /
  :func:`selective_failure_attack`: a malicious server swaps a known-label row for a target
  row in one node's sums and reads the client's refusal as "different labels".
* :mod:`.prediction_oracle` — :class:`PredictionOracleServer` /
  :func:`prediction_oracle_attack`: a server keeps the label ciphertexts and doctors a leaf
  with α·(e_yi − e_yj) before a predict call; the client's check fails when the labels differ.
* :mod:`.forced_refits` — :class:`BusyServer` / :func:`forced_refit_attack`: a server reads
  the randomized labels of each ``setup``, answers "busy", and takes the majority over the
  retried fits.
* :mod:`.target_recovery` — :func:`leaf_neighbour_targets`, :func:`proximity_nearest_targets`,
  :func:`forced_refit_targets`: the tree and refit attacks against the private regression
  forest's targets, scored by :func:`score_targets` (R² and MAE beside guessing the mean).
* :mod:`.value_recovery` — :func:`quantile_value_recovery` / :func:`score_value_recovery`:
  values from cipher ranks and an auxiliary sample of the feature's distribution.

:mod:`.transcript` holds the server's view (:class:`Transcript`, :class:`RecordingServer`,
:func:`declared_leaves`, :func:`server_bootstrap_counts`) and :func:`forest_trees`, which gives
a fitted :class:`~cipherforest.ensemble.RandomForestClassifier`'s trees in the server's
format, so the tree attacks run without the protocol; :mod:`.scoring` the scoring helpers.
"""

from .alternation import alternation_labels
from .content_substitution import (
    ContentSubstitutionResult,
    ContentSubstitutionServer,
    content_substitution_attack,
    without_count_check,
)
from .forced_refits import (
    BusyServer,
    ForcedRefitResult,
    forced_refit_attack,
    fresh_randomized_labels,
)
from .leaf_union import leaf_union_labels
from .pair_oracle import PairOracleResult, PairOracleServer, pair_oracle_attack
from .prediction_oracle import (
    PredictionOracleResult,
    PredictionOracleServer,
    prediction_oracle_attack,
)
from .proximity import (
    known_label_success,
    name_clusters_by_counts,
    proximity_cluster_labels,
    proximity_matrix,
    proximity_nearest_labels,
)
from .scoring import AttackResult, majority_baseline, one_known_per_class, score_labels
from .selective_failure import (
    SelectiveFailureResult,
    SelectiveFailureServer,
    selective_failure_attack,
)
from .shared_cipher import shared_cipher_labels
from .target_recovery import (
    ForcedRefitTargets,
    TargetAttackResult,
    denoised_targets,
    forced_refit_targets,
    leaf_neighbour_targets,
    proximity_nearest_targets,
    score_targets,
)
from .transcript import (
    RecordingServer,
    Transcript,
    declared_leaves,
    forest_trees,
    server_bootstrap_counts,
)
from .value_recovery import ValueRecoveryResult, quantile_value_recovery, score_value_recovery

__all__ = [
    "AttackResult",
    "BusyServer",
    "ForcedRefitResult",
    "ForcedRefitTargets",
    "ContentSubstitutionResult",
    "ContentSubstitutionServer",
    "content_substitution_attack",
    "without_count_check",
    "PairOracleResult",
    "PairOracleServer",
    "PredictionOracleResult",
    "PredictionOracleServer",
    "RecordingServer",
    "SelectiveFailureResult",
    "SelectiveFailureServer",
    "TargetAttackResult",
    "Transcript",
    "ValueRecoveryResult",
    "alternation_labels",
    "declared_leaves",
    "denoised_targets",
    "forced_refit_attack",
    "forced_refit_targets",
    "forest_trees",
    "fresh_randomized_labels",
    "known_label_success",
    "leaf_neighbour_targets",
    "leaf_union_labels",
    "majority_baseline",
    "name_clusters_by_counts",
    "one_known_per_class",
    "pair_oracle_attack",
    "prediction_oracle_attack",
    "proximity_cluster_labels",
    "proximity_matrix",
    "proximity_nearest_labels",
    "proximity_nearest_targets",
    "quantile_value_recovery",
    "score_labels",
    "score_targets",
    "score_value_recovery",
    "selective_failure_attack",
    "server_bootstrap_counts",
    "shared_cipher_labels",
]
