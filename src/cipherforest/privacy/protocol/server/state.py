"""A server session's training state as plain arrays and bytes, and back (Sans-IO).

The service persists a session after every level and resumes it after a restart; the state
machine itself never touches a file. What a session holds splits in two:

* what the client *uploaded* (the ``setup`` message: public context, cipher matrix, forest
  parameters; the ``labels`` messages): the service keeps those messages as they arrived and
  :meth:`PrivateForestServer.restore_session` replays them through
  :meth:`PrivateForestServer.handle`, which re-derives everything computed from them
  (bootstrap counts, bins, prepared label ciphertexts);
* what *training* produced: :func:`export_state` returns it as a
  :class:`SessionState` — every tree's node arrays, its open nodes (row ids, depth, seed),
  each leaf's position in the packed leaf store, the store's ciphertexts as bytes (finished
  ones, which never change, and the partial sums still being filled), and the protocol
  position (state, round, query token, where the next byte-capped round starts, which trees
  the open query covers).

The open query's node plans are not stored: planning is a deterministic function of a tree's
open nodes, so :func:`apply_state` plans them again, exactly as the query was made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...he import HEError
from ..messages import Message, ProtocolError, encode_message
from ..planner import OpenNode
from ..selections import selection
from .session import SESSION_STATES, ServerSession

__all__ = ["SessionState", "apply_state", "export_state", "setup_message",
           "state_from_arrays", "state_to_arrays"]


@dataclass
class SessionState:
    """Training state of one session: JSON-able ``meta``, int/float ``arrays``, store bytes.

    ``stores`` maps a finished leaf-store index to its serialised ciphertext; an export may
    leave out stores the caller already holds (a finished store never changes). The partial
    sums of unfinished stores are in ``arrays`` (``open_store_*``).
    """

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]
    stores: dict[int, bytes] = field(default_factory=dict)


def _pack_blobs(blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    data = np.frombuffer(b"".join(blobs), dtype=np.uint8)
    return data, np.cumsum([0, *map(len, blobs)]).astype(np.int64)


def _unpack_blobs(data: np.ndarray, offsets: np.ndarray) -> list[bytes]:
    raw, bounds = data.tobytes(), offsets.tolist()
    return [raw[bounds[k]: bounds[k + 1]] for k in range(len(bounds) - 1)]


def export_state(session: ServerSession,
                 skip_stores: frozenset | set | dict = frozenset()) -> SessionState:
    """The training state of ``session``.

    Parameters
    ----------
    skip_stores : set of int
        Finished leaf-store ciphertexts the caller has saved already; their bytes are not
        exported (their count is, in ``meta["n_stores"]``).
    """
    if session.pending_leaves:  # queued leaves are computed before a message returns
        raise ProtocolError("export: the session is between levels")
    offsets, open_offsets, sample_offsets = [0], [0], [0]
    columns = {name: [] for name in ("left", "right", "feature", "n_node_samples")}
    thresholds, open_rows = [], {"node": [], "depth": [], "seed": []}
    samples, leaf_rows = [], {"tree": [], "node": [], "position": []}
    for t, tree in enumerate(session.trees):
        for name, values in columns.items():
            values.append(np.asarray(getattr(tree, name), dtype=np.int64))
        thresholds.append(np.asarray(tree.threshold, dtype=np.float64))
        offsets.append(offsets[-1] + len(tree.left))
        for node in tree.open:
            open_rows["node"].append(node.node_id)
            open_rows["depth"].append(node.depth)
            open_rows["seed"].append(node.seed)
            samples.append(np.asarray(node.samples, dtype=np.int64))
            sample_offsets.append(sample_offsets[-1] + node.samples.shape[0])
        open_offsets.append(open_offsets[-1] + len(tree.open))
        for node_id in sorted(tree.leaves):
            leaf_rows["tree"].append(t)
            leaf_rows["node"].append(node_id)
            leaf_rows["position"].append(tree.leaves[node_id])
    context = session.context
    stores = {index: context.dump_ciphertext(ct) for index, ct in enumerate(session.leaf_store)
              if index not in skip_stores}
    open_index = sorted(session.leaf_open)
    arrays = {name: np.concatenate(values) for name, values in columns.items()}
    arrays["threshold"] = np.concatenate(thresholds)
    arrays["tree_offsets"] = np.asarray(offsets, dtype=np.int64)
    arrays["open_offsets"] = np.asarray(open_offsets, dtype=np.int64)
    arrays["open_node"] = np.asarray(open_rows["node"], dtype=np.int64)
    arrays["open_depth"] = np.asarray(open_rows["depth"], dtype=np.int64)
    arrays["open_seed"] = np.asarray(open_rows["seed"], dtype=np.uint64)
    arrays["open_sample_offsets"] = np.asarray(sample_offsets, dtype=np.int64)
    arrays["open_samples"] = (np.concatenate(samples) if samples
                              else np.zeros(0, dtype=np.int64))
    for name, values in leaf_rows.items():
        arrays[f"leaf_{name}"] = np.asarray(values, dtype=np.int64)
    arrays["open_store_index"] = np.asarray(open_index, dtype=np.int64)
    arrays["open_store_bytes"], arrays["open_store_offsets"] = _pack_blobs(
        [context.dump_ciphertext(session.leaf_open[i]) for i in open_index])
    arrays["round_trees"] = np.asarray(sorted({p.tree for p in session.plans}), dtype=np.int64)
    meta = {"state": session.state, "round": session.round, "token": session.query_token,
            "next_tree": session.next_tree, "n_trees": len(session.trees),
            "n_labels": session.n_labels, "n_leaves": session.n_leaves,
            "n_stores": len(session.leaf_store)}
    return SessionState(meta, arrays, stores)


def apply_state(session: ServerSession, state: SessionState) -> None:
    """Bring a session rebuilt from its uploads to the exported ``state``."""
    meta, arrays = state.meta, state.arrays
    if meta.get("state") not in SESSION_STATES or meta.get("n_trees") != len(session.trees):
        raise ProtocolError("restore: state does not belong to this session's forest")
    trained_without_labels = meta["state"] == "trained" and not session.n_labels
    if meta.get("n_labels") != session.n_labels and not trained_without_labels:
        raise ProtocolError(f"restore: state was saved with {meta.get('n_labels')} labels, "
                            f"the uploads hold {session.n_labels}")
    offsets = arrays["tree_offsets"]
    open_offsets = arrays["open_offsets"]
    sample_offsets = arrays["open_sample_offsets"]
    for t, tree in enumerate(session.trees):
        lo, hi = int(offsets[t]), int(offsets[t + 1])
        tree.left = arrays["left"][lo:hi].tolist()
        tree.right = arrays["right"][lo:hi].tolist()
        tree.feature = arrays["feature"][lo:hi].tolist()
        tree.threshold = arrays["threshold"][lo:hi].tolist()
        tree.n_node_samples = arrays["n_node_samples"][lo:hi].tolist()
        tree.open = []
        for k in range(int(open_offsets[t]), int(open_offsets[t + 1])):
            rows = arrays["open_samples"][int(sample_offsets[k]): int(sample_offsets[k + 1])]
            tree.open.append(OpenNode(int(arrays["open_node"][k]), rows.copy(),
                                      int(arrays["open_depth"][k]),
                                      int(arrays["open_seed"][k])))
        tree.leaves = {}
    for t, node, position in zip(arrays["leaf_tree"].tolist(), arrays["leaf_node"].tolist(),
                                 arrays["leaf_position"].tolist(), strict=True):
        session.trees[t].leaves[node] = int(position)
    context = session.context
    n_stores = int(meta["n_stores"])
    store_list = []
    try:
        for index in range(n_stores):
            blob = state.stores.get(index)
            if blob is None:
                raise ProtocolError(f"restore: leaf store {index} has no ciphertext")
            store_list.append(context.load_ciphertext(blob))
        open_blobs = _unpack_blobs(arrays["open_store_bytes"], arrays["open_store_offsets"])
        leaf_open = {int(i): context.load_ciphertext(blob) for i, blob in
                     zip(arrays["open_store_index"].tolist(), open_blobs, strict=True)}
    except HEError as exc:
        raise ProtocolError(f"restore: leaf store: {exc}") from None
    session.leaf_store = store_list
    session.leaf_open = leaf_open
    session.n_leaves = int(meta["n_leaves"])
    session.plans = []
    for t in arrays["round_trees"].tolist():
        weights = session.growth.weights(t)
        for node in session.trees[t].open:
            plan = session.growth.plan_node(t, node, weights)
            if plan is None:
                raise ProtocolError(f"restore: open node {node.node_id} of tree {t} has no "
                                    "candidates; the state is not this session's")
            session.plans.append(plan)
    session.forget_prediction_tables()
    session.state = meta["state"]
    session.round = int(meta["round"])
    session.query_token = str(meta["token"])
    session.next_tree = int(meta["next_tree"])
    session.stats.rounds = session.round


def setup_message(session: ServerSession, public_context: bytes) -> bytes:
    """A ``setup`` message that recreates the session's forest parameters and cipher matrix
    (for saving an embedded server's trained session, whose uploads were not kept);
    ``public_context`` is the client's :meth:`~cipherforest.privacy.he.SecretContext.public_bytes`.
    """
    meta = session.spec.to_meta()
    meta["n_classes"] = session.n_classes
    meta["label_pack_rows"] = session.layout.rows_per_pack
    if not session.label_ciphertexts:
        meta["label_ciphertexts"] = False
    if not session.round_counts and selection(session.spec.split_selection).asks_rounds:
        meta["round_counts"] = False
    arrays = {"X": session.X}
    if session.randomized_labels is not None:
        arrays["y_rr"] = session.randomized_labels
    return encode_message(Message("setup", meta, arrays,
                                  {"context": [public_context]}))


def state_to_arrays(state: SessionState) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One ``(meta, arrays)`` pair holding the state and its store bytes (for one file)."""
    arrays = dict(state.arrays)
    arrays["store_bytes"], arrays["store_offsets"] = _pack_blobs(
        [state.stores[index] for index in range(int(state.meta["n_stores"]))])
    return dict(state.meta), arrays


def state_from_arrays(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> SessionState:
    """Inverse of :func:`state_to_arrays`."""
    arrays = dict(arrays)
    blobs = _unpack_blobs(arrays.pop("store_bytes"), arrays.pop("store_offsets"))
    return SessionState(meta, arrays, dict(enumerate(blobs)))
