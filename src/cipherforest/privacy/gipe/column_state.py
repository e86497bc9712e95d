"""The secret state of one feature under GIPE, as a Python object over the kernels' arrays.

:class:`ColumnState` holds the flat arrays whose layout :mod:`.kernels` documents, grows them
on demand, re-keys a column whose cipher space ran out, keeps the in-order view that
encryption searches, and converts the state to and from the plain arrays of a state file
(:func:`typed_state_arrays` checks their dtypes). :class:`WordSource` supplies the random
words the kernels consume: the OS CSPRNG, or a seeded PCG64 for experiments.
"""

from __future__ import annotations

import os

import numpy as np

from .kernels import (
    CIPHER,
    GRID,
    GRID_MAX,
    HEAD,
    LABEL,
    LEFT,
    META_SIZE,
    N_NODES,
    NO_NODE,
    NODE_FIELDS,
    RIGHT,
    STATUS_DONE,
    STATUS_NEED_WORDS,
    TAIL,
    VALID,
    VALIDATION_ERRORS,
    VMAX,
    VMIN,
    WORD_POS,
    WORDS_PER_INSERT,
    decrypt_positions,
    encrypt_values,
    inorder_nodes,
    insert_samples,
    lookup_positions,
    node_lists,
    permutation,
    validate_state,
)

__all__ = ["STATE_ARRAY_DTYPES", "CipherSpaceError", "ColumnState", "WordSource",
           "normals", "typed_state_arrays"]


class CipherSpaceError(ValueError):
    """The cipher space (0, c_max) cannot hold the column's nodes any more."""


class WordSource:
    """Random 64-bit words for one column: the OS CSPRNG, or a seeded PCG64 for experiments."""

    def __init__(self, seed: list[int] | None):
        self._bits = None if seed is None else np.random.PCG64(seed)

    def take(self, n: int) -> np.ndarray:
        if self._bits is None:
            return np.frombuffer(bytearray(os.urandom(8 * n)), dtype=np.uint64)
        return self._bits.random_raw(n).astype(np.uint64, copy=False)


def normals(words: np.ndarray) -> np.ndarray:
    """Standard normal draws, one per two words (Box-Muller, as the kernels' draws)."""
    unit = (words >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    return np.sqrt(-2.0 * np.log(1.0 - unit[0::2])) * np.cos(2.0 * np.pi * unit[1::2])


def _aligned_nodes(capacity: int) -> np.ndarray:
    """An uninitialised ``(capacity, NODE_FIELDS)`` int64 array starting on a cache line."""
    raw = np.empty(capacity * NODE_FIELDS + 8, dtype=np.int64)
    skip = (-raw.ctypes.data % 64) // 8
    return raw[skip:skip + capacity * NODE_FIELDS].reshape(capacity, NODE_FIELDS)


class ColumnState:
    """The secret state of one feature: the arrays of the module contract, grown on demand.

    After every change ``refresh`` rebuilds the in-order view that encryption searches
    (``in_vmin``, ``in_vmax``, ``in_cipher``); the per-node sample lists that Decrypt and
    cipher2 need are built on first use by ``lists``.
    """

    def __init__(self, c_max: int, capacity: int = 0):
        if c_max % GRID or c_max < 4 * GRID:
            raise ValueError(f"c_max must be a multiple of {GRID} and at least {4 * GRID}")
        self.c_max = int(c_max)
        self.epoch = 0
        self.n_samples = 0
        self.meta = np.zeros(META_SIZE, dtype=np.int64)
        self.meta[GRID_MAX] = self.c_max // GRID
        self.node = _aligned_nodes(0)
        self.info = np.empty((0, NODE_FIELDS), dtype=np.int64)
        self.s_value = np.empty(0, dtype=np.float64)
        self.s_label = np.empty(0, dtype=np.int64)
        self.s_next = np.empty(0, dtype=np.int64)
        self.s_node = np.empty(0, dtype=np.int64)
        self._reserve(capacity)
        self.refresh()

    @property
    def n_nodes(self) -> int:
        return int(self.meta[N_NODES])

    @property
    def nodef(self) -> np.ndarray:
        return self.node.view(np.float64)

    def _reserve(self, capacity: int) -> None:
        """Room for ``capacity`` samples, and as many nodes (a node holds >= 1 sample)."""
        old = self.s_value.shape[0]
        if capacity <= old:
            return
        capacity = max(capacity, old + old // 2)
        node = _aligned_nodes(capacity)
        node[:old] = self.node[:old]
        self.node = node
        info = np.empty((capacity, NODE_FIELDS), dtype=np.int64)
        info[:old] = self.info[:old]
        self.info = info
        for name in ("s_value", "s_label", "s_next", "s_node"):
            array = getattr(self, name)
            grown = np.empty(capacity, dtype=array.dtype)
            grown[:old] = array[:old]
            setattr(self, name, grown)

    def insert(self, values: np.ndarray, labels: np.ndarray,
               source: WordSource) -> tuple[np.ndarray, int]:
        """Insert samples in a random order (the state must stay secret: so does the order).

        Returns ``(sample_ids, rekeys)``: the id each sample got (``sample_ciphers`` reads
        their ciphers) and the number of re-keys the insertion needed.
        """
        n_new = values.shape[0]
        first = self.n_samples
        self._reserve(first + n_new)
        order = permutation(n_new, source.take(max(n_new, 1)))
        stop = first + n_new
        self.s_value[first:stop] = values[order]
        self.s_label[first:stop] = labels[order]
        sample_ids = np.empty(n_new, dtype=np.int64)
        sample_ids[order] = np.arange(first, stop)
        words = source.take(2 * n_new + 2 * WORDS_PER_INSERT)
        self.meta[WORD_POS] = 0
        s = first
        rekeys = 0
        while True:
            status, s = insert_samples(self.node, self.nodef, self.info, self.s_value,
                                       self.s_label, self.s_next, self.s_node, self.meta,
                                       words, s, stop)
            if status == STATUS_DONE:
                break
            if status == STATUS_NEED_WORDS:
                words = source.take(2 * (stop - s) + 2 * WORDS_PER_INSERT)
                self.meta[WORD_POS] = 0
            else:  # STATUS_EXHAUSTED
                self.n_samples = s  # samples before s are in the tree
                self.rekey(source, reserve=2)
                rekeys += 1
        self.n_samples = stop
        self.refresh()
        return sample_ids, rekeys

    def rekey(self, source: WordSource, reserve: int = 0) -> None:
        """Re-draw every node's cipher (a new epoch), keeping their order.

        The ``m`` nodes are spread evenly by in-order rank over the grid, each jittered by a
        Gaussian of a sixteenth of its slot clipped to a quarter slot: every gap is then at
        least half a slot (>= 4 grid points) wide, room for the insertions to come.
        """
        n_nodes = self.n_nodes
        order = inorder_nodes(self.node, n_nodes)
        slot = (self.c_max // GRID) / (n_nodes + reserve + 1)
        if slot < 8:
            raise CipherSpaceError(
                f"the cipher space c_max={self.c_max} is too small for {n_nodes} nodes; "
                "fit again with a larger security_parameter")
        jitter = np.clip(normals(source.take(2 * n_nodes)) * (slot / 16), -slot / 4, slot / 4)
        grid = np.floor(np.arange(1, n_nodes + 1) * slot + jitter + 0.5).astype(np.int64)
        self.info[order, CIPHER] = grid * GRID
        self.epoch += 1
        self.refresh()

    def refresh(self) -> None:
        """Rebuild the in-order view after the tree changed."""
        order = inorder_nodes(self.node, self.n_nodes)
        nodef = self.nodef
        self.inorder = order
        self.in_vmin = np.ascontiguousarray(nodef[order, VMIN])
        self.in_vmax = np.ascontiguousarray(nodef[order, VMAX])
        self.in_cipher = np.ascontiguousarray(self.info[order, CIPHER])
        span = 0.5 * self.in_vmax[-1] - 0.5 * self.in_vmin[0] if order.shape[0] else 0.0
        self.scale = span if span > 0 else 0.5
        self._lists = None

    def encrypt(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """cipher1 of the finite float64 values ``x`` and their node ranks (-1: in a gap)."""
        if self.n_nodes == 0:
            raise ValueError("the state holds no samples")
        out = np.empty(x.shape[0], dtype=np.int64)
        rank = np.empty(x.shape[0], dtype=np.int64)
        encrypt_values(np.ascontiguousarray(x, dtype=np.float64), self.in_vmin, self.in_vmax,
                       self.in_cipher, self.c_max, self.scale, out, rank)
        return out, rank

    def sample_ciphers(self, sample_ids: np.ndarray) -> np.ndarray:
        """cipher1 of stored samples."""
        return self.info[self.s_node[sample_ids], CIPHER]

    def lists(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(ptr, samples, sorted_values, sorted_positions)`` by in-order node rank."""
        if self._lists is None:
            ptr, samples = node_lists(self.info, self.s_next, self.inorder, self.n_samples)
            counts = np.diff(ptr)
            rank = np.repeat(np.arange(counts.shape[0]), counts)
            positions = np.arange(self.n_samples, dtype=np.int64) - ptr[rank]
            values = self.s_value[samples]
            by_value = np.lexsort((positions, values, rank))
            self._lists = (ptr, samples, values[by_value], positions[by_value])
        return self._lists

    def positions(self, x: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """Position in its node of a stored sample equal to ``x[i]``, or -1."""
        ptr, _, sorted_values, sorted_positions = self.lists()
        out = np.empty(x.shape[0], dtype=np.int64)
        lookup_positions(np.ascontiguousarray(x, dtype=np.float64), rank, ptr, sorted_values,
                         sorted_positions, out)
        return out

    def decrypt(self, cipher: np.ndarray, position: np.ndarray, out: np.ndarray) -> int:
        """Values of the entries with ``position >= 0`` into ``out``; first bad index or -1."""
        ptr, samples, _, _ = self.lists()
        return int(decrypt_positions(cipher, position, self.in_cipher, ptr, samples,
                                     self.s_value, out))

    def validate(self) -> tuple[int, int]:
        """``(code, node)`` from ``validate_state``: code 0 when every invariant holds."""
        code, node = validate_state(self.node, self.nodef, self.info, self.s_value,
                                    self.s_label, self.s_next, self.s_node, self.n_nodes,
                                    self.n_samples, self.c_max)
        return int(code), int(node)

    # -------------------------------------------------------------------- (de)serialisation
    def to_arrays(self) -> dict[str, np.ndarray]:
        """The state as plain arrays: node fields by node id, samples grouped by node."""
        m = self.n_nodes
        ptr, samples = node_lists(self.info, self.s_next, np.arange(m, dtype=np.int64),
                                  self.n_samples)
        node, nodef, info = self.node[:m], self.nodef[:m], self.info[:m]
        return {"left": node[:, LEFT].copy(), "right": node[:, RIGHT].copy(),
                "label": info[:, LABEL].copy(), "cipher": info[:, CIPHER].copy(),
                "vmin": nodef[:, VMIN].copy(), "vmax": nodef[:, VMAX].copy(),
                "node_ptr": ptr, "sample_value": self.s_value[samples],
                "sample_label": self.s_label[samples]}

    @classmethod
    def from_arrays(cls, c_max: int, epoch: int, arrays: dict[str, np.ndarray]) -> ColumnState:
        """Inverse of ``to_arrays``; ValueError if the arrays do not form a valid state."""
        m = arrays["left"].shape[0]
        ptr = arrays["node_ptr"]
        n = arrays["sample_value"].shape[0]
        for key in ("right", "label", "cipher", "vmin", "vmax"):
            if arrays[key].shape != (m,):
                raise ValueError(f"array {key!r} has shape {arrays[key].shape}, expected ({m},)")
        if arrays["sample_label"].shape != (n,):
            raise ValueError("sample_label and sample_value differ in length")
        if ptr.shape != (m + 1,) or ptr[0] != 0 or ptr[-1] != n or np.any(np.diff(ptr) <= 0):
            raise ValueError("node_ptr does not split the samples into non-empty nodes")
        state = cls(c_max, n)
        state.epoch = int(epoch)
        state.n_samples = n
        state.meta[N_NODES] = m
        node, nodef, info = state.node, state.nodef, state.info
        node[:m, LEFT] = arrays["left"]
        node[:m, RIGHT] = arrays["right"]
        info[:m, LABEL] = arrays["label"]
        info[:m, CIPHER] = arrays["cipher"]
        info[:m, HEAD] = ptr[:-1]
        info[:m, TAIL] = ptr[1:] - 1
        nodef[:m, VMIN] = arrays["vmin"]
        nodef[:m, VMAX] = arrays["vmax"]
        state.s_value[:n] = arrays["sample_value"]
        state.s_label[:n] = arrays["sample_label"]
        state.s_node[:n] = np.repeat(np.arange(m, dtype=np.int64), np.diff(ptr))
        state.s_next[:n] = np.arange(1, n + 1)
        state.s_next[ptr[1:] - 1] = NO_NODE
        code, where = state.validate()
        if code != VALID:
            raise ValueError(f"{VALIDATION_ERRORS[code]} (node {where})")
        state.refresh()
        return state


#: dtype of every array of a column's state in a state file (``ColumnState.to_arrays``).
STATE_ARRAY_DTYPES = {"left": np.int64, "right": np.int64, "label": np.int64,
                      "cipher": np.int64, "vmin": np.float64, "vmax": np.float64,
                      "node_ptr": np.int64, "sample_value": np.float64,
                      "sample_label": np.int64}


def typed_state_arrays(part: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays of ``STATE_ARRAY_DTYPES`` from ``part``, each checked to be 1-D of its dtype.

    Raises KeyError naming a missing array, ValueError naming one of the wrong type.
    """
    out = {}
    for name, dtype in STATE_ARRAY_DTYPES.items():
        array = part[name]
        if array.dtype != dtype or array.ndim != 1:
            raise ValueError(f"array {name!r} has dtype {array.dtype} and {array.ndim} "
                             f"dimension(s), expected 1-D {np.dtype(dtype)}")
        out[name] = array
    return out
