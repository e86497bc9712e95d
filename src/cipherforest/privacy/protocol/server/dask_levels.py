"""The server's level work on Dask (``pip install 'cipherforest[dask]'``).

A level is a sum over rows, so it is sharded by rows, as distributed histogram boosting
shards its histograms:

* **Placement, once.** At ``setup`` a session's label packs are cut into contiguous shards,
  one per worker (at most one per pack). Each ``labels`` message's packs go to their
  shard's worker as they arrive (:func:`.shards.place_packs`, chained so that a shard's packs
  arrive in order); the worker expands them into lane rotations and keeps them, with the
  shard's rows of the cipher matrix's keys, for the whole session. Only the packs travel
  (~0.2–1 KB per row), never the rotations, and never again per level. The driver (this
  process) keeps the packs' bytes and a running SHA-256 per shard.
* **Levels.** The driver plans as always (the plan, seeds and limits stay here), then sends
  each worker its shard's part of the level — per planned node its shard rows, their
  bootstrap draws, the planned features and each candidate's key; per new leaf its rows —
  and the worker returns its partial query and leaf-store ciphertexts
  (:func:`.shards.shard_level`). Partials are added pairwise on the workers on the way back
  (:func:`.shards.combine`, a tree reduction), and the driver finishes the sum: the query
  goes out on the last level, the leaf-store sums join the session's store.
* **Recovery.** A worker that dies mid-level (or restarts: its shards are gone) is noticed
  by its address leaving the scheduler or by its task's error; its shards are placed again
  on a live worker from the packs the driver kept, and the whole level is recomputed: the
  same sums, so the same model. A shard whose digest does not match the driver's is placed
  again too. When no worker is left within ``worker_timeout`` seconds, or a level fails
  ``max_attempts`` times, :class:`~.shards.ShardError` names the shard and the worker.
"""

from __future__ import annotations

import logging
import secrets
import time

import numpy as np
from distributed import Client, Future, fire_and_forget

from ...he import BlockLayout, PublicContext
from .level import LanePacker, add_to_leaf_store, assign_leaves, merge_partials
from .session import ServerSession
from .shards import (
    ShardChecksumError,
    ShardError,
    ShardMissing,
    combine,
    drop_orphans,
    drop_shard,
    pack_digest,
    place_packs,
    shard_level,
)

__all__ = ["DaskLevels", "ShardedLabels"]

#: Operators' log: shard placements, every level's bytes moved and seconds, recoveries.
log = logging.getLogger("cipherforest.privacy.dask")

_PACKS_PER_TASK = 64  # packs per placement task when a shard is placed again
_POLL_SECONDS = 0.5
_ABSENCE_GRACE = 20.0  # seconds a worker may be missing before its shards are lost


class _Lost(Exception):
    """Shards to place again (internal to a level's attempt)."""

    def __init__(self, shards: set[int], reason: str):
        super().__init__(reason)
        self.shards, self.reason = shards, reason


class DaskLevels:
    """Levels computed by Dask workers over shards of rows (see the module docstring).

    Parameters
    ----------
    client : distributed.Client or str
        A client, or a scheduler address to connect to (this object then owns the client
        and closes it in :meth:`close`).
    worker_timeout : float, default=60.0
        Seconds to wait for a live worker when every worker is gone.
    max_attempts : int, default=4
        Attempts of one level before giving up (each after placing lost shards again).

    Raises
    ------
    OSError
        The scheduler address cannot be reached.
    """

    n_parts = 1  # shard partials are added: one partly filled query ciphertext at most

    def __init__(self, client, worker_timeout: float = 60.0, max_attempts: int = 4):
        self._own = isinstance(client, str)
        if self._own:
            try:
                client = Client(client, timeout="10s", set_as_default=False)
            except (OSError, TimeoutError) as exc:
                raise OSError(f"cannot reach the Dask scheduler at {client}: {exc}") from None
        elif not isinstance(client, Client):
            raise TypeError(f"dask_client must be a distributed.Client or a scheduler "
                            f"address, not {type(client).__name__}")
        self.client = client
        self.worker_timeout = worker_timeout
        self.max_attempts = max_attempts

    def workers(self) -> list[str]:
        """Addresses of the live workers, sorted (asked of the scheduler each time:
        ``Client.scheduler_info`` can return a periodic refresh without the workers)."""
        return sorted(self.client.ncores())

    def wait_for_worker(self, why: str) -> list[str]:
        """The live workers, waiting up to ``worker_timeout`` for one to appear."""
        live = self.workers()
        if live:
            return live
        try:
            self.client.wait_for_workers(1, timeout=self.worker_timeout)
        except (TimeoutError, OSError):
            raise ShardError(f"{why}, and no Dask worker joined the scheduler "
                             f"{self.client.scheduler.address} within "
                             f"{self.worker_timeout:.0f} s") from None
        return self.workers()

    def drop_orphans(self) -> None:
        """Free the workers of shards whose driver left without closing them (a server
        process killed mid-training leaves its shards on an external cluster)."""
        live = self.client.run_on_scheduler(_client_ids)
        self.client.run(drop_orphans, live)

    def new_labels(self, context: PublicContext, layout: BlockLayout, keys: np.ndarray,
                   public_context: bytes) -> ShardedLabels:
        return ShardedLabels(self, context, layout, keys, public_context)

    def compute(self, session: ServerSession, leaf_jobs, plans, shift: int):
        """One level on the workers; same return as :func:`.level.compute_level`."""
        labels: ShardedLabels = session.labels
        context, layout = session.context, session.layout
        leaf_jobs = assign_leaves(session, leaf_jobs)
        packer = LanePacker(context, layout, shift)
        grid = packer.grid([[len(c) for c in p.candidates] for p in plans],
                           taller=session.spec.max_round_bytes is None)
        tasks = labels.level_tasks(session, leaf_jobs, plans, shift, grid.height)
        store, query = labels.run_level(tasks)
        add_to_leaf_store(session, [store])
        blobs = packer.finish(query) if plans else []
        return [position for _, _, position in leaf_jobs], blobs, grid.positions

    def close(self) -> None:
        if self._own:
            self.client.close()


class ShardedLabels:
    """One session's label packs in shards on Dask workers (the driver's view)."""

    def __init__(self, levels: DaskLevels, context: PublicContext, layout: BlockLayout,
                 keys: np.ndarray, public_context: bytes):
        self.levels = levels
        self.client = levels.client
        self.context = context
        self.layout = layout
        self.keys = keys
        self.public_context = public_context
        # The driver's client id first: workers drop the shards of drivers gone.
        self.key = f"{self.client.id}/{secrets.token_hex(8)}"
        self.layout_args = (layout.scheme, layout.n_slots, layout.tau, layout.rows_per_pack,
                            None, layout.parts)
        n_rows = keys.shape[0]
        m = layout.rows_per_pack
        self.n_packs = -(-n_rows // m)
        workers = levels.wait_for_worker("no worker to place the label shards on")
        levels.drop_orphans()
        n_shards = min(len(workers), self.n_packs)
        cuts = np.linspace(0, self.n_packs, n_shards + 1).round().astype(int).tolist()
        self.first_pack = cuts[:-1]
        self.end_pack = cuts[1:]
        self.rows = [(lo * m, min(hi * m, n_rows)) for lo, hi in zip(cuts[:-1], cuts[1:],
                                                                      strict=True)]
        self.worker = [workers[s % len(workers)] for s in range(n_shards)]
        self.digest = [""] * n_shards
        self.pending: list[Future | None] = [None] * n_shards
        self.blobs: list[bytes] = []
        self.attempts = 0  # levels attempted again after a loss, over the session
        log.info("session labels: %d packs of %d rows in %d shards on %s", self.n_packs, m,
                 n_shards, ", ".join(self.worker))

    # ------------------------------------------------------------------ placement
    def shard_key(self, s: int) -> str:
        return f"{self.key}/{s}"

    def describe(self, s: int) -> str:
        lo, hi = self.rows[s]
        return f"shard {s} (rows {lo}-{hi - 1})"

    def add_packs(self, first_pack: int, packs: list, blobs: list[bytes]) -> None:
        """Packs ``first_pack ...`` (validated by the caller) to their shards' workers."""
        if first_pack != len(self.blobs):
            raise ValueError(f"pack {first_pack} arrives where pack {len(self.blobs)} is due")
        self.blobs.extend(blobs)
        for s in range(len(self.worker)):
            lo = max(first_pack, self.first_pack[s])
            hi = min(first_pack + len(blobs), self.end_pack[s])
            if lo < hi:
                self._place(s, lo, self.blobs[lo:hi])

    def _place(self, s: int, first: int, blobs: list[bytes]) -> None:
        starts = first == self.first_pack[s]
        lo, hi = self.rows[s]
        keys = np.ascontiguousarray(self.keys[lo:hi]) if starts else None
        if starts:
            self.digest[s] = ""
        self.pending[s] = self.client.submit(
            place_packs, self.shard_key(s), self.public_context if starts else b"",
            self.layout_args, first, lo, keys, blobs, after=self.pending[s],
            workers=[self.worker[s]], pure=False)
        self.digest[s] = pack_digest(self.digest[s], blobs)

    def _replace(self, s: int, why: str) -> None:
        """Place shard ``s`` again, from the kept packs, on a live worker."""
        live = self.levels.wait_for_worker(f"{self.describe(s)} was on {self.worker[s]}: "
                                           f"{why}")
        load = {w: 0 for w in live}
        for t, w in enumerate(self.worker):
            if t != s and w in load:
                load[w] += 1
        self.worker[s] = min(live, key=lambda w: (load[w], w))
        log.info("%s placed again on %s", self.describe(s), self.worker[s])
        self.pending[s] = None
        for first in range(self.first_pack[s], self.end_pack[s], _PACKS_PER_TASK):
            self._place(s, first, self.blobs[first: min(first + _PACKS_PER_TASK,
                                                        self.end_pack[s])])

    def _settle(self) -> None:
        """Wait for every placement; a shard whose placement failed or whose digest differs
        is placed again (``_Lost``)."""
        lost: set[int] = set()
        reasons = []
        for s, future in enumerate(self.pending):
            if future is None:
                continue
            reason = self._watch([future], {s})
            if reason is None:
                result = future.result()
                if result["digest"] != self.digest[s]:
                    reason = (f"its placed packs' SHA-256 {result['digest'][:16]} is not "
                              f"the driver's {self.digest[s][:16]}")
            if reason is not None:
                lost.add(s)
                reasons.append(f"{self.describe(s)} on {self.worker[s]}: {reason}")
            else:
                self.pending[s] = None
        if lost:
            raise _Lost(lost, "; ".join(reasons))

    def _watch(self, futures: list[Future], shards: set[int]) -> str | None:
        """Wait for ``futures``; why the shards failed (a worker gone for longer than
        ``_ABSENCE_GRACE`` seconds, a task error), or None when every future finished. A
        worker the scheduler dropped for late heartbeats (a loaded machine) and that comes
        back keeps its shards: its tasks run again there."""
        absent: dict[int, float] = {}
        while True:
            live = set(self.levels.workers())
            now = time.monotonic()
            for s in shards:
                if self.worker[s] in live:
                    absent.pop(s, None)
                elif now - absent.setdefault(s, now) >= _ABSENCE_GRACE:
                    return f"worker {self.worker[s]} left the cluster"
            errors = [f for f in futures if f.status == "error"]
            if errors:
                exc = errors[0].exception()
                if isinstance(exc, ShardError) and not isinstance(
                        exc, (ShardMissing, ShardChecksumError)):
                    raise exc
                return f"{type(exc).__name__}: {exc}"
            if all(f.status == "finished" for f in futures):
                return None
            if any(f.status == "cancelled" for f in futures):
                return "its task was cancelled"
            time.sleep(_POLL_SECONDS)

    # ------------------------------------------------------------------ levels
    def level_tasks(self, session: ServerSession, leaf_jobs, plans, shift: int,
                    height: int) -> list:
        """Per shard, its part of the level (see :func:`.shards.shard_level`)."""
        per_store = self.layout.leaves_per_ciphertext
        tasks = []
        for lo, hi in self.rows:
            nodes, leaves = [], []
            for plan in plans:
                rows = _rows_between(plan.node.samples, lo, hi)
                counts = session.growth.weights(plan.tree)[rows].astype(np.int32)
                nodes.append((rows.astype(np.int64), counts,
                              [cands[0].feature for cands in plan.candidates],
                              [np.array([c.key for c in cands], dtype=np.float64)
                               for cands in plan.candidates]))
            for t, node, position in leaf_jobs:
                weights = session.growth.weights(t)
                rows = _rows_between(node.samples, lo, hi)
                index, place = divmod(position, per_store)
                leaves.append((index, place, rows.astype(np.int64),
                               weights[rows].astype(np.int32),
                               int(weights[node.samples].sum())))
            tasks.append({"shift": shift, "height": height, "nodes": nodes, "leaves": leaves,
                          "n_candidates": [[len(c) for c in p.candidates] for p in plans]})
        return tasks

    def run_level(self, tasks: list[dict]):
        """The level's summed partials ``(store, query)`` (ciphertexts), recovering from
        lost workers by placing their shards again and recomputing the level."""
        sent = sum(_nbytes(task) for task in tasks)
        for attempt in range(self.levels.max_attempts):
            futures: list[Future] = []
            try:
                self._settle()
                started = time.perf_counter()
                futures = self._submit(tasks)
                root, owners = self._reduce(futures)
                reason = self._watch([root, *futures], set(range(len(tasks))))
                if reason is None:
                    total = root.result()
                    log.info("level: %d shards, %.1f MB of tasks out, %.1f MB of partial "
                             "sums back, %.1f s, %.1f CPU s on the workers", len(tasks),
                             sent / 1e6, total[2]["bytes"] / 1e6,
                             time.perf_counter() - started, total[2]["cpu"])
                    return merge_partials(self.context, [total])
                raise _Lost(self._culprits(futures, owners), reason)
            except _Lost as lost:
                self.client.cancel(futures)
                self.attempts += 1
                log.warning("level attempt %d failed: %s; placing shards %s again",
                            attempt + 1, lost.reason, sorted(lost.shards))
                if attempt + 1 == self.levels.max_attempts:
                    raise ShardError(f"the level failed {self.levels.max_attempts} times on "
                                     f"Dask; last: {lost.reason}") from None
                for s in sorted(lost.shards):
                    self._replace(s, lost.reason)
        raise AssertionError("unreachable")

    def _submit(self, tasks: list[dict]) -> list[Future]:
        """Each shard's task, its data sent straight to the shard's worker."""
        deadline = time.monotonic() + _ABSENCE_GRACE
        while True:
            live = set(self.levels.workers())
            gone = {s for s, w in enumerate(self.worker) if w not in live}
            if not gone:
                break
            if time.monotonic() >= deadline:
                raise _Lost(gone, f"worker {self.worker[min(gone)]} left the cluster")
            time.sleep(_POLL_SECONDS)
        futures = []
        for s, task in enumerate(tasks):
            try:
                data = self.client.scatter([task], workers=[self.worker[s]], hash=False)[0]
            except Exception as exc:  # noqa: BLE001 - the scheduler lost the worker meanwhile
                self.client.cancel(futures)
                raise _Lost({s}, f"sending the level to {self.worker[s]}: "
                                 f"{type(exc).__name__}: {exc}") from None
            futures.append(self.client.submit(shard_level, self.shard_key(s), self.digest[s],
                                              data, workers=[self.worker[s]], pure=False))
        return futures

    def _reduce(self, futures: list[Future]) -> tuple[Future, dict]:
        """Add the partials pairwise, each sum on the worker holding its left input."""
        owners = {f.key: s for s, f in enumerate(futures)}
        layer = list(enumerate(futures))
        fingerprint = self.context.fingerprint_public
        while len(layer) > 1:
            nxt = []
            for k in range(0, len(layer) - 1, 2):
                (s, left), (_, right) = layer[k], layer[k + 1]
                nxt.append((s, self.client.submit(combine, fingerprint, left, right,
                                                  workers=[self.worker[s]], pure=False)))
            if len(layer) % 2:
                nxt.append(layer[-1])
            layer = nxt
        return layer[0][1], owners

    def _culprits(self, futures: list[Future], owners: dict) -> set[int]:
        """The shards to place again: those whose worker left, or whose task failed
        (every shard when no single one is to blame)."""
        live = set(self.levels.workers())
        shards = {s for s, w in enumerate(self.worker) if w not in live}
        shards |= {owners[f.key] for f in futures if f.status == "error"}
        return shards or set(range(len(self.worker)))

    # ------------------------------------------------------------------ release
    def nbytes(self) -> int:
        """Bytes of packs the driver keeps to place shards again."""
        return sum(map(len, self.blobs))

    def clear(self) -> None:
        """Forget the shards on the workers and the kept packs."""
        for s, worker in enumerate(self.worker):
            try:
                fire_and_forget(self.client.submit(drop_shard, self.shard_key(s),
                                                   workers=[worker], pure=False))
            except Exception:  # noqa: BLE001 - a closed client: its workers are gone too
                break
        self.blobs = []
        self.pending = [None] * len(self.worker)


def _nbytes(value) -> int:
    """Bytes of the arrays and byte strings in a task or a partial result."""
    if isinstance(value, (bytes, np.ndarray)):
        return len(value) if isinstance(value, bytes) else value.nbytes
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return 0


def _client_ids(dask_scheduler) -> list[str]:
    return list(dask_scheduler.clients)


def _rows_between(samples: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The ascending row ids in ``[lo, hi)``."""
    a, b = np.searchsorted(samples, [lo, hi])
    return samples[a:b]
