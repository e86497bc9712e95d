"""The two homomorphic schemes, one class each, looked up in :data:`SCHEMES` by name.

Everything that differs between CKKS and BFV lives here — parameters, encoding, what a fresh
ciphertext looks like, rotations, when to rescale, the lane geometry of packed labels and
how decrypted slots are read — so that the contexts (:mod:`.contexts`) and the slot layout
(:mod:`.blocks`) hold no ``if scheme == ...`` branch.

* :class:`CKKS` — approximate arithmetic (the paper's choice); ``N = 8192``, coefficient
  moduli of 50 + 40 + 40 + 60 bits (190 ≤ 218, 128-bit security), masks at scale 2^40,
  packed labels at 2^37. A query's mask multiplication uses one 40-bit level and what
  reaches the client sits on the 50-bit prime; the leaf store keeps the second 40-bit level
  for the row-sum masks of prediction. (The 60-bit special prime only serves key switching,
  whose noise grows with the largest data prime: ~100 times smaller than with a 60-bit first
  prime, which made rotated labels too noisy for exact counts at 3,000 rows.) ``N/2``
  complex slots in one row.
* :class:`BFV` — exact integer arithmetic: ``N = 8192``, coefficient moduli of 60 + 60 + 60
  bits (two data primes and the special prime; 180 ≤ 218, 128-bit security) and a 24-bit
  batching plain modulus. The server returns class counts, not their squares, so counts
  only need to stay below the plain modulus (every node's bootstrap draws, up to
  16,760,832), and 120 bits of data modulus leave ~18 bits of noise budget after the worst
  case (a label rotation added to itself that many times, masked, 1,024 such blocks summed;
  tests/privacy/he/test_he.py). Two data primes instead of SEAL's default four halve a label
  ciphertext (256 KiB) and the cost of every addition. ``N = 4096`` (two 36-bit primes)
  would halve it again but has too little budget: the rotations of one pack share the
  constant coefficient of its noise, so the sums of a 75,000-row node grow it coherently
  (``benchmarks/label_layout.py`` measures the budgets). ``N`` integer slots in a 2 × N/2
  matrix whose rows rotate separately.

Each scheme also fixes its *rotation parts* (:class:`~.blocks.BlockLayout`): the server holds
``1/P`` of a label pack's lane rotations, 128 KiB per row with BFV (P = 2) and 96 KiB with
CKKS (P = 4).
"""

from __future__ import annotations

import numpy as np
import seal

__all__ = ["BFV", "CKKS", "HEError", "HEScheme", "SCHEMES", "scheme_named", "scheme_of"]

CKKS_POLY_MODULUS_DEGREE = 8192
CKKS_COEFF_BITS = (50, 40, 40, 60)
CKKS_SCALE_BITS = 40
# Packed labels are encoded at 2^37 (with masks at 2^40, query blocks reach the square at
# ~2^37; see the server's CKKS_MAX_SCALED_COUNT). Key switching (the server's rotations) adds
# noise of fixed absolute size that grows with the largest data prime over the special prime:
# a 50-bit first prime keeps it ~100 times below a 60-bit one's (measured per slot: 7.5e3 vs
# 7.7e5 in coefficient units). The label scale balances that noise against the masks'
# encoding error (the smaller mask value 2^-shift a larger label scale forces).
CKKS_LABEL_SCALE_BITS = 37
BFV_POLY_MODULUS_DEGREE = 8192
BFV_COEFF_BITS = (60, 60, 60)
BFV_PLAIN_BITS = 24


class HEError(ValueError):
    """Malformed, foreign or tampered homomorphic-encryption material."""


class HEScheme:
    """What one scheme does differently; subclasses fill every attribute and method.

    Attributes
    ----------
    name : str
        ``"ckks"`` or ``"bfv"``, as users and the wire name it.
    n_slots : int
        Slots of a ciphertext (CKKS: complex slots).
    slot_rows : int
        Rows of the slot matrix; rotations turn each row separately.
    lane_width : int
        Slots one class count takes per lane and block, in units of τ (BFV keeps a lane's
        two query blocks side by side: ``2τ``; CKKS packs them as a complex number: ``τ``).
    leaves_per_lane : int
        Leaf-store entries per lane.
    rotation_parts : int
        ``P``: the server holds ``1/P`` of each label pack's lane rotations
        (:class:`~.blocks.BlockLayout`).
    fresh_ntt_form : bool
        Whether a freshly encrypted ciphertext is in NTT form.
    approximate : bool
        CKKS: results carry noise, counts are scaled and rounded by the client; BFV: exact.
    poly_modulus_degree : int
        N: a ciphertext is 2 polynomials of N coefficients per prime.
    max_count : int or None
        The largest class count a query or leaf block can hold exactly (BFV: the plain
        modulus less one); None when precision, not a modulus, bounds it (CKKS).
    leaf_store_keeps_level : bool
        Whether a finished leaf-store ciphertext keeps a level for the row-sum masks of
        prediction (CKKS) or is switched to the last level (BFV).
    slot_dtype, mask_dtype : numpy dtype
        Values a plaintext encodes / a mask holds.
    """

    name: str
    seal_type: object
    n_slots: int
    slot_rows: int
    lane_width: int
    leaves_per_lane: int
    rotation_parts: int
    fresh_ntt_form: bool
    leaf_store_keeps_level: bool
    approximate: bool
    poly_modulus_degree: int
    slot_dtype: type
    mask_dtype: type
    scale: float
    label_scale: float

    @property
    def row_slots(self) -> int:
        """Slots of one slot-matrix row (what a rotation moves cyclically)."""
        return self.n_slots // self.slot_rows

    @property
    def max_count(self) -> int | None:
        return None

    def galois_element(self, step: int) -> int:
        """SEAL's Galois element of a rotation by ``step`` slots (generator 3 mod 2N)."""
        return pow(3, step, 2 * self.poly_modulus_degree)

    def parameters(self) -> seal.EncryptionParameters:
        raise NotImplementedError

    def encoder(self, context: seal.SEALContext):
        raise NotImplementedError

    def encode(self, encoder, values: np.ndarray, scale: float | None) -> seal.Plaintext:
        raise NotImplementedError

    def decode(self, encoder, plain: seal.Plaintext, complex_slots: bool) -> np.ndarray:
        raise NotImplementedError

    def check_fresh(self, ct: seal.Ciphertext) -> None:
        """Raise :class:`HEError` unless ``ct`` looks freshly encrypted at the label scale."""
        if ct.is_ntt_form() != self.fresh_ntt_form:
            raise HEError(f"ciphertext NTT flag is {ct.is_ntt_form()}, a fresh {self.name} "
                          "ciphertext has the other")

    def rotate(self, evaluator, ct: seal.Ciphertext, step: int, keys) -> seal.Ciphertext:
        raise NotImplementedError

    def prepare(self, evaluator, ct: seal.Ciphertext) -> seal.Ciphertext:
        """Put a fresh ciphertext in the form masks multiply fastest."""
        return ct

    def place_mask(self, evaluator, plain: seal.Plaintext, parms_id) -> None:
        """Bring an encoded mask to ``parms_id`` in the form it multiplies in."""
        raise NotImplementedError

    def finish_sum(self, evaluator, ct: seal.Ciphertext) -> None:
        """After masked products were added up (in place)."""
        raise NotImplementedError

    def centered(self, slots: np.ndarray, plain_modulus: int) -> np.ndarray:
        """Decrypted slots as signed values."""
        return slots

    # ------------------------------------------------------------------ slot layout
    def pack_offsets(self, tau: int, row_slots: int) -> tuple[int, ...]:
        """Where, relative to a lane's start, a packed label's one-hot vector is written
        (``row_slots``: slots of one slot-matrix row)."""
        raise NotImplementedError

    def block_slots(self, mask: np.ndarray, start: int, tau: int, part: int,
                    value: float) -> None:
        """Write query block ``part`` of the lane starting at ``start`` into ``mask``."""
        raise NotImplementedError

    def leaf_slots(self, mask: np.ndarray, start: int, tau: int, position: int) -> None:
        """Write leaf-store ``position``'s selector of the lane starting at ``start``."""
        raise NotImplementedError

    def blocks_of_lanes(self, lanes: np.ndarray, tau: int) -> np.ndarray:
        """``(lanes, 2, τ)`` values of a lane's two query blocks, from its slots (CKKS:
        still scaled by the mask value ``v``)."""
        raise NotImplementedError

    def leaves_of_lanes(self, lanes: np.ndarray, tau: int) -> np.ndarray:
        """``(lanes · leaves_per_lane, τ)`` leaf class counts from the lanes' slots."""
        raise NotImplementedError


class CKKS(HEScheme):
    name = "ckks"
    seal_type = seal.scheme_type.ckks
    poly_modulus_degree = CKKS_POLY_MODULUS_DEGREE
    n_slots = CKKS_POLY_MODULUS_DEGREE // 2
    slot_rows = 1
    lane_width = 1
    leaves_per_lane = 1
    rotation_parts = 4
    fresh_ntt_form = True
    leaf_store_keeps_level = True
    approximate = True
    slot_dtype = np.float64
    mask_dtype = np.complex128
    scale = 2.0 ** CKKS_SCALE_BITS
    label_scale = 2.0 ** CKKS_LABEL_SCALE_BITS

    def parameters(self) -> seal.EncryptionParameters:
        parms = seal.EncryptionParameters(self.seal_type)
        parms.set_poly_modulus_degree(self.poly_modulus_degree)
        parms.set_coeff_modulus(seal.CoeffModulus.Create(self.poly_modulus_degree,
                                                         list(CKKS_COEFF_BITS)))
        return parms

    def encoder(self, context: seal.SEALContext):
        return seal.CKKSEncoder(context)

    def encode(self, encoder, values: np.ndarray, scale: float | None) -> seal.Plaintext:
        scale = self.scale if scale is None else scale
        values = np.asarray(values)
        if np.iscomplexobj(values):
            return encoder.encode_complex(np.ascontiguousarray(values, dtype=np.complex128),
                                          scale)
        return encoder.encode(np.ascontiguousarray(values, dtype=np.float64), scale)

    def decode(self, encoder, plain: seal.Plaintext, complex_slots: bool) -> np.ndarray:
        if complex_slots:
            return np.asarray(encoder.decode_complex(plain), dtype=np.complex128)
        return np.asarray(encoder.decode(plain), dtype=np.float64)

    def check_fresh(self, ct: seal.Ciphertext) -> None:
        super().check_fresh(ct)
        if ct.scale() != self.label_scale:
            raise HEError(f"ciphertext scale {ct.scale()!r} is not the label scale "
                          f"{self.label_scale!r}")

    def rotate(self, evaluator, ct: seal.Ciphertext, step: int, keys) -> seal.Ciphertext:
        return evaluator.rotate_vector(ct, step, keys)

    def place_mask(self, evaluator, plain: seal.Plaintext, parms_id) -> None:
        if plain.parms_id() != parms_id:
            evaluator.mod_switch_to_inplace(plain, parms_id)

    def finish_sum(self, evaluator, ct: seal.Ciphertext) -> None:
        evaluator.rescale_to_next_inplace(ct)

    def pack_offsets(self, tau: int, row_slots: int) -> tuple[int, ...]:
        return (0,)

    def block_slots(self, mask, start, tau, part, value) -> None:
        # Two blocks share a lane as the real and imaginary parts of z = v·a + i·v·b.
        mask[start: start + tau] = complex(0.0, value) if part else value

    def leaf_slots(self, mask, start, tau, position) -> None:
        # Real parts only: a slot-wise mask cannot tell a slot's real and imaginary parts
        # apart, so one leaf per lane.
        mask[start: start + tau] = 1.0

    def blocks_of_lanes(self, lanes: np.ndarray, tau: int) -> np.ndarray:
        # z = v·a + i·v·b: the two blocks are the real and imaginary parts.
        return np.stack([lanes.real, lanes.imag], axis=1)

    def leaves_of_lanes(self, lanes: np.ndarray, tau: int) -> np.ndarray:
        return lanes.real


class BFV(HEScheme):
    """Exact integer arithmetic (see the module docstring).

    Parameters
    ----------
    poly_modulus_degree : int, default=8192
    plain_bits : int, default=24
        Bits of the batching plain modulus.
    coeff_bits : tuple of int or None, default=(60, 60, 60)
        Bit sizes of the coefficient moduli (the last is the special prime); None: SEAL's
        default for ``poly_modulus_degree``.
    rotation_parts : int, default=2

    The library's set is the defaults; other values serve ``benchmarks/label_layout.py``'s
    comparison only (a session's public context must hold the library's set).
    """

    name = "bfv"
    seal_type = seal.scheme_type.bfv
    slot_rows = 2
    lane_width = 2
    leaves_per_lane = 2
    fresh_ntt_form = False
    leaf_store_keeps_level = False
    approximate = False
    slot_dtype = np.int64
    mask_dtype = np.int64
    scale = 1.0
    label_scale = 1.0

    def __init__(self, poly_modulus_degree: int = BFV_POLY_MODULUS_DEGREE,
                 plain_bits: int = BFV_PLAIN_BITS,
                 coeff_bits: tuple[int, ...] | None = BFV_COEFF_BITS,
                 rotation_parts: int = 2):
        self.poly_modulus_degree = int(poly_modulus_degree)
        self.n_slots = self.poly_modulus_degree
        self.plain_bits = int(plain_bits)
        self.coeff_bits = None if coeff_bits is None else tuple(int(b) for b in coeff_bits)
        self.rotation_parts = int(rotation_parts)

    @property
    def max_count(self) -> int:
        return int(self.parameters().plain_modulus().value()) - 1

    def parameters(self) -> seal.EncryptionParameters:
        parms = seal.EncryptionParameters(self.seal_type)
        parms.set_poly_modulus_degree(self.poly_modulus_degree)
        parms.set_coeff_modulus(
            seal.CoeffModulus.BFVDefault(self.poly_modulus_degree) if self.coeff_bits is None
            else seal.CoeffModulus.Create(self.poly_modulus_degree, list(self.coeff_bits)))
        parms.set_plain_modulus(seal.PlainModulus.Batching(self.poly_modulus_degree,
                                                           self.plain_bits))
        return parms

    def encoder(self, context: seal.SEALContext):
        return seal.BatchEncoder(context)

    def encode(self, encoder, values: np.ndarray, scale: float | None) -> seal.Plaintext:
        # Signed integers in (-t/2, t/2), as SEAL's batch encoder takes int64 input.
        return encoder.encode(np.ascontiguousarray(values, dtype=np.int64))

    def decode(self, encoder, plain: seal.Plaintext, complex_slots: bool) -> np.ndarray:
        return np.asarray(encoder.decode(plain), dtype=np.int64)

    def rotate(self, evaluator, ct: seal.Ciphertext, step: int, keys) -> seal.Ciphertext:
        if not ct.is_ntt_form():
            return evaluator.rotate_rows(ct, step, keys)
        out = evaluator.transform_from_ntt(ct)  # BFV rotates in coefficient form
        evaluator.rotate_rows_inplace(out, step, keys)
        evaluator.transform_to_ntt_inplace(out)
        return out

    def prepare(self, evaluator, ct: seal.Ciphertext) -> seal.Ciphertext:
        if not ct.is_ntt_form():
            evaluator.transform_to_ntt_inplace(ct)
        return ct

    def place_mask(self, evaluator, plain: seal.Plaintext, parms_id) -> None:
        evaluator.transform_to_ntt_inplace(plain, parms_id)

    def finish_sum(self, evaluator, ct: seal.Ciphertext) -> None:
        evaluator.transform_from_ntt_inplace(ct)

    def centered(self, slots: np.ndarray, plain_modulus: int) -> np.ndarray:
        slots = slots.astype(np.int64)
        return np.where(slots > plain_modulus // 2, slots - plain_modulus, slots)

    def pack_offsets(self, tau: int, row_slots: int) -> tuple[int, ...]:
        # Both halves of the lane (the two query blocks) in both slot-matrix rows (each
        # row rotates on its own).
        return (0, tau, row_slots, row_slots + tau)

    def block_slots(self, mask, start, tau, part, value) -> None:
        start += tau if part else 0
        mask[start: start + tau] = value

    def leaf_slots(self, mask, start, tau, position) -> None:
        start += (int(position) % 2) * tau
        mask[start: start + tau] = 1

    def blocks_of_lanes(self, lanes: np.ndarray, tau: int) -> np.ndarray:
        return lanes.astype(np.float64).reshape(lanes.shape[0], 2, tau)

    def leaves_of_lanes(self, lanes: np.ndarray, tau: int) -> np.ndarray:
        return lanes.reshape(-1, tau)


#: The schemes by name: the one place a scheme name turns into behaviour.
SCHEMES: dict[str, HEScheme] = {scheme.name: scheme for scheme in (CKKS(), BFV())}


def scheme_named(name: str) -> HEScheme:
    """The scheme called ``name``; a clear error for any other name."""
    try:
        return SCHEMES[name]
    except (KeyError, TypeError):
        raise ValueError(f"scheme must be one of {tuple(SCHEMES)}, got {name!r}") from None


def scheme_of(parms: seal.EncryptionParameters) -> HEScheme:
    """The library's scheme of SEAL encryption parameters (of that scheme's type)."""
    for scheme in SCHEMES.values():
        if parms.scheme() == scheme.seal_type:
            return scheme
    raise HEError(f"unsupported homomorphic scheme {parms.scheme()}")
