"""Benchmark TenSEAL against seal-python on the HE operations of the encrypted forest protocol.

Both libraries wrap Microsoft SEAL; this script measures what each Python API costs on the
operations the encrypted random-forest protocol needs, with the same parameters (128-bit
security, ``N = 8192``):

* CKKS, coefficient moduli ``[60, 40, 40, 60]`` bits, scale ``2**40``, 4096 slots;
* BFV, ``CoeffModulus.BFVDefault(8192)``, plain modulus ``PlainModulus.Batching(8192, 30)``,
  8192 slots.

The encrypted vector is a one-hot class label (``tau = 2`` classes) replicated across the
slots: slot ``s`` holds 1 if ``s % 2 == label``. For each scheme it times public-key and
secret-key encryption, in-place ciphertext addition (summing encrypted labels, as the protocol
does for class counts), ciphertext x 0/1 plaintext mask (seal-python: mask encoded once and
reused; TenSEAL: the fastest of its plain operand types, which are encoded on every call),
square + relinearise (+ rescale for CKKS), decrypt + decode, (de)serialisation, and reports
serialised sizes (fresh ciphertext, last-level ciphertext, public context without secret key).
A few TenSEAL figures can only be had through ``tenseal.sealapi``, TenSEAL's separate raw
binding of SEAL (not interoperable with ``CKKSVector``); those rows say so.

Every timing is the mean wall time per operation over ``--repeat`` calls (5x for additions),
split into rounds that alternate between the two libraries so that load from other jobs on a
shared machine hits both alike; the numbers stay noisy on a busy machine. Every result is
checked: decrypted CKKS values to 1e-6, BFV values exactly; the script exits non-zero on a
mismatch.

Run from the repository root::

    .venv/bin/python benchmarks/he_backends.py [--repeat 200] [--markdown PATH]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import platform
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import seal
import tenseal as ts
import tenseal.sealapi as tsapi

POLY_DEGREE = 8192
CKKS_BITS = [60, 40, 40, 60]
CKKS_SCALE = 2.0**40
CKKS_SLOTS = POLY_DEGREE // 2
BFV_SLOTS = POLY_DEGREE
BFV_PLAIN_BITS = 30
N_CLASSES = 2
CKKS_TOL = 1e-6
ROUNDS = 4
SEED = 20240601
SEAL_HEADER = struct.Struct("<HBBBBHQ")  # magic, header size, major, minor, compr, reserved, size
SEAL_MAGIC = 0xA15E


class CheckError(AssertionError):
    """A decrypted or deserialised value differs from the expected one."""


# --------------------------------------------------------------------------------------------
# Backends: one small adapter per library and scheme, with the same method names.
# --------------------------------------------------------------------------------------------


def _bfv_plain_modulus() -> int:
    """Return the ~30-bit batching prime used by both BFV backends.

    Returns
    -------
    int
        ``PlainModulus.Batching(8192, 30)``.
    """
    return seal.PlainModulus.Batching(POLY_DEGREE, BFV_PLAIN_BITS).value()


class SealBackend:
    """seal-python adapter (CKKS or BFV).

    Parameters
    ----------
    scheme : {"ckks", "bfv"}
        Encryption scheme.
    """

    name = "seal-python"

    def __init__(self, scheme: str) -> None:
        self.scheme = scheme
        if scheme == "ckks":
            parms = seal.EncryptionParameters(seal.scheme_type.ckks)
            parms.set_poly_modulus_degree(POLY_DEGREE)
            parms.set_coeff_modulus(seal.CoeffModulus.Create(POLY_DEGREE, CKKS_BITS))
        else:
            parms = seal.EncryptionParameters(seal.scheme_type.bfv)
            parms.set_poly_modulus_degree(POLY_DEGREE)
            parms.set_coeff_modulus(seal.CoeffModulus.BFVDefault(POLY_DEGREE))
            parms.set_plain_modulus(seal.PlainModulus.Batching(POLY_DEGREE, BFV_PLAIN_BITS))
        self.parms = parms
        self.context = seal.SEALContext(parms, True, seal.sec_level_type.tc128)
        if not self.context.parameters_set():
            raise RuntimeError(self.context.parameter_error_message())
        keygen = seal.KeyGenerator(self.context)
        self.secret_key = keygen.secret_key()
        self.public_key = keygen.create_public_key()
        self.relin_keys = keygen.create_relin_keys()
        self.encryptor = seal.Encryptor(self.context, self.public_key, self.secret_key)
        self.decryptor = seal.Decryptor(self.context, self.secret_key)
        self.evaluator = seal.Evaluator(self.context)
        if scheme == "ckks":
            self.encoder: Any = seal.CKKSEncoder(self.context)
        else:
            self.encoder = seal.BatchEncoder(self.context)

    def _encode(self, values: np.ndarray) -> seal.Plaintext:
        if self.scheme == "ckks":
            return self.encoder.encode(values.astype(np.float64), CKKS_SCALE)
        return self.encoder.encode(values.astype(np.int64))

    def encrypt(self, values: np.ndarray, symmetric: bool = False) -> seal.Ciphertext:
        """Encode and encrypt ``values`` with the public key, or the secret key."""
        plain = self._encode(values)
        if symmetric:
            return self.encryptor.encrypt_symmetric(plain)
        return self.encryptor.encrypt(plain)

    def add_inplace(self, acc: seal.Ciphertext, ct: seal.Ciphertext) -> None:
        """Add ``ct`` into ``acc``."""
        self.evaluator.add_inplace(acc, ct)

    def prepare_mask(self, mask: np.ndarray, like: seal.Ciphertext) -> seal.Plaintext:
        """Encode a 0/1 mask once, at the level (``parms_id``) of ``like``.

        ``CKKSEncoder.encode`` has no ``parms_id`` argument in seal-python 4.4.0: it encodes at
        the first data level, and ``Evaluator.mod_switch_to_inplace(plain, parms_id)`` then
        drops the plaintext to the ciphertext's level. BFV plaintexts carry no level.
        """
        plain = self._encode(mask)
        if self.scheme == "ckks" and plain.parms_id() != like.parms_id():
            self.evaluator.mod_switch_to_inplace(plain, like.parms_id())
        return plain

    def mul_mask(self, ct: seal.Ciphertext, mask: seal.Plaintext, rescale: bool) -> Any:
        """Return ``ct * mask`` (pre-encoded), rescaled to the next level if asked (CKKS)."""
        out = self.evaluator.multiply_plain(ct, mask)
        if rescale and self.scheme == "ckks":
            self.evaluator.rescale_to_next_inplace(out)
        return out

    def square(self, ct: seal.Ciphertext) -> seal.Ciphertext:
        """Return ``ct**2`` relinearised (and rescaled for CKKS)."""
        out = self.evaluator.square(ct)
        self.evaluator.relinearize_inplace(out, self.relin_keys)
        if self.scheme == "ckks":
            self.evaluator.rescale_to_next_inplace(out)
        return out

    def prepare_mask_ntt(self, mask: np.ndarray, like: seal.Ciphertext) -> seal.Plaintext:
        """Encode a BFV mask once and NTT-transform it at the ``parms_id`` of ``like``."""
        return self.evaluator.transform_to_ntt(self._encode(mask), like.parms_id())

    def to_ntt(self, ct: seal.Ciphertext) -> seal.Ciphertext:
        """Return ``ct`` in NTT form (BFV ciphertexts are in coefficient form)."""
        return self.evaluator.transform_to_ntt(ct)

    def from_ntt(self, ct: seal.Ciphertext) -> seal.Ciphertext:
        """Return a copy of an NTT-form ``ct`` back in coefficient form."""
        out = seal.Ciphertext(ct)
        self.evaluator.transform_from_ntt_inplace(out)
        return out

    def to_last_level(self, ct: seal.Ciphertext) -> seal.Ciphertext:
        """Return a copy of ``ct`` mod-switched to the last level."""
        out = seal.Ciphertext(ct)
        self.evaluator.mod_switch_to_inplace(out, self.context.last_parms_id())
        return out

    def decrypt(self, ct: seal.Ciphertext) -> np.ndarray:
        """Decrypt and decode."""
        return self.encoder.decode(self.decryptor.decrypt(ct))

    def serialize(self, ct: seal.Ciphertext) -> bytes:
        """Serialise a ciphertext (the only compression mode of this build is ``none``)."""
        return ct.to_string()

    def deserialize(self, blob: bytes) -> seal.Ciphertext:
        """Load a ciphertext from bytes, validated against the context."""
        ct = seal.Ciphertext()
        ct.load_bytes(self.context, blob)
        return ct

    def level(self, ct: seal.Ciphertext) -> int:
        """Return the number of coefficient-modulus primes left in ``ct``."""
        return ct.coeff_modulus_size()

    def public_context(self) -> bytes:
        """Serialise parameters + public key + relinearisation keys (no secret key)."""
        return self.parms.to_bytes() + self.public_key.to_string() + self.relin_keys.to_string()

    def check_public_context(self, blob: bytes, values: np.ndarray) -> None:
        """Load a public bundle as a receiver would, encrypt with it, decrypt here.

        The bundle must split into exactly three SEAL objects (parameters, public key, relin
        keys), each loaded and validated; no 64-byte run of the secret key's data may occur
        in it.
        """
        parts = split_seal_objects(blob)
        if len(parts) != 3:
            raise CheckError(f"public bundle holds {len(parts)} SEAL objects, expected 3")
        sk_bytes = self.secret_key.to_string()
        for start in range(SEAL_HEADER.size, len(sk_bytes) - 64, len(sk_bytes) // 8):
            if sk_bytes[start : start + 64] in blob:
                raise CheckError("secret-key data found in the public bundle")
        parms = seal.EncryptionParameters(seal.scheme_type.none)
        parms.load_bytes(parts[0])
        receiver = seal.SEALContext(parms, True, seal.sec_level_type.tc128)
        public_key = receiver.from_public_str(parts[1])
        receiver.from_relin_str(parts[2])
        encryptor = seal.Encryptor(receiver, public_key)
        if self.scheme == "ckks":
            plain = seal.CKKSEncoder(receiver).encode(values.astype(np.float64), CKKS_SCALE)
        else:
            plain = seal.BatchEncoder(receiver).encode(values.astype(np.int64))
        ct = self.deserialize(encryptor.encrypt(plain).to_string())
        check_values(self.decrypt(ct), values, self.scheme, "seal-python public-context encrypt")


class TensealBackend:
    """TenSEAL adapter (CKKSVector / BFVVector API).

    Parameters
    ----------
    scheme : {"ckks", "bfv"}
        Encryption scheme.
    """

    name = "TenSEAL"

    def __init__(self, scheme: str) -> None:
        self.scheme = scheme
        self.context = self._make_context(ts.ENCRYPTION_TYPE.ASYMMETRIC)
        self.sym_context = self._make_context(ts.ENCRYPTION_TYPE.SYMMETRIC)
        self.mask_kind = "list"

    def _make_context(self, encryption_type: Any) -> ts.Context:
        if self.scheme == "ckks":
            ctx = ts.context(
                ts.SCHEME_TYPE.CKKS,
                POLY_DEGREE,
                coeff_mod_bit_sizes=CKKS_BITS,
                encryption_type=encryption_type,
            )
            ctx.global_scale = CKKS_SCALE
        else:
            ctx = ts.context(
                ts.SCHEME_TYPE.BFV,
                POLY_DEGREE,
                plain_modulus=_bfv_plain_modulus(),
                coeff_mod_bit_sizes=[],
                encryption_type=encryption_type,
            )
        return ctx

    def _vector(self, ctx: ts.Context, values: np.ndarray) -> Any:
        if self.scheme == "ckks":
            return ts.ckks_vector(ctx, values.astype(np.float64))
        return ts.bfv_vector(ctx, values.astype(np.int64))

    def encrypt(self, values: np.ndarray, symmetric: bool = False) -> Any:
        """Encrypt ``values`` with the public key, or in a symmetric context."""
        return self._vector(self.sym_context if symmetric else self.context, values)

    def add_inplace(self, acc: Any, ct: Any) -> None:
        """Add ``ct`` into ``acc``."""
        acc.add_(ct)

    def mask_operand(self, mask: np.ndarray, kind: str) -> Any:
        """Return the mask as a TenSEAL plain operand: ``list``, ``ndarray`` or ``PlainTensor``."""
        values = mask.astype(np.float64 if self.scheme == "ckks" else np.int64)
        if kind == "list":
            return values.tolist()
        if kind == "ndarray":
            return values
        return ts.plain_tensor(values.tolist(), dtype="float" if self.scheme == "ckks" else "int")

    def prepare_mask(self, mask: np.ndarray, like: Any) -> Any:
        """Return the mask as the operand kind chosen by the caller (encoded on every call)."""
        return self.mask_operand(mask, self.mask_kind)

    def mul_mask(self, ct: Any, mask: Any, rescale: bool) -> Any:
        """Return ``ct * mask``; CKKS rescaling follows the context's ``auto_rescale`` flag."""
        if self.scheme == "ckks":
            self.context.auto_rescale = rescale
        out = ct.mul(mask)
        self.context.auto_rescale = True
        return out

    def square(self, ct: Any) -> Any:
        """Return ``ct**2`` (auto relinearise, and auto rescale for CKKS)."""
        if self.scheme == "ckks":
            return ct.square()
        return ct.mul(ct)  # BFVVector has no square in the C++ core

    def decrypt(self, ct: Any) -> list[float] | list[int]:
        """Decrypt and decode (TenSEAL returns a Python list)."""
        return ct.decrypt()

    def serialize(self, ct: Any) -> bytes:
        """Serialise a vector (protobuf around SEAL's default zstd-compressed ciphertexts)."""
        return ct.serialize()

    def deserialize(self, blob: bytes) -> Any:
        """Load a vector from bytes into the private context."""
        if self.scheme == "ckks":
            return ts.ckks_vector_from(self.context, blob)
        return ts.bfv_vector_from(self.context, blob)

    def level(self, ct: Any) -> int:
        """Return the number of coefficient-modulus primes left in ``ct``."""
        return ct.ciphertext()[0].coeff_modulus_size()

    def public_context(self) -> bytes:
        """Serialise the context with public and relinearisation keys only."""
        return self.context.serialize(
            save_public_key=True,
            save_secret_key=False,
            save_galois_keys=False,
            save_relin_keys=True,
        )

    def check_public_context(self, blob: bytes, values: np.ndarray) -> None:
        """Load a public context, check it is secret-free, encrypt with it, decrypt here."""
        receiver = ts.context_from(blob)
        if receiver.has_secret_key() or not receiver.is_public() or not receiver.has_relin_keys():
            raise CheckError("TenSEAL public context holds a secret key or lacks relin keys")
        ct = self.deserialize(self._vector(receiver, values).serialize())
        check_values(self.decrypt(ct), values, self.scheme, "TenSEAL public-context encrypt")


class TensealSealapi:
    """Raw SEAL through ``tenseal.sealapi``, for what the vector API does not expose.

    Parameters
    ----------
    scheme : {"ckks", "bfv"}
        Encryption scheme.
    """

    def __init__(self, scheme: str) -> None:
        self.scheme = scheme
        if scheme == "ckks":
            parms = tsapi.EncryptionParameters(tsapi.SCHEME_TYPE.CKKS)
            parms.set_poly_modulus_degree(POLY_DEGREE)
            parms.set_coeff_modulus(tsapi.CoeffModulus.Create(POLY_DEGREE, CKKS_BITS))
        else:
            parms = tsapi.EncryptionParameters(tsapi.SCHEME_TYPE.BFV)
            parms.set_poly_modulus_degree(POLY_DEGREE)
            parms.set_coeff_modulus(
                tsapi.CoeffModulus.BFVDefault(POLY_DEGREE, tsapi.SEC_LEVEL_TYPE.TC128)
            )
            parms.set_plain_modulus(tsapi.PlainModulus.Batching(POLY_DEGREE, BFV_PLAIN_BITS))
        self.context = tsapi.SEALContext(parms, True, tsapi.SEC_LEVEL_TYPE.TC128)
        keygen = tsapi.KeyGenerator(self.context)
        self.secret_key = keygen.secret_key()
        self.public_key = tsapi.PublicKey()
        keygen.create_public_key(self.public_key)
        self.encryptor = tsapi.Encryptor(self.context, self.public_key, self.secret_key)
        self.decryptor = tsapi.Decryptor(self.context, self.secret_key)
        self.evaluator = tsapi.Evaluator(self.context)
        if scheme == "ckks":
            self.encoder: Any = tsapi.CKKSEncoder(self.context)
        else:
            self.encoder = tsapi.BatchEncoder(self.context)

    def encode(self, values: np.ndarray) -> Any:
        """Encode ``values`` once (CKKS at the first data level)."""
        plain = tsapi.Plaintext()
        if self.scheme == "ckks":
            self.encoder.encode(
                values.astype(np.float64).tolist(), self.context.first_parms_id(), CKKS_SCALE, plain
            )
        else:
            self.encoder.encode(values.astype(np.int64).tolist(), plain)
        return plain

    def encrypt(self, values: np.ndarray) -> Any:
        """Encrypt with the public key."""
        ct = tsapi.Ciphertext()
        self.encryptor.encrypt(self.encode(values), ct)
        return ct

    def decrypt(self, ct: Any) -> np.ndarray:
        """Decrypt and decode."""
        plain = tsapi.Plaintext()
        self.decryptor.decrypt(ct, plain)
        if self.scheme == "ckks":
            return np.asarray(self.encoder.decode_double(plain))
        return np.asarray(self.encoder.decode_int64(plain))

    def mul_plain(self, ct: Any, plain: Any) -> Any:
        """Return ``ct * plain`` for a pre-encoded plaintext."""
        out = tsapi.Ciphertext()
        self.evaluator.multiply_plain(ct, plain, out)
        return out

    def to_ntt(self, ct: Any) -> Any:
        """Return an NTT-form copy of a BFV ciphertext."""
        ct_ntt = tsapi.Ciphertext()
        self.evaluator.transform_to_ntt(ct, ct_ntt)
        return ct_ntt

    def from_ntt(self, ct: Any) -> Any:
        """Return a coefficient-form copy of an NTT-form BFV ciphertext."""
        out = tsapi.Ciphertext()
        self.evaluator.transform_from_ntt(ct, out)
        return out

    def mul_plain_ntt_setup(self, ct: Any, plain: Any) -> tuple[Any, Any]:
        """Return NTT-form copies of a BFV ciphertext and plaintext."""
        ct_ntt = self.to_ntt(ct)
        plain_ntt = tsapi.Plaintext()
        self.evaluator.transform_to_ntt(plain, ct.parms_id(), plain_ntt)
        return ct_ntt, plain_ntt

    def saved_size(self, obj: Any) -> int:
        """Return the size of ``obj.save(path)`` (SEAL's default compression, zstd here)."""
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "obj")
            obj.save(path)
            return os.path.getsize(path)

    def seeded_symmetric_size(self, values: np.ndarray) -> int:
        """Return the saved size of a seeded symmetric encryption, checking it decrypts."""
        seeded = self.encryptor.encrypt_symmetric(self.encode(values))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "seeded")
            seeded.save(path)
            ct = tsapi.Ciphertext()
            ct.load(self.context, path)
            check_values(self.decrypt(ct), values, self.scheme, "ts.sealapi seeded symmetric")
            return os.path.getsize(path)

    def last_level_size(self, values: np.ndarray) -> int:
        """Return the saved size of an encryption mod-switched to the last level."""
        ct = self.encrypt(values)
        self.evaluator.mod_switch_to_inplace(ct, self.context.last_parms_id())
        check_values(self.decrypt(ct), values, self.scheme, "ts.sealapi last level")
        return self.saved_size(ct)


# --------------------------------------------------------------------------------------------
# Checks and timing
# --------------------------------------------------------------------------------------------


def split_seal_objects(blob: bytes) -> list[bytes]:
    """Split concatenated SEAL serialisations using the size in each SEALHeader.

    Parameters
    ----------
    blob : bytes
        Concatenation of ``save``/``to_string``/``to_bytes`` outputs.

    Returns
    -------
    list of bytes
        One entry per object; raises ``CheckError`` on a malformed header.
    """
    parts = []
    offset = 0
    while offset < len(blob):
        magic, header_size, _, _, _, _, size = SEAL_HEADER.unpack_from(blob, offset)
        if magic != SEAL_MAGIC or header_size != SEAL_HEADER.size or offset + size > len(blob):
            raise CheckError(f"bad SEALHeader at byte {offset}")
        parts.append(blob[offset : offset + size])
        offset += size
    return parts


def check_values(got: Any, expected: np.ndarray, scheme: str, what: str) -> None:
    """Raise ``CheckError`` unless decrypted ``got`` matches ``expected``.

    Parameters
    ----------
    got : array-like
        Decrypted values (at least ``len(expected)`` of them).
    expected : numpy.ndarray
        Expected values.
    scheme : {"ckks", "bfv"}
        CKKS compares to ``CKKS_TOL``, BFV exactly.
    what : str
        Label for the error message.
    """
    values = np.asarray(got)[: len(expected)]
    if scheme == "ckks":
        err = float(np.max(np.abs(values - expected)))
        ok = err <= CKKS_TOL
    else:
        err = float(np.max(np.abs(values.astype(np.int64) - expected.astype(np.int64))))
        ok = err == 0
    if not ok:
        raise CheckError(f"{what}: max abs error {err:.3g} ({scheme})")


def time_pair(ops: Sequence[Callable[[], object]], n: int, rounds: int = ROUNDS) -> list[float]:
    """Return the mean wall time (µs) of each op, alternating the ops round by round.

    Parameters
    ----------
    ops : sequence of callables
        Operations to time (one per library), each called ``n`` times after one warm-up call.
    n : int
        Calls per op, split into ``rounds`` batches.
    rounds : int
        Number of alternating batches.

    Returns
    -------
    list of float
        Mean microseconds per call, in the order of ``ops``.
    """
    per_round = max(1, math.ceil(n / rounds))
    totals = [0.0] * len(ops)
    for op in ops:
        op()
    for r in range(rounds):
        order = range(len(ops)) if r % 2 == 0 else reversed(range(len(ops)))
        for i in order:
            op = ops[i]
            start = time.perf_counter()
            for _ in range(per_round):
                op()
            totals[i] += time.perf_counter() - start
    return [1e6 * t / (per_round * rounds) for t in totals]


@dataclass
class Row:
    """One table row: a time in µs or a size in bytes per library (``None`` = not available)."""

    operation: str
    tenseal: float | None
    seal: float | None
    unit: str = "µs"


def label_vector(label: int, slots: int) -> np.ndarray:
    """Return the one-hot label replicated over ``slots`` slots."""
    return (np.arange(slots) % N_CLASSES == label).astype(np.int64)


# --------------------------------------------------------------------------------------------
# One scheme
# --------------------------------------------------------------------------------------------


def _encrypt_op(
    backend: Any, labels: Sequence[int], vectors: Sequence[np.ndarray], out: list[Any]
) -> Callable[[], None]:
    """Return an op encrypting the next label of ``labels`` (cycling) into ``out``."""
    it = itertools.cycle(labels)

    def op() -> None:
        label = next(it)
        out.append((label, backend.encrypt(vectors[label])))

    return op


def _add_op(
    backend: Any, pool: Sequence[tuple[int, Any]], acc: Any, counts: np.ndarray
) -> Callable[[], None]:
    """Return an op adding the next pool ciphertext into ``acc`` and counting its label."""
    it = itertools.cycle(pool)

    def op() -> None:
        label, ct = next(it)
        backend.add_inplace(acc, ct)
        counts[label] += 1

    return op


def _fastest_tenseal_mask(tb: TensealBackend, ct: Any, mask: np.ndarray, n: int) -> str:
    """Pick TenSEAL's fastest plain operand for a mask multiply (short pre-run)."""
    kinds = ["list", "ndarray", "PlainTensor"]
    operands = [tb.mask_operand(mask, kind) for kind in kinds]
    times = time_pair(
        [lambda operand=operand: tb.mul_mask(ct, operand, True) for operand in operands],
        max(8, n // 10),
        rounds=2,
    )
    return kinds[int(np.argmin(times))]


def bench_scheme(scheme: str, repeat: int, rng: np.random.Generator) -> tuple[list[Row], dict]:
    """Time and check every operation of one scheme on both libraries.

    Parameters
    ----------
    scheme : {"ckks", "bfv"}
        Encryption scheme.
    repeat : int
        Calls per timed operation (additions use ``5 * repeat``).
    rng : numpy.random.Generator
        Source of labels and masks.

    Returns
    -------
    rows : list of Row
        Table rows.
    facts : dict
        Values quoted in the notes below the table.
    """
    tag = scheme.upper()
    slots = CKKS_SLOTS if scheme == "ckks" else BFV_SLOTS
    backends = [TensealBackend(scheme), SealBackend(scheme)]
    tb, sb = backends
    vectors = [label_vector(c, slots) for c in range(N_CLASSES)]
    labels = rng.integers(0, N_CLASSES, size=max(repeat, 16)).tolist()
    mask = rng.integers(0, 2, size=slots).astype(np.int64)
    rows: list[Row] = []
    facts: dict[str, Any] = {}

    # 1. Encryption, public key then secret key; the public-key ciphertexts feed the additions.
    pools: list[list[tuple[int, Any]]] = [[], []]
    t = time_pair(
        [_encrypt_op(b, labels, vectors, p) for b, p in zip(backends, pools, strict=True)], repeat
    )
    rows.append(Row(f"{tag} encrypt, public key ({slots} slots)", *t))
    for b, pool in zip(backends, pools, strict=True):
        for label, ct in pool[:4]:
            check_values(b.decrypt(ct), vectors[label], scheme, f"{b.name} encrypt")
    sym_label = labels[0]
    t = time_pair(
        [lambda b=b: b.encrypt(vectors[sym_label], symmetric=True) for b in backends], repeat
    )
    rows.append(Row(f"{tag} encrypt, secret key (symmetric)", *t))
    for b in backends:
        check_values(
            b.decrypt(b.encrypt(vectors[sym_label], symmetric=True)),
            vectors[sym_label],
            scheme,
            f"{b.name} symmetric encrypt",
        )

    # 2. In-place addition: sum encrypted labels, check the per-class counts.
    accs = [b.encrypt(np.zeros(slots, dtype=np.int64)) for b in backends]
    counts = [np.zeros(N_CLASSES, dtype=np.int64) for _ in backends]
    ops = [_add_op(b, p, a, c) for b, p, a, c in zip(backends, pools, accs, counts, strict=True)]
    t = time_pair(ops, 5 * repeat)
    rows.append(Row(f"{tag} ct + ct, in place", *t))
    for b, acc, count in zip(backends, accs, counts, strict=True):
        expected = count[np.arange(slots) % N_CLASSES]
        check_values(b.decrypt(acc), expected, scheme, f"{b.name} sum of {count.sum()} labels")

    # 3. Mask multiply on a fresh ciphertext.
    label0, _ = pools[0][0]
    fresh = [pool[0][1] for pool in pools]
    tb.mask_kind = _fastest_tenseal_mask(tb, fresh[0], mask, repeat)
    facts["tenseal_mask_kind"] = tb.mask_kind
    masks = [b.prepare_mask(mask, ct) for b, ct in zip(backends, fresh, strict=True)]
    masked_expected = vectors[label0] * mask
    if scheme == "ckks":
        t = time_pair(
            [
                lambda b=b, c=c, m=m: b.mul_mask(c, m, False)
                for b, c, m in zip(backends, fresh, masks, strict=True)
            ],
            repeat,
        )
        rows.append(Row(f"CKKS ct x 0/1 mask, no rescale (TenSEAL: {tb.mask_kind})", *t))
        for b, c, m in zip(backends, fresh, masks, strict=True):
            got = b.decrypt(b.mul_mask(c, m, False))
            check_values(got, masked_expected, scheme, f"{b.name} mask, no rescale")
    ops = [
        lambda b=b, c=c, m=m: b.mul_mask(c, m, True)
        for b, c, m in zip(backends, fresh, masks, strict=True)
    ]
    t = time_pair(ops, repeat)
    name = "ct x 0/1 mask + rescale" if scheme == "ckks" else "ct x 0/1 mask"
    rows.append(Row(f"{tag} {name} (TenSEAL: {tb.mask_kind})", *t))
    masked = [b.mul_mask(c, m, True) for b, c, m in zip(backends, fresh, masks, strict=True)]
    for b, ct in zip(backends, masked, strict=True):
        check_values(b.decrypt(ct), masked_expected, scheme, f"{b.name} mask multiply")

    # The same mask multiply through TenSEAL's raw binding, with a pre-encoded plaintext.
    raw = TensealSealapi(scheme)
    raw_ct = raw.encrypt(vectors[label0])
    raw_mask = raw.encode(mask)
    t = time_pair(
        [lambda: raw.mul_plain(raw_ct, raw_mask), lambda: sb.mul_mask(fresh[1], masks[1], False)],
        repeat,
    )
    name = "ct x pre-encoded mask, no rescale" if scheme == "ckks" else "ct x pre-encoded mask"
    rows.append(Row(f"{tag} {name} (TenSEAL via ts.sealapi)", *t))
    check_values(raw.decrypt(raw.mul_plain(raw_ct, raw_mask)), masked_expected, scheme, "sealapi")
    if scheme == "bfv":
        # BFV multiply_plain NTT-transforms ciphertext and plaintext on every call; keeping both
        # in NTT form (plaintext transformed once) leaves a pointwise product.
        t = time_pair(
            [lambda: raw.to_ntt(raw_ct), lambda: sb.to_ntt(fresh[1])],
            repeat,
        )
        rows.append(Row("BFV ct to NTT form (once per ct; TenSEAL via ts.sealapi)", *t))
        raw_ct_ntt, raw_mask_ntt = raw.mul_plain_ntt_setup(raw_ct, raw_mask)
        seal_ct_ntt = sb.to_ntt(fresh[1])
        seal_mask_ntt = sb.prepare_mask_ntt(mask, fresh[1])
        t = time_pair(
            [
                lambda: raw.mul_plain(raw_ct_ntt, raw_mask_ntt),
                lambda: sb.mul_mask(seal_ct_ntt, seal_mask_ntt, False),
            ],
            repeat,
        )
        rows.append(Row("BFV NTT ct x NTT pre-encoded mask (TenSEAL via ts.sealapi)", *t))
        t = time_pair([lambda: raw.from_ntt(raw_ct_ntt), lambda: sb.from_ntt(seal_ct_ntt)], repeat)
        rows.append(Row("BFV ct from NTT form (before relin/decrypt; TenSEAL via ts.sealapi)", *t))
        check_values(
            raw.decrypt(raw.from_ntt(raw.mul_plain(raw_ct_ntt, raw_mask_ntt))),
            masked_expected,
            scheme,
            "sealapi NTT mask multiply",
        )
        product = sb.from_ntt(sb.mul_mask(seal_ct_ntt, seal_mask_ntt, False))
        check_values(sb.decrypt(product), masked_expected, scheme, "seal-python NTT mask multiply")

    # 4. Square + relinearise (+ rescale): CKKS on the masked ciphertext, ending at the last level.
    inputs = masked if scheme == "ckks" else fresh
    t = time_pair(
        [lambda b=b, c=c: b.square(c) for b, c in zip(backends, inputs, strict=True)], repeat
    )
    name = "square + relin + rescale" if scheme == "ckks" else "square + relin"
    rows.append(Row(f"{tag} {name}", *t))
    squared = [b.square(c) for b, c in zip(backends, inputs, strict=True)]
    square_expected = masked_expected if scheme == "ckks" else vectors[label0]
    for b, ct in zip(backends, squared, strict=True):
        check_values(b.decrypt(ct), square_expected, scheme, f"{b.name} square")
    if scheme == "ckks":
        levels = [b.level(ct) for b, ct in zip(backends, squared, strict=True)]
        if levels != [1, 1]:
            raise CheckError(f"CKKS squared ciphertexts should be at the last level, got {levels}")
        # A mask pre-encoded at a lower level (parms_id of the rescaled ciphertext).
        low_mask = sb.prepare_mask(mask, masked[1])
        check_values(
            sb.decrypt(sb.mul_mask(masked[1], low_mask, False)),
            masked_expected,
            scheme,
            "seal-python mask pre-encoded at a lower level",
        )

    # 5. Decrypt + decode.
    t = time_pair(
        [lambda b=b, c=c: b.decrypt(c) for b, c in zip(backends, fresh, strict=True)], repeat
    )
    rows.append(Row(f"{tag} decrypt + decode", *t))

    # 6. Serialisation: time, then sizes.
    blobs = [b.serialize(c) for b, c in zip(backends, fresh, strict=True)]
    t = time_pair(
        [lambda b=b, c=c: b.serialize(c) for b, c in zip(backends, fresh, strict=True)], repeat
    )
    rows.append(Row(f"{tag} serialise fresh ct", *t))
    t = time_pair(
        [lambda b=b, x=x: b.deserialize(x) for b, x in zip(backends, blobs, strict=True)], repeat
    )
    rows.append(Row(f"{tag} deserialise fresh ct (validated)", *t))
    for b, blob in zip(backends, blobs, strict=True):
        check_values(b.decrypt(b.deserialize(blob)), vectors[label0], scheme, f"{b.name} load")

    rows.append(Row(f"{tag} fresh ct, public key, default serialisation", *map(len, blobs), "B"))
    rows.append(Row(f"{tag} fresh ct, uncompressed", None, len(blobs[1]), "B"))
    sym = [b.serialize(b.encrypt(vectors[label0], symmetric=True)) for b in backends]
    rows.append(Row(f"{tag} fresh ct, symmetric, default serialisation", *map(len, sym), "B"))
    sym_seal = sb.encrypt(vectors[label0], symmetric=True)
    facts["seal_symmetric_seeded"] = sym_seal.contains_seed()
    rows.append(
        Row(
            f"{tag} fresh ct, seeded symmetric + zstd (TenSEAL via ts.sealapi)",
            raw.seeded_symmetric_size(vectors[label0]),
            None,
            "B",
        )
    )
    if scheme == "ckks":
        rows.append(
            Row(
                "CKKS ct after mask+rescale+square+relin+rescale (last level)",
                *(len(b.serialize(c)) for b, c in zip(backends, squared, strict=True)),
                "B",
            )
        )
    else:
        last = sb.to_last_level(squared[1])
        check_values(sb.decrypt(last), vectors[label0], scheme, "seal-python BFV last level")
        facts["bfv_last_noise_budget"] = sb.decryptor.invariant_noise_budget(last)
        name = "BFV ct after square+relin, mod-switched to last level"
        rows.append(Row(name, None, len(sb.serialize(last)), "B"))
        rows.append(
            Row(
                "BFV ct mod-switched to last level + zstd (TenSEAL via ts.sealapi)",
                raw.last_level_size(vectors[label0]),
                None,
                "B",
            )
        )
    public = [b.public_context() for b in backends]
    for b, blob in zip(backends, public, strict=True):
        b.check_public_context(blob, vectors[label0])
    rows.append(Row(f"{tag} public context (pk + relin keys, no sk)", *map(len, public), "B"))
    return rows, facts


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def _cell(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "B":
        return f"{int(value):,} B"
    return f"{value:,.1f} µs" if value < 100 else f"{value:,.0f} µs"


def render(rows: list[Row], facts: dict[str, Any], repeat: int, elapsed: float) -> str:
    """Return the markdown report.

    Parameters
    ----------
    rows : list of Row
        Table rows of both schemes.
    facts : dict
        Values quoted in the notes.
    repeat : int
        ``--repeat`` value.
    elapsed : float
        Wall time of the whole run in seconds.

    Returns
    -------
    str
        Header, table and notes.
    """
    processor = platform.processor() or platform.machine()
    lines = [
        "# TenSEAL vs seal-python on the encrypted-forest HE operations",
        "",
        f"Machine: processor `{processor}`, os.cpu_count() = {os.cpu_count()}, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}. "
        f"Libraries: tenseal {metadata.version('tenseal')}, "
        f"seal-python {metadata.version('seal-python')}, numpy {np.__version__}.",
        "",
        f"N = {POLY_DEGREE}, 128-bit security. CKKS: moduli {CKKS_BITS} bits, scale 2^40, "
        f"{CKKS_SLOTS} slots. BFV: CoeffModulus.BFVDefault({POLY_DEGREE}), plain modulus "
        f"{_bfv_plain_modulus()} ({BFV_PLAIN_BITS}-bit batching prime), {BFV_SLOTS} slots. "
        f"Times: mean wall µs per op over {repeat} calls ({5 * repeat} for additions), "
        f"{ROUNDS} rounds alternating the libraries; shared machine, so timings are noisy "
        f"(run took {elapsed:.0f} s). All results verified (CKKS to {CKKS_TOL:g}, BFV exact).",
        "",
        "| operation | TenSEAL | seal-python | ratio TenSEAL/seal-python |",
        "| --- | ---: | ---: | ---: |",
    ]
    for row in rows:
        ratio = "–"
        if row.tenseal is not None and row.seal is not None and row.seal > 0:
            ratio = f"{row.tenseal / row.seal:.2f}"
        lines.append(
            f"| {row.operation} | {_cell(row.tenseal, row.unit)} | "
            f"{_cell(row.seal, row.unit)} | {ratio} |"
        )
    modes = ", ".join(seal.compr_mode_type.__members__)
    lines += [
        "",
        "Notes:",
        f"- seal-python compression modes in this build: {modes}; `encrypt_symmetric` returns an "
        f"expanded ciphertext (`contains_seed()` = {facts['ckks']['seal_symmetric_seeded']}), "
        "so neither compression nor seeded symmetric ciphertexts are available.",
        "- TenSEAL vector serialisation always uses SEAL's default compression (zstd) and its "
        "symmetric context does not seed; `tenseal.sealapi` (a separate raw SEAL binding, not "
        "interoperable with `CKKSVector`/`BFVVector`) can save seeded symmetric ciphertexts.",
        "- TenSEAL encodes a plain operand on every `mul` and has no pre-encoded plaintext in its "
        "vector API (`plain_tensor` only holds values; `enc_matmul_encoding` is for matmul). "
        f"Fastest operand kind: CKKS `{facts['ckks']['tenseal_mask_kind']}`, "
        f"BFV `{facts['bfv']['tenseal_mask_kind']}`. Pre-encoding needs `tenseal.sealapi`.",
        "- TenSEAL has no mod-switch in its BFV vector API; BFV last level via ts.sealapi. "
        f"seal-python BFV last-level noise budget after square: "
        f"{facts['bfv']['bfv_last_noise_budget']} bits.",
        "- Public context: seal-python = EncryptionParameters.to_bytes() + PublicKey.to_string() "
        "+ RelinKeys.to_string() (relin keys unseeded, uncompressed); TenSEAL = "
        "Context.serialize(save_secret_key=False, save_galois_keys=False) (zstd).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the markdown table.

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line arguments.

    Returns
    -------
    int
        Exit status (non-zero if a check failed).
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=200, help="calls per timed op (default 200)")
    parser.add_argument("--markdown", type=Path, help="also write the report to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    rng = np.random.default_rng(SEED)
    start = time.perf_counter()
    rows: list[Row] = []
    facts: dict[str, Any] = {}
    try:
        for scheme in ("ckks", "bfv"):
            scheme_rows, facts[scheme] = bench_scheme(scheme, args.repeat, rng)
            rows += scheme_rows
    except CheckError as exc:
        print(f"CHECK FAILED: {exc}", file=sys.stderr)
        return 1
    report = render(rows, facts, args.repeat, time.perf_counter() - start)
    print(report, end="")
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
