"""The worker side of the Dask levels: shards of label rotations and their partial sums.

A *shard* is a contiguous range of a session's label packs (so of its training rows), placed
once on one worker process: the worker expands each pack into its lane rotations and keeps
them, with the shard's rows of the cipher matrix's keys, for the whole session. Every level,
the worker computes the level's sums over its own rows only — the running sums of every
planned node and feature (its rows sorted by the feature, each candidate's end found by the
candidate's key) and every new leaf's sum — exactly as one server computes them over all
rows (:mod:`.level`), and returns the partial query and leaf-store ciphertexts. Sums are
linear, so partials add up to the level (:func:`combine`, a tree reduction).

These functions run in Dask worker processes; the registry of shards is this module's
``_SHARDS`` in each of them. Nothing here imports Dask: a worker that lost its shard (it
was restarted) raises :class:`ShardMissing` and the driver (:mod:`.dask_levels`) places the
shard again from the packs it keeps.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np

from ...he import BlockLayout, HEError, PublicContext
from .labels import LabelRotations, LeafJob, leaf_sums
from .level import LanePacker, NodeRows, merge_partials

__all__ = ["ShardChecksumError", "ShardError", "ShardMissing", "combine", "drop_orphans",
           "drop_shard", "pack_digest", "place_packs", "shard_level"]


class ShardError(RuntimeError):
    """The label work could not be done on the Dask workers (a shard lost for good, a
    checksum that does not match, no worker left); the message names the shard and
    worker. The session's state before the failing level is intact (the service keeps it
    on disk; an embedded server forgets the session)."""


class ShardMissing(ShardError):
    """A task for a shard ran on a worker that does not hold it (the worker restarted, or
    the task moved): the driver places the shard again."""


class ShardChecksumError(ShardError):
    """A worker's shard was built from other packs than the driver's (digest mismatch)."""


_SHARDS: dict[str, _Shard] = {}  # shard key -> shard, in this worker process
_CONTEXTS: dict[str, PublicContext] = {}  # public-context fingerprint -> loaded context


def pack_digest(previous: str, blobs: list[bytes]) -> str:
    """The running SHA-256 of a shard's packs: ``previous`` digest, then each pack."""
    h = hashlib.sha256(previous.encode())
    for blob in blobs:
        h.update(hashlib.sha256(blob).digest())
    return h.hexdigest()


class _Shard:
    def __init__(self, context: PublicContext, layout: BlockLayout, first_pack: int,
                 first_row: int, keys: np.ndarray):
        self.context = context
        self.layout = layout
        self.first_row = first_row
        self.keys = keys  # (shard rows, features): what candidates compare
        self.labels = LabelRotations(context, layout, first_pack)
        self.digest = ""


def _context(public_context: bytes) -> PublicContext:
    context = PublicContext.from_bytes(public_context)
    return _CONTEXTS.setdefault(context.fingerprint_public, context)


def place_packs(key: str, public_context: bytes, layout_args: tuple, first_pack: int,
                first_row: int, keys: np.ndarray | None, blobs: list[bytes],
                after=None) -> dict:
    """Add label packs ``first_pack ...`` to shard ``key`` on this worker, expanded into
    their lane rotations (``first_pack`` is the shard's first: a new shard, replacing any
    earlier one of that key). ``after``: the previous placement's result (ordering only).
    Returns the shard's digest, next pack and bytes held."""
    if keys is not None:  # the shard's first packs: (re)create it
        context = _context(public_context)
        layout = BlockLayout(*layout_args)
        _SHARDS[key] = _Shard(context, layout, first_pack, first_row, keys)
    shard = _SHARDS.get(key)
    if shard is None:
        raise ShardMissing(f"shard {key} is not on this worker (restarted since its "
                           "placement)")
    if first_pack != shard.labels.next_pack:
        raise ShardError(f"shard {key}: pack {first_pack} placed where pack "
                         f"{shard.labels.next_pack} is due")
    try:
        packs = [shard.context.load_fresh_ciphertext(blob) for blob in blobs]
    except HEError as exc:
        raise ShardError(f"shard {key}: {exc}") from None
    for pack in packs:
        shard.labels.add_pack(pack)
    shard.digest = pack_digest(shard.digest, blobs)
    return {"digest": shard.digest, "next_pack": shard.labels.next_pack,
            "bytes": shard.labels.nbytes()}


def _node_rows(shard: _Shard, rows: np.ndarray, counts: np.ndarray, features: list[int],
               keys: list[np.ndarray]) -> NodeRows:
    """A planned node's shard rows as its running sums visit them: per feature sorted by
    the key (stable), each candidate's end where the keys pass its key."""
    local = rows - shard.first_row
    orders, sorted_counts, ends = [], [], []
    for f, cand_keys in zip(features, keys, strict=True):
        column = shard.keys[local, f]
        order = np.argsort(column, kind="stable")
        orders.append(rows[order])
        sorted_counts.append(counts[order])
        ends.append(np.searchsorted(column[order], cand_keys, side="right"))
    return NodeRows(orders, sorted_counts, ends)


def shard_level(key: str, digest: str, task: dict) -> tuple[dict, list, dict]:
    """One level's partial sums over shard ``key``: ``(store, query, stats)`` — the
    leaf-store partial sums by store index, the query ciphertexts (serialised; None where
    none of the shard's rows contribute), and the worker's CPU seconds and the partials'
    bytes (``stats``, added up by :func:`combine`).

    ``task``: ``shift``; ``n_candidates`` (per planned node and feature) and ``height``
    (the server's query grid); ``nodes``: per
    planned node ``(rows, counts, features, candidate keys per feature)`` restricted to
    the shard; ``leaves``: ``(store index, position, rows, counts, total draws)``.
    """
    shard = _SHARDS.get(key)
    if shard is None:
        raise ShardMissing(f"shard {key} is not on this worker (restarted since its "
                           "placement)")
    if shard.digest != digest:
        raise ShardChecksumError(f"shard {key}: the packs held here (digest "
                                 f"{shard.digest[:16]}) are not the session's "
                                 f"({digest[:16]})")
    cpu = time.process_time()
    context, layout = shard.context, shard.layout
    copy = shard.labels.copy
    jobs = [LeafJob(*job) for job in task["leaves"]]
    store = leaf_sums(context, layout, copy, jobs)
    packer = LanePacker(context, layout, task["shift"])
    grid = packer.grid(task["n_candidates"], task["height"])
    nodes = [_node_rows(shard, *node) for node in task["nodes"]]
    query = packer.accumulate(grid, nodes, copy)
    # Query partials go back on the last level (half the bytes with BFV's two primes):
    # switched sums add up as the sums would. Leaf-store sums stay unfinished.
    store = {index: context.dump_ciphertext(ct) for index, ct in store.items()}
    query = [None if ct is None else context.dump_ciphertext(context.last_level(ct))
             for ct in query]
    size = sum(map(len, store.values())) + sum(len(b) for b in query if b is not None)
    return store, query, {"cpu": time.process_time() - cpu, "bytes": size}


def combine(fingerprint: str, first: tuple, second: tuple) -> tuple[dict, list, dict]:
    """Two shards' partial sums added (one step of the tree reduction), serialised, and
    their stats added."""
    context = _CONTEXTS.get(fingerprint)
    if context is None:
        raise ShardMissing(f"no shard of context {fingerprint[:16]} on this worker")
    store, query = merge_partials(context, [first, second])
    stats = {name: first[2][name] + second[2][name] for name in first[2]}
    return ({index: context.dump_ciphertext(ct) for index, ct in store.items()},
            [None if ct is None else context.dump_ciphertext(ct) for ct in query], stats)


def drop_shard(key: str) -> bool:
    """Forget shard ``key`` on this worker (whether it was here)."""
    return _SHARDS.pop(key, None) is not None


def drop_orphans(live_drivers: list[str]) -> int:
    """Forget the shards of drivers no longer connected (a server killed without closing
    its sessions); shard keys start with their driver's Dask client id. Returns how many
    were dropped."""
    orphans = [key for key in _SHARDS if key.split("/", 1)[0] not in live_drivers]
    for key in orphans:
        del _SHARDS[key]
    return len(orphans)
