"""HEldpRFs through CKKS: the training of :mod:`.heldp` on encrypted features and labels.

The server holds, per chunk of ``N/2`` rows, one CKKS ciphertext of ``x/2`` per feature (the
client scaled ``x`` to [-1, 1]) and one of the one-hot label per class. It evaluates the soft
step of every (feature, threshold) once, ``S = 1/2 + Σ a_k u^k`` with ``u = x/2 − θ/2`` (the
powers ``u^k`` by repeated squaring: ``u^7 = u^4 · u^3``), multiplies it by each label
ciphertext, and then, node by node, multiplies the node's row weights into those products.
The client decrypts the candidates' right-side counts and the node's class totals, sums the
slots, picks the split as in the clear (:func:`.heldp.choose_split`) and returns an encrypted
one-hot selector; the children's weights are ``w · Σ sel · S`` and ``w − that``.

Two economies against the published code: a left side is the node's total minus the right
side, and a left child's weight is the parent's minus the right child's (the selector sums to
one), which halves the multiplications; predictions of the cost model are therefore on the
optimistic side for HEldpRFs.

SEAL is used directly (``seal-python``, the library of :mod:`cipherforest.privacy.he`): the
label contexts there have two multiplicative levels (N = 8192) and no ciphertext-by-ciphertext
product, while this training needs ``depth + 6`` levels (:meth:`CkksParameters.for_depth`).

Every homomorphic operation goes through an evaluator that counts it by (operation, level):
:class:`CkksEvaluator` runs SEAL and times each operation; :class:`DryRunEvaluator` only
follows the levels, so the same training code counts the operations of a full-size run
without doing it. :func:`calibrate` times each operation at each level of a parameter set;
:func:`predict_seconds` multiplies counts by those times (the cost model).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

import numpy as np
import seal

from .heldp import SoftStep, TreePlan, choose_split, thresholds

__all__ = ["CkksEvaluator", "CkksParameters", "DryRunEvaluator", "EncryptedData",
           "calibrate", "count_training_ops", "encrypt_data", "predict_seconds",
           "train_forest_encrypted"]

_SCALE_BITS = 40
_OUTER_BITS = 50  # first prime (room for the decrypted values) and the special prime


@dataclass(frozen=True)
class CkksParameters:
    """Ring degree and number of 40-bit levels (first and special primes: 50 bits)."""

    poly_degree: int
    levels: int

    @classmethod
    def for_depth(cls, depth: int, degree: int) -> CkksParameters:
        """The smallest 128-bit-secure ring with the levels a depth-``depth`` tree needs:
        the soft step (``⌈log2 degree⌉`` for the powers, one for the coefficients), one for
        the labels, one for the selector, one per tree level, one for the leaves' labels."""
        levels = int(np.ceil(np.log2(degree + 1))) + 1 + depth + 2
        for n in (8192, 16384, 32768):
            if 2 * _OUTER_BITS + _SCALE_BITS * levels <= seal.CoeffModulus.MaxBitCount(n):
                return cls(n, levels)
        raise ValueError(f"no ring up to 32768 has {levels} levels of {_SCALE_BITS} bits")

    @property
    def slots(self) -> int:
        return self.poly_degree // 2


class _Cipher:
    """A ciphertext (``None`` in a dry run) and its level (0 = fresh)."""

    __slots__ = ("ct", "level")

    def __init__(self, ct, level: int):
        self.ct, self.level = ct, level


class DryRunEvaluator:
    """Counts operations by (name, level) and follows levels; computes nothing."""

    def __init__(self, params: CkksParameters):
        self.params = params
        self.counts: Counter = Counter()

    def _count(self, op: str, level: int) -> None:
        self.counts[(op, level)] += 1

    def _align(self, a: _Cipher, b: _Cipher) -> tuple[_Cipher, _Cipher]:
        while a.level < b.level:
            a = self.mod_switch(a)
        while b.level < a.level:
            b = self.mod_switch(b)
        return a, b

    def _check(self, level: int) -> int:
        if level > self.params.levels:
            raise ValueError(f"out of levels: {level} > {self.params.levels}")
        return level

    def encrypt(self, values) -> _Cipher:
        self._count("encrypt", 0)
        return _Cipher(None, 0)

    def decrypt(self, a: _Cipher) -> np.ndarray:
        self._count("decrypt", a.level)
        return np.zeros(self.params.slots)

    def mod_switch(self, a: _Cipher) -> _Cipher:
        self._count("mod_switch", a.level)
        return _Cipher(None, self._check(a.level + 1))

    def add(self, a: _Cipher, b: _Cipher) -> _Cipher:
        a, b = self._align(a, b)
        self._count("add", a.level)
        return _Cipher(None, a.level)

    def sub(self, a: _Cipher, b: _Cipher) -> _Cipher:
        a, b = self._align(a, b)
        self._count("sub", a.level)
        return _Cipher(None, a.level)

    def mul(self, a: _Cipher, b: _Cipher) -> _Cipher:
        a, b = self._align(a, b)
        self._count("mul", a.level)
        return _Cipher(None, self._check(a.level + 1))

    def mul_plain(self, a: _Cipher, values) -> _Cipher:
        self._count("mul_plain", a.level)
        return _Cipher(None, self._check(a.level + 1))

    def add_plain(self, a: _Cipher, values) -> _Cipher:
        self._count("add_plain", a.level)
        return _Cipher(None, a.level)

    def plain_minus(self, values, a: _Cipher) -> _Cipher:
        """``values − a`` (a negation and a plaintext addition)."""
        self._count("plain_minus", a.level)
        return _Cipher(None, a.level)


class CkksEvaluator(DryRunEvaluator):
    """The same operations on SEAL ciphertexts, each timed (``seconds`` by name and level).

    Holds the secret key too: one object plays the client (encrypt, decrypt) and the server
    (everything else); the server's operations use only the public and relinearisation keys.
    """

    def __init__(self, params: CkksParameters):
        super().__init__(params)
        self.seconds: Counter = Counter()
        parms = seal.EncryptionParameters(seal.scheme_type.ckks)
        parms.set_poly_modulus_degree(params.poly_degree)
        parms.set_coeff_modulus(seal.CoeffModulus.Create(
            params.poly_degree, [_OUTER_BITS, *[_SCALE_BITS] * params.levels, _OUTER_BITS]))
        self.context = seal.SEALContext(parms, True, seal.sec_level_type.tc128)
        if not self.context.parameters_set():
            raise ValueError(f"CKKS parameters rejected: {self.context.parameter_error_message()}")
        keygen = seal.KeyGenerator(self.context)
        self._relin = keygen.create_relin_keys()
        self._encryptor = seal.Encryptor(self.context, keygen.create_public_key())
        self._decryptor = seal.Decryptor(self.context, keygen.secret_key())
        self._evaluator = seal.Evaluator(self.context)
        self._encoder = seal.CKKSEncoder(self.context)
        self.scale = 2.0**_SCALE_BITS

    def _timed(self, op: str, level: int, start: float) -> None:
        self.seconds[(op, level)] += time.perf_counter() - start

    def _plain(self, values, like) -> seal.Plaintext:
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), (self.params.slots,))
        plain = self._encoder.encode(np.ascontiguousarray(values), self.scale)
        self._evaluator.mod_switch_to_inplace(plain, like.parms_id())
        return plain

    def _rescaled(self, ct) -> seal.Ciphertext:
        self._evaluator.rescale_to_next_inplace(ct)
        ct.scale(self.scale)  # primes lie within 1e-6 of 2^40: snap the scale back
        return ct

    def encrypt(self, values) -> _Cipher:
        start = time.perf_counter()
        values = np.zeros(self.params.slots) + np.asarray(values, dtype=np.float64)
        ct = self._encryptor.encrypt(self._encoder.encode(values, self.scale))
        out = super().encrypt(values)
        self._timed("encrypt", 0, start)
        return _Cipher(ct, out.level)

    def decrypt(self, a: _Cipher) -> np.ndarray:
        start = time.perf_counter()
        values = np.asarray(self._encoder.decode(self._decryptor.decrypt(a.ct)))
        super().decrypt(a)
        self._timed("decrypt", a.level, start)
        return values

    def mod_switch(self, a: _Cipher) -> _Cipher:
        start = time.perf_counter()
        ct = self._evaluator.mod_switch_to_next(a.ct)
        out = super().mod_switch(a)
        self._timed("mod_switch", a.level, start)
        return _Cipher(ct, out.level)

    def add(self, a: _Cipher, b: _Cipher) -> _Cipher:
        a, b = self._align(a, b)
        start = time.perf_counter()
        ct = self._evaluator.add(a.ct, b.ct)
        self._count("add", a.level)
        self._timed("add", a.level, start)
        return _Cipher(ct, a.level)

    def sub(self, a: _Cipher, b: _Cipher) -> _Cipher:
        a, b = self._align(a, b)
        start = time.perf_counter()
        ct = self._evaluator.sub(a.ct, b.ct)
        self._count("sub", a.level)
        self._timed("sub", a.level, start)
        return _Cipher(ct, a.level)

    def mul(self, a: _Cipher, b: _Cipher) -> _Cipher:
        a, b = self._align(a, b)
        start = time.perf_counter()
        ct = self._evaluator.multiply(a.ct, b.ct)
        self._evaluator.relinearize_inplace(ct, self._relin)
        self._rescaled(ct)
        self._count("mul", a.level)
        self._timed("mul", a.level, start)
        return _Cipher(ct, self._check(a.level + 1))

    def mul_plain(self, a: _Cipher, values) -> _Cipher:
        start = time.perf_counter()
        ct = self._rescaled(self._evaluator.multiply_plain(a.ct, self._plain(values, a.ct)))
        self._count("mul_plain", a.level)
        self._timed("mul_plain", a.level, start)
        return _Cipher(ct, self._check(a.level + 1))

    def add_plain(self, a: _Cipher, values) -> _Cipher:
        start = time.perf_counter()
        ct = self._evaluator.add_plain(a.ct, self._plain(values, a.ct))
        self._count("add_plain", a.level)
        self._timed("add_plain", a.level, start)
        return _Cipher(ct, a.level)

    def plain_minus(self, values, a: _Cipher) -> _Cipher:
        start = time.perf_counter()
        ct = self._evaluator.negate(a.ct)
        self._evaluator.add_plain_inplace(ct, self._plain(values, a.ct))
        self._count("plain_minus", a.level)
        self._timed("plain_minus", a.level, start)
        return _Cipher(ct, a.level)


@dataclass
class EncryptedData:
    """What the server holds: per chunk, ``x/2`` per feature and the label per class."""

    features: list[list[_Cipher]]  # [chunk][feature]
    labels: list[list[_Cipher]]  # [chunk][class]
    n_rows: int


def encrypt_data(ev: DryRunEvaluator, X_scaled: np.ndarray | None, Y: np.ndarray | None,
                 shape: tuple[int, int, int] | None = None) -> EncryptedData:
    """The client's upload (``shape = (rows, features, classes)`` in a dry run)."""
    n, d, c = shape if X_scaled is None else (X_scaled.shape[0], X_scaled.shape[1],
                                              Y.shape[1])
    slots = ev.params.slots
    feats, labels = [], []
    for start in range(0, n, slots):
        rows = slice(start, min(n, start + slots))
        half = None if X_scaled is None else _slots(X_scaled[rows] / 2, slots)
        onehot = None if Y is None else _slots(Y[rows], slots)
        feats.append([ev.encrypt(None if half is None else half[:, j]) for j in range(d)])
        labels.append([ev.encrypt(None if onehot is None else onehot[:, k]) for k in range(c)])
    return EncryptedData(feats, labels, n)


def _slots(block: np.ndarray, slots: int) -> np.ndarray:
    """``block`` (rows, columns) padded with zero rows to ``slots`` rows."""
    return np.vstack([block, np.zeros((slots - block.shape[0], block.shape[1]))])


def _soft_step(ev: DryRunEvaluator, half_x: _Cipher, theta: float,
               step: SoftStep) -> _Cipher:
    """``S(x/2 − θ/2)``: powers of two by squaring, odd powers as products, then the sum."""
    u = ev.add_plain(half_x, -theta / 2)
    powers = {1: u}
    p = 1
    while 2 * p <= step.degree:
        powers[2 * p] = ev.mul(powers[p], powers[p])
        p *= 2
    for k in range(3, step.degree + 1, 2):
        if k not in powers:
            top = 1 << (k.bit_length() - 1)
            powers[k] = ev.mul(powers[top], powers[k - top])
    terms = [ev.mul_plain(powers[k], a)
             for k, a in zip(range(1, step.degree + 1, 2), step.coefficients, strict=True)]
    total = terms[0]
    for term in terms[1:]:
        total = ev.add(total, term)
    return ev.add_plain(total, 0.5)


def train_forest_encrypted(ev: DryRunEvaluator, data: EncryptedData, plans: list[TreePlan],
                           step: SoftStep, n_thresholds: int, n_classes: int,
                           trace: list | None = None) -> list[dict]:
    """Train one soft tree per plan on ``data``; returns the decrypted trees.

    Each tree is ``{"feature", "threshold", "leaf_counts"}`` as in :class:`.heldp.SoftTree`.
    ``trace`` (optional list) receives, per node, the decrypted ``(right, totals)`` counts.
    With a :class:`DryRunEvaluator` the client picks the first candidate.
    """
    grid = thresholds(n_thresholds)
    slots, chunks = ev.params.slots, len(data.features)
    d = len(data.features[0])
    boot_slots = []
    for plan in plans:
        padded = np.zeros(chunks * slots)
        padded[: plan.bootstrap.shape[0]] = plan.bootstrap
        boot_slots.append(padded.reshape(chunks, slots))
    soft = [[[_soft_step(ev, data.features[ch][j], grid[s], step) for ch in range(chunks)]
             for s in range(n_thresholds)] for j in range(d)]
    soft_y = [[[[ev.mul(soft[j][s][ch], data.labels[ch][c]) for ch in range(chunks)]
                for c in range(n_classes)] for s in range(n_thresholds)] for j in range(d)]
    dry = not isinstance(ev, CkksEvaluator)
    trees = []
    for plan, boot in zip(plans, boot_slots, strict=True):
        n_internal = plan.features.shape[0]
        weights: list = [None]  # root: the plaintext bootstrap counts

        def weigh(w, ct, ch, boot=boot):
            return ev.mul_plain(ct, boot[ch]) if w is None else ev.mul(w[ch], ct)

        def decrypted_sum(cts):
            total = cts[0]
            for ct in cts[1:]:
                total = ev.add(total, ct)
            return float(ev.decrypt(total).sum())

        feature = np.empty(n_internal, dtype=np.int64)
        threshold = np.empty(n_internal, dtype=np.int64)
        for node in range(n_internal):
            w, cand = weights[node], plan.features[node]
            right = np.array([[[decrypted_sum([weigh(w, soft_y[j][s][c][ch], ch)
                                               for ch in range(chunks)])
                                for c in range(n_classes)] for s in range(n_thresholds)]
                              for j in cand])
            totals = np.array([decrypted_sum([weigh(w, data.labels[ch][c], ch)
                                              for ch in range(chunks)])
                               for c in range(n_classes)])
            if trace is not None:
                trace.append((right, totals))
            best = 0 if dry else choose_split(totals[None, None, :] - right, right)
            feature[node], threshold[node] = cand[best // n_thresholds], best % n_thresholds
            selector = [ev.encrypt(float(i == best)) for i in range(cand.shape[0] * n_thresholds)]
            chosen = []
            for ch in range(chunks):
                picked = [ev.mul(selector[i], soft[cand[i // n_thresholds]][i % n_thresholds][ch])
                          for i in range(len(selector))]
                total = picked[0]
                for ct in picked[1:]:
                    total = ev.add(total, ct)
                chosen.append(total)
            w_right = [weigh(w, chosen[ch], ch) for ch in range(chunks)]
            w_left = [ev.plain_minus(boot[ch], w_right[ch]) if w is None
                      else ev.sub(w[ch], w_right[ch]) for ch in range(chunks)]
            weights += [w_left, w_right]
        leaves = np.array([[decrypted_sum([ev.mul(weights[n_internal + i][ch],
                                                  data.labels[ch][c]) for ch in range(chunks)])
                            for c in range(n_classes)] for i in range(n_internal + 1)])
        trees.append({"feature": feature, "threshold": threshold, "leaf_counts": leaves})
    return trees


def count_training_ops(n_rows: int, n_features: int, n_classes: int, n_trees: int, depth: int,
                       n_thresholds: int, k: int, step: SoftStep,
                       params: CkksParameters) -> Counter:
    """Operation counts by (name, level) of a full training, from a dry run.

    Every tree costs the same (complete trees, ``k`` candidates per node), so the dry run
    trains one and multiplies its operations by ``n_trees``."""
    def dry(trees: int) -> Counter:
        ev = DryRunEvaluator(params)
        data = encrypt_data(ev, None, None, (n_rows, n_features, n_classes))
        plans = [TreePlan(np.ones(n_rows, dtype=np.int64),
                          np.zeros((2**depth - 1, k), dtype=np.int64) + np.arange(k))
                 for _ in range(trees)]
        train_forest_encrypted(ev, data, plans, step, n_thresholds, n_classes)
        return ev.counts

    shared, one = dry(0), dry(1)
    return Counter({key: shared[key] + n_trees * (one[key] - shared[key])
                    for key in set(shared) | set(one)})


def calibrate(params: CkksParameters, repeats: int = 3) -> dict[tuple[str, int], float]:
    """Median seconds of each operation at each level of ``params`` (fresh SEAL context)."""
    ev = CkksEvaluator(params)
    rng = np.random.default_rng(0)
    times: dict[tuple[str, int], list[float]] = {}

    def clock(op, level, fn, *args):
        start = time.perf_counter()
        result = fn(*args)
        times.setdefault((op, level), []).append(time.perf_counter() - start)
        return result

    for _ in range(repeats):
        a = clock("encrypt", 0, ev.encrypt, rng.uniform(-1, 1, params.slots))
        b = ev.encrypt(rng.uniform(-1, 1, params.slots))
        for level in range(params.levels + 1):
            clock("add", level, ev.add, a, b)
            clock("sub", level, ev.sub, a, b)
            clock("add_plain", level, ev.add_plain, a, 0.25)
            clock("plain_minus", level, ev.plain_minus, 0.25, a)
            clock("decrypt", level, ev.decrypt, a)
            if level < params.levels:
                clock("mul", level, ev.mul, a, b)
                clock("mul_plain", level, ev.mul_plain, a, 0.5)
                a = clock("mod_switch", level, ev.mod_switch, a)
                b = ev.mod_switch(b)
    return {key: float(np.median(v)) for key, v in times.items()}


def predict_seconds(counts: Counter, op_seconds: dict[tuple[str, int], float]) -> float:
    """The cost model: Σ count × seconds over (operation, level)."""
    missing = set(counts) - set(op_seconds)
    if missing:
        raise ValueError(f"no calibrated time for {sorted(missing)}")
    return float(sum(n * op_seconds[key] for key, n in counts.items()))
