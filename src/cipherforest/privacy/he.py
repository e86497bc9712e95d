"""Homomorphic encryption of labels: a small interface over Microsoft SEAL (``seal-python``).

The encrypted forest needs few operations (docs/private_forest.md): encrypt a label's one-hot vector
replicated over all slots, add ciphertexts, multiply by pre-encoded 0/±1 block masks, square
(+ relinearise, + rescale), decrypt, serialise and load untrusted bytes with validation.
Two schemes sit behind one interface:

* ``"ckks"`` — approximate arithmetic (the paper's choice); ``N = 8192``, coefficient moduli
  of 50 + 40 + 40 + 60 bits (190 ≤ 218, 128-bit security), masks at scale 2^40, packed labels
  at 2^37. A mask multiplication and the square each use one 40-bit level; what reaches the
  client sits on the 50-bit prime (the 60-bit special prime only serves key switching, whose
  noise grows with the largest data prime: ~100 times smaller than with a 60-bit first
  prime, which made rotated labels too noisy for exact counts at 3,000 rows).
* ``"bfv"`` — exact integer arithmetic (the exact mode): SEAL's default 128-bit modulus for
  ``N = 8192`` and a 30-bit batching plain modulus. Counts and squared counts are exact
  integers as long as they stay below the plain modulus.

``benchmarks/he_backends.py`` measured seal-python against TenSEAL on these operations: equal
on encryption, addition, squaring and decryption (both wrap SEAL), 4.3× faster on mask
multiplication (TenSEAL's vectors re-encode the plain operand on every call) and 13–19×
faster at serialising. Hence seal-python.

Roles: :class:`SecretContext` (the data owner: key generation, encryption, decryption) and
:class:`PublicContext` (the server: evaluation only). The public context is serialised as a
tagged bundle of encryption parameters, public key, relinearisation keys and (optionally)
the Galois keys of one rotation step in both directions, which the server needs to expand
packed labels (``_blocks``); it never contains the secret key, and loading one rejects
anything else.

seal-python 4.1 as installed exposes neither compressed serialisation (no zstd/zlib in
``compr_mode_type``) nor seeded symmetric ciphertexts (``encrypt_symmetric`` returns an
expanded ciphertext): upload bytes shrink by packing, not by serialisation.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable

import numpy as np
import seal

__all__ = [
    "HEError",
    "PublicContext",
    "SecretContext",
    "SCHEMES",
]

SCHEMES = ("ckks", "bfv")
POLY_MODULUS_DEGREE = 8192
CKKS_COEFF_BITS = (50, 40, 40, 60)
CKKS_SCALE_BITS = 40
# Packed labels are encoded at 2^37 (with masks at 2^40, query blocks reach the square at
# ~2^37; see server._CKKS_MAX_SCALED_COUNT). Key switching (the server's rotations) adds noise
# of fixed absolute size that grows with the largest data prime over the special prime: a
# 50-bit first prime keeps it ~100 times below a 60-bit one's (measured per slot: 7.5e3 vs
# 7.7e5 in coefficient units). The label scale balances that noise against the masks'
# encoding error (the smaller mask value 2^-shift a larger label scale forces).
CKKS_LABEL_SCALE_BITS = 37
BFV_PLAIN_BITS = 30
_BUNDLE_MAGIC = b"CFHE1\n"
_PARTS = ("params", "public_key", "relin_keys", "galois_keys")
_SECRET_MAGIC = b"CFHESECRET2\n"
_SECRET_PARTS = (*_PARTS, "secret_key")


class HEError(ValueError):
    """Malformed, foreign or tampered homomorphic-encryption material."""


def _parameters(scheme: str) -> seal.EncryptionParameters:
    if scheme == "ckks":
        parms = seal.EncryptionParameters(seal.scheme_type.ckks)
        parms.set_poly_modulus_degree(POLY_MODULUS_DEGREE)
        parms.set_coeff_modulus(seal.CoeffModulus.Create(POLY_MODULUS_DEGREE,
                                                         list(CKKS_COEFF_BITS)))
    elif scheme == "bfv":
        parms = seal.EncryptionParameters(seal.scheme_type.bfv)
        parms.set_poly_modulus_degree(POLY_MODULUS_DEGREE)
        parms.set_coeff_modulus(seal.CoeffModulus.BFVDefault(POLY_MODULUS_DEGREE))
        parms.set_plain_modulus(seal.PlainModulus.Batching(POLY_MODULUS_DEGREE,
                                                           BFV_PLAIN_BITS))
    else:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    return parms


def _context(parms: seal.EncryptionParameters) -> seal.SEALContext:
    context = seal.SEALContext(parms, True, seal.sec_level_type.tc128)
    if not context.parameters_set():
        raise HEError("encryption parameters are not valid for 128-bit security: "
                      f"{context.parameter_error_message()}")
    return context


def _scheme_of(parms: seal.EncryptionParameters) -> str:
    if parms.scheme() == seal.scheme_type.ckks:
        return "ckks"
    if parms.scheme() == seal.scheme_type.bfv:
        return "bfv"
    raise HEError(f"unsupported homomorphic scheme {parms.scheme()}")


class _Base:
    """What both roles share: parameters, encoders, ciphertext (de)serialisation."""

    def __init__(self, parms: seal.EncryptionParameters):
        self.scheme = _scheme_of(parms)
        self._parms = parms
        self.context = _context(parms)
        if self.scheme == "ckks":
            self._encoder = seal.CKKSEncoder(self.context)
            self.scale = 2.0 ** CKKS_SCALE_BITS
            self.label_scale = 2.0 ** CKKS_LABEL_SCALE_BITS
        else:
            self._encoder = seal.BatchEncoder(self.context)
            self.scale = 1.0
            self.label_scale = 1.0
            self.plain_modulus = int(parms.plain_modulus().value())
        self.n_slots = int(self._encoder.slot_count())
        self.fingerprint_public = ""  # digest of the public bundle, set by each role

    def load_ciphertext(self, data: bytes) -> seal.Ciphertext:
        """Parse and validate one serialised ciphertext of this context.

        Raises :class:`HEError` for truncated, corrupted or foreign bytes (SEAL checks the
        header, the parameter id and that every coefficient lies below its modulus).
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise HEError(f"a ciphertext must be bytes, got {type(data).__name__}")
        data = bytes(data)
        ct = seal.Ciphertext()
        try:
            ct.load_bytes(self.context, data)
        except (RuntimeError, ValueError) as exc:
            raise HEError(f"invalid ciphertext for this context: {exc}") from None
        if ct.size() != 2:
            raise HEError(f"a ciphertext must have 2 polynomials, this one has {ct.size()}")
        if ct.save_size(seal.compr_mode_type.none) != len(data):
            raise HEError("ciphertext bytes are followed by trailing data")
        return ct

    def load_fresh_ciphertext(self, data: bytes) -> seal.Ciphertext:
        """:meth:`load_ciphertext`, also requiring a freshly encrypted label pack: first
        level, the scheme's NTT form, and (CKKS) the label scale. Anything else would make later
        evaluation fail or compute garbage."""
        ct = self.load_ciphertext(data)
        if ct.parms_id() != self.context.first_parms_id():
            raise HEError("ciphertext is not at the first level (not freshly encrypted)")
        if ct.is_ntt_form() != (self.scheme == "ckks"):
            raise HEError(f"ciphertext NTT flag is {ct.is_ntt_form()}, a fresh {self.scheme} "
                          "ciphertext has the other")
        if self.scheme == "ckks" and ct.scale() != self.label_scale:
            raise HEError(f"ciphertext scale {ct.scale()!r} is not the label scale "
                          f"{self.label_scale!r}")
        return ct

    @staticmethod
    def dump_ciphertext(ct: seal.Ciphertext) -> bytes:
        """Serialise one ciphertext (SEAL's own format, validated on load)."""
        return ct.to_string()

    def _encode(self, values: np.ndarray, scale: float | None = None) -> seal.Plaintext:
        if self.scheme == "ckks":
            scale = self.scale if scale is None else scale
            values = np.asarray(values)
            if np.iscomplexobj(values):
                return self._encoder.encode_complex(
                    np.ascontiguousarray(values, dtype=np.complex128), scale)
            return self._encoder.encode(np.ascontiguousarray(values, dtype=np.float64), scale)
        # Signed integers in (-t/2, t/2), as SEAL's batch encoder takes int64 input.
        return self._encoder.encode(np.ascontiguousarray(values, dtype=np.int64))


def galois_element(step: int) -> int:
    """SEAL's Galois element of a rotation by ``step`` slots (generator 3 mod 2N)."""
    return pow(3, step, 2 * POLY_MODULUS_DEGREE)


class SecretContext(_Base):
    """The data owner's keys: encrypts labels, decrypts what the server returns.

    Parameters
    ----------
    scheme : {"ckks", "bfv"}
        Approximate (CKKS) or exact integer (BFV) arithmetic.
    rotation_step : int or None, default=None
        Put Galois keys for rotations by ``+rotation_step`` and ``-rotation_step`` slots
        (CKKS vector / BFV row rotations) into the public bundle; None: no Galois keys.
    extra_rotations : sequence of int, default=()
        Further rotation steps (one direction each) to put keys for, e.g. the giant step of
        the CKKS row sums; only with ``rotation_step``.
    """

    def __init__(self, scheme: str = "ckks", rotation_step: int | None = None,
                 extra_rotations=()):
        super().__init__(_parameters(scheme))
        keygen = seal.KeyGenerator(self.context)
        self._secret_key = keygen.secret_key()
        self._public_key = keygen.create_public_key()
        self._relin_keys = keygen.create_relin_keys()
        self._galois_keys = b""
        if rotation_step is not None:
            steps = [rotation_step, -rotation_step, *(int(s) for s in extra_rotations)]
            row_slots = self.n_slots // (2 if self.scheme == "bfv" else 1)
            if not all(0 < abs(step) < row_slots for step in steps):
                raise ValueError(f"rotation steps {steps} out of range")
            keys = seal.GaloisKeys()
            keygen.create_galois_keys(sorted(set(steps)), keys)
            self._galois_keys = keys.to_string()
        self._use_keys()

    def _use_keys(self) -> None:
        self._encryptor = seal.Encryptor(self.context, self._public_key)
        self._encryptor.set_secret_key(self._secret_key)
        self._decryptor = seal.Decryptor(self.context, self._secret_key)
        self._public_bundle = _pack_bundle({
            "params": self._parms.to_bytes(), "public_key": self._public_key.to_string(),
            "relin_keys": self._relin_keys.to_string(), "galois_keys": self._galois_keys})
        self.fingerprint_public = _fingerprint(self._public_bundle)

    @staticmethod
    def slot_count(scheme: str) -> int:
        """Slots of a ciphertext of ``scheme`` (CKKS: complex slots, N/2; BFV: N)."""
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
        return POLY_MODULUS_DEGREE // 2 if scheme == "ckks" else POLY_MODULUS_DEGREE

    def secret_bytes(self) -> bytes:
        """Parameters and all keys, *including the secret key*: for the owner's 0600 files
        only (:meth:`from_secret_bytes` reads them back)."""
        return _pack_bundle({
            "params": self._parms.to_bytes(), "public_key": self._public_key.to_string(),
            "relin_keys": self._relin_keys.to_string(), "galois_keys": self._galois_keys,
            "secret_key": self._secret_key.to_string()}, _SECRET_PARTS, _SECRET_MAGIC)

    @classmethod
    def from_secret_bytes(cls, data: bytes) -> SecretContext:
        """The context :meth:`secret_bytes` saved (same keys, same public fingerprint)."""
        parts = _unpack_bundle(data, _SECRET_PARTS, _SECRET_MAGIC)
        parms = seal.EncryptionParameters(seal.scheme_type.none)
        try:
            parms.load_bytes(parts["params"])
            scheme = _scheme_of(parms)
            if parms.to_bytes() != _parameters(scheme).to_bytes():
                raise HEError(f"unexpected {scheme} parameters")
            self = cls.__new__(cls)
            _Base.__init__(self, parms)
            self._secret_key = self.context.from_secret_str(parts["secret_key"])
            self._public_key = self.context.from_public_str(parts["public_key"])
            self._relin_keys = self.context.from_relin_str(parts["relin_keys"])
            self._galois_keys = parts["galois_keys"]
            if self._galois_keys:
                self.context.from_galois_str(self._galois_keys)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise HEError(f"invalid secret context: {exc}") from None
        self._use_keys()
        return self

    def public_bytes(self) -> bytes:
        """The server's evaluation material: parameters, public key, relinearisation keys."""
        return self._public_bundle

    def encrypt_vector(self, values: np.ndarray) -> seal.Ciphertext:
        """Encrypt a vector of at most ``n_slots`` numbers (zero-padded), secret-key mode."""
        values = np.asarray(values)
        if values.ndim != 1 or values.shape[0] > self.n_slots:
            raise ValueError(f"expected a vector of at most {self.n_slots} values, "
                             f"got shape {values.shape}")
        padded = np.zeros(self.n_slots, dtype=np.float64 if self.scheme == "ckks" else np.int64)
        padded[: values.shape[0]] = values
        return self._encryptor.encrypt_symmetric(self._encode(padded))

    def encrypt_labels(self, y: np.ndarray, n_classes: int) -> list[bytes]:
        """One serialised ciphertext per label: its one-hot vector replicated over all slots.

        Slot ``s`` of label ``y_i``'s ciphertext holds ``1`` if ``s % n_classes == y_i``.
        """
        y = np.asarray(y, dtype=np.int64)
        if n_classes < 2 or n_classes > self.n_slots // 2:
            raise ValueError(f"n_classes must be in [2, {self.n_slots // 2}], got {n_classes}")
        if y.size and (y.min() < 0 or y.max() >= n_classes):
            raise ValueError("labels must be class indices in [0, n_classes)")
        slot_class = np.arange(self.n_slots) % n_classes
        plains = {c: self._encode((slot_class == c).astype(np.float64)) for c in np.unique(y)}
        return [self._encryptor.encrypt_symmetric(plains[c]).to_string() for c in y]

    def encrypt_packed_labels(self, y: np.ndarray, layout) -> list[bytes]:
        """Serialised ciphertexts holding ``layout.rows_per_pack`` labels each (the last
        one fewer): row ``b`` of a pack is its one-hot vector in lane ``b``
        (:meth:`~cipherforest.privacy._blocks.BlockLayout.pack_values`)."""
        y = np.asarray(y, dtype=np.int64)
        if y.size and (y.min() < 0 or y.max() >= layout.tau):
            raise ValueError("labels must be class indices in [0, n_classes)")
        if layout.scheme != self.scheme or layout.n_slots != self.n_slots:
            raise ValueError("the layout was made for another scheme or slot count")
        m = layout.rows_per_pack
        return [self._encryptor.encrypt_symmetric(
            self._encode(layout.pack_values(y[start: start + m]), self.label_scale)).to_string()
            for start in range(0, y.shape[0], m)]

    def decrypt(self, ct: seal.Ciphertext, complex_slots: bool = False) -> np.ndarray:
        """Decrypt and decode all slots (float64, or complex128 with ``complex_slots``, for
        CKKS; int64 in [0, t) for BFV)."""
        plain = self._decryptor.decrypt(ct)
        if self.scheme == "ckks":
            if complex_slots:
                return np.asarray(self._encoder.decode_complex(plain), dtype=np.complex128)
            return np.asarray(self._encoder.decode(plain), dtype=np.float64)
        return np.asarray(self._encoder.decode(plain), dtype=np.int64)

    def centered(self, slots: np.ndarray) -> np.ndarray:
        """BFV slots as signed integers in (-t/2, t/2]; CKKS slots unchanged."""
        if self.scheme == "ckks":
            return slots
        slots = slots.astype(np.int64)
        return np.where(slots > self.plain_modulus // 2, slots - self.plain_modulus, slots)


class PublicContext(_Base):
    """The server's side: evaluation with public material only; it cannot decrypt.

    Build it with :meth:`from_bytes` on what :meth:`SecretContext.public_bytes` produced.
    """

    def __init__(self, parms, relin_keys, galois_keys=None):
        super().__init__(parms)
        self._relin_keys = relin_keys
        self._galois_keys = galois_keys
        self._evaluator = seal.Evaluator(self.context)
        self._masks: dict[tuple, seal.Plaintext] = {}

    @classmethod
    def from_bytes(cls, data: bytes) -> PublicContext:
        """Load and validate a public bundle; anything but params + public + relin keys fails."""
        parts = _unpack_bundle(data)
        parms = seal.EncryptionParameters(seal.scheme_type.none)
        try:
            parms.load_bytes(parts["params"])
        except (RuntimeError, ValueError) as exc:
            raise HEError(f"invalid encryption parameters: {exc}") from None
        scheme = _scheme_of(parms)
        if parms.to_bytes() != _parameters(scheme).to_bytes():
            raise HEError(f"unexpected {scheme} parameters: only the library's 128-bit "
                          "parameter set is accepted")
        context = _context(parms)
        try:
            context.from_public_str(parts["public_key"])
            relin_keys = context.from_relin_str(parts["relin_keys"])
        except (RuntimeError, ValueError, TypeError) as exc:
            raise HEError(f"invalid public or relinearisation key: {exc}") from None
        galois_keys = None
        if parts["galois_keys"]:
            try:
                galois_keys = context.from_galois_str(parts["galois_keys"])
            except (RuntimeError, ValueError, TypeError) as exc:
                raise HEError(f"invalid Galois keys: {exc}") from None
        public = cls(parms, relin_keys, galois_keys)
        public.fingerprint_public = _fingerprint(bytes(data))
        return public

    def has_rotation(self, step: int, both_ways: bool = True) -> bool:
        """Whether the bundle brought Galois keys for rotations by ``±step`` (or, with
        ``both_ways=False``, by ``+step``)."""
        steps = (step, -step) if both_ways else (step,)
        return self._galois_keys is not None and all(
            self._galois_keys.has_key(galois_element(s)) for s in steps)

    # ------------------------------------------------------------------ evaluation
    def rotate(self, ct: seal.Ciphertext, step: int) -> seal.Ciphertext:
        """Slots moved ``step`` places to the left (cyclically; BFV: within each row)."""
        if self.scheme == "ckks":
            return self._evaluator.rotate_vector(ct, step, self._galois_keys)
        if not ct.is_ntt_form():
            return self._evaluator.rotate_rows(ct, step, self._galois_keys)
        out = self._evaluator.transform_from_ntt(ct)  # BFV rotates in coefficient form
        self._evaluator.rotate_rows_inplace(out, step, self._galois_keys)
        self._evaluator.transform_to_ntt_inplace(out)
        return out

    def clear_masks(self) -> None:
        """Forget the cached pre-encoded masks."""
        self._masks.clear()

    def prepare(self, ct: seal.Ciphertext) -> seal.Ciphertext:
        """Put a fresh ciphertext in the form masks multiply fastest (BFV: NTT form)."""
        if self.scheme == "bfv" and not ct.is_ntt_form():
            self._evaluator.transform_to_ntt_inplace(ct)
        return ct

    def add_inplace(self, acc: seal.Ciphertext, ct: seal.Ciphertext) -> None:
        self._evaluator.add_inplace(acc, ct)

    def copy(self, ct: seal.Ciphertext) -> seal.Ciphertext:
        return seal.Ciphertext(ct)

    def mask(self, key: tuple, make_values: Callable[[], np.ndarray],
             like: seal.Ciphertext | None = None):
        """Pre-encoded plaintext of the mask ``make_values()`` (cached under ``key``; the
        values are only built on a miss), ready to multiply.

        ``like``: the ciphertext it will multiply, when it is below the first level.
        """
        level = None if like is None else tuple(like.parms_id())
        plain = self._masks.get((key, level))
        if plain is None:
            plain = self.encode_mask(make_values(), like)
            self._masks[(key, level)] = plain
        return plain

    def encode_mask(self, values: np.ndarray, like: seal.Ciphertext | None = None,
                    scale: float | None = None):
        """Encode a mask of ``n_slots`` values for :meth:`multiply_mask` (not cached);
        ``scale``: CKKS encoding scale (default 2^40)."""
        plain = self._encode(values, scale)
        parms_id = self.context.first_parms_id() if like is None else like.parms_id()
        if self.scheme == "bfv":
            self._evaluator.transform_to_ntt_inplace(plain, parms_id)
        elif plain.parms_id() != parms_id:
            self._evaluator.mod_switch_to_inplace(plain, parms_id)
        return plain

    def multiply_mask(self, ct: seal.Ciphertext, plain: seal.Plaintext) -> seal.Ciphertext:
        """``ct ⊙ plain``; CKKS results are rescaled later, once per sum (:meth:`finish_sum`)."""
        return self._evaluator.multiply_plain(ct, plain)

    def finish_sum(self, ct: seal.Ciphertext) -> seal.Ciphertext:
        """After masked products were added up: rescale (CKKS) or leave NTT form (BFV)."""
        if self.scheme == "ckks":
            self._evaluator.rescale_to_next_inplace(ct)
        else:
            self._evaluator.transform_from_ntt_inplace(ct)
        return ct

    def square(self, ct: seal.Ciphertext) -> seal.Ciphertext:
        """Slot-wise square, relinearised, rescaled (CKKS), switched to the last level."""
        out = self._evaluator.square(ct)
        self._evaluator.relinearize_inplace(out, self._relin_keys)
        if self.scheme == "ckks":
            self._evaluator.rescale_to_next_inplace(out)
        self._to_last_level(out)
        return out

    def finish_leaf_store(self, ct: seal.Ciphertext) -> seal.Ciphertext:
        """A finished leaf-store sum: rescaled (CKKS, keeping one level for the row-sum
        masks of prediction) or out of NTT form and switched down (BFV)."""
        if self.scheme == "ckks":
            self._evaluator.rescale_to_next_inplace(ct)
            return ct
        return self.finish_plain(ct)

    def last_level(self, ct: seal.Ciphertext) -> seal.Ciphertext:
        """A copy of ``ct`` switched to the last level (the fewest bytes to send)."""
        out = seal.Ciphertext(ct)
        self._to_last_level(out)
        return out

    @staticmethod
    def scale_of(ct: seal.Ciphertext) -> float:
        """The CKKS scale ``ct`` carries."""
        return float(ct.scale())

    def has_level_left(self, ct: seal.Ciphertext) -> bool:
        """Whether ``ct`` sits above the last level (a mask multiplication can follow)."""
        return ct.parms_id() != self.context.last_parms_id()

    def finish_plain(self, ct: seal.Ciphertext) -> seal.Ciphertext:
        """A masked sum that is sent as is (no square): finished and switched down."""
        self.finish_sum(ct)
        self._to_last_level(ct)
        return ct

    def _to_last_level(self, ct: seal.Ciphertext) -> None:
        last = self.context.last_parms_id()
        if ct.parms_id() != last:
            self._evaluator.mod_switch_to_inplace(ct, last)


# ---------------------------------------------------------------------- bundle format
def _fingerprint(bundle: bytes) -> str:
    return hashlib.sha256(bundle).hexdigest()[:32]


def _pack_bundle(parts: dict[str, bytes], names: tuple[str, ...] = _PARTS,
                 magic: bytes = _BUNDLE_MAGIC) -> bytes:
    header = json.dumps({name: len(parts[name]) for name in names}).encode()
    return magic + struct.pack("<I", len(header)) + header + b"".join(
        parts[name] for name in names)


def _unpack_bundle(data: bytes, names: tuple[str, ...] = _PARTS,
                   magic: bytes = _BUNDLE_MAGIC) -> dict[str, bytes]:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise HEError(f"a public context must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if not data.startswith(magic) or len(data) < len(magic) + 4:
        raise HEError("not a cipherforest public context (bad magic)")
    offset = len(magic)
    (header_size,) = struct.unpack_from("<I", data, offset)
    offset += 4
    try:
        sizes = json.loads(data[offset: offset + header_size])
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise HEError("public context header is not valid JSON") from None
    if not isinstance(sizes, dict) or sorted(sizes) != sorted(names) or not all(
            isinstance(sizes[k], int) and sizes[k] >= 0 for k in names):
        raise HEError(f"a public context holds exactly the parts {names}")
    offset += header_size
    if offset + sum(sizes.values()) != len(data):
        raise HEError("public context is truncated or has trailing bytes")
    parts = {}
    for name in names:
        parts[name] = data[offset: offset + sizes[name]]
        offset += sizes[name]
    return parts
