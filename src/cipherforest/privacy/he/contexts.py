"""Homomorphic encryption of labels: the two roles over Microsoft SEAL (``seal-python``).

The encrypted forest needs few operations (docs/private_forest.md): encrypt packed one-hot
labels, add ciphertexts, rotate them by a lane, multiply by pre-encoded block masks, rescale
or switch down, decrypt, serialise and load untrusted bytes with validation.
What differs between CKKS and BFV is in :mod:`.schemes`; this module is scheme-free.

``benchmarks/he_backends.py`` measured seal-python against TenSEAL on these operations: equal
on encryption, addition, squaring and decryption (both wrap SEAL), 4.3× faster on mask
multiplication (TenSEAL's vectors re-encode the plain operand on every call) and 13–19×
faster at serialising. Hence seal-python.

Roles: :class:`SecretContext` (the data owner: key generation, encryption, decryption) and
:class:`PublicContext` (the server: evaluation only). The public context is serialised as a
tagged bundle (:mod:`.bundles`) of encryption parameters, public key, relinearisation keys
and (optionally) the Galois keys of the rotation steps the server needs to expand packed
labels (:mod:`.blocks`); it never contains the secret key, and loading one rejects anything
else.

seal-python 4.1 as installed exposes neither compressed serialisation (no zstd/zlib in
``compr_mode_type``) nor seeded symmetric ciphertexts (``encrypt_symmetric`` returns an
expanded ciphertext): upload bytes shrink by packing, not by serialisation.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import seal

from .bundles import (
    PUBLIC_PARTS,
    SECRET_MAGIC,
    SECRET_PARTS,
    fingerprint,
    pack_bundle,
    unpack_bundle,
)
from .schemes import SCHEMES, HEError, HEScheme, scheme_named, scheme_of

__all__ = ["HEError", "PublicContext", "SecretContext", "SCHEMES"]


def _context(parms: seal.EncryptionParameters) -> seal.SEALContext:
    context = seal.SEALContext(parms, True, seal.sec_level_type.tc128)
    if not context.parameters_set():
        raise HEError("encryption parameters are not valid for 128-bit security: "
                      f"{context.parameter_error_message()}")
    return context


def _library_parameters(data: bytes) -> tuple[HEScheme, seal.EncryptionParameters]:
    """The scheme and encryption parameters loaded from ``data``, accepted only if they are
    exactly the library's 128-bit set for their scheme."""
    parms = seal.EncryptionParameters(seal.scheme_type.none)
    try:
        parms.load_bytes(data)
    except (RuntimeError, ValueError) as exc:
        raise HEError(f"invalid encryption parameters: {exc}") from None
    kind = scheme_of(parms)
    if parms.to_bytes() != kind.parameters().to_bytes():
        raise HEError(f"unexpected {kind.name} parameters: only the library's 128-bit "
                      "parameter set is accepted")
    return kind, parms


class _Base:
    """What both roles share: parameters, encoders, ciphertext (de)serialisation."""

    def __init__(self, kind: HEScheme, parms: seal.EncryptionParameters):
        self.kind = kind
        self.scheme = self.kind.name
        self._parms = parms
        self.context = _context(parms)
        self._encoder = self.kind.encoder(self.context)
        self.scale = self.kind.scale
        self.label_scale = self.kind.label_scale
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
        self.kind.check_fresh(ct)
        return ct

    @staticmethod
    def dump_ciphertext(ct: seal.Ciphertext) -> bytes:
        """Serialise one ciphertext (SEAL's own format, validated on load)."""
        return ct.to_string()

    def _encode(self, values: np.ndarray, scale: float | None = None) -> seal.Plaintext:
        return self.kind.encode(self._encoder, values, scale)


class SecretContext(_Base):
    """The data owner's keys: encrypts labels, decrypts what the server returns.

    Parameters
    ----------
    scheme : {"ckks", "bfv"} or HEScheme
        Approximate (CKKS) or exact integer (BFV) arithmetic. An :class:`HEScheme`
        instance with other parameters than the library's can encrypt and evaluate
        (:meth:`public_context`) but its public bundle is refused by
        :meth:`PublicContext.from_bytes`: it serves benchmarks' comparisons.
    rotation_step : int or None, default=None
        Put Galois keys for rotations by ``+rotation_step`` and ``-rotation_step`` slots
        (CKKS vector / BFV row rotations) into the public bundle; None: no Galois keys.
    extra_rotations : sequence of int, default=()
        Further rotation steps (one direction each) to put keys for, e.g. the giant step of
        the CKKS row sums; only with ``rotation_step``.
    """

    def __init__(self, scheme: str | HEScheme = "ckks", rotation_step: int | None = None,
                 extra_rotations=()):
        kind = scheme if isinstance(scheme, HEScheme) else scheme_named(scheme)
        super().__init__(kind, kind.parameters())
        keygen = seal.KeyGenerator(self.context)
        self._secret_key = keygen.secret_key()
        self._public_key = keygen.create_public_key()
        self._relin_keys = keygen.create_relin_keys()
        self._galois_keys = b""
        if rotation_step is not None:
            steps = [rotation_step, -rotation_step, *(int(s) for s in extra_rotations)]
            if not all(0 < abs(step) < self.kind.row_slots for step in steps):
                raise ValueError(f"rotation steps {steps} out of range")
            keys = seal.GaloisKeys()
            keygen.create_galois_keys(sorted(set(steps)), keys)
            self._galois_keys = keys.to_string()
        self._use_keys()

    def _use_keys(self) -> None:
        self._encryptor = seal.Encryptor(self.context, self._public_key)
        self._encryptor.set_secret_key(self._secret_key)
        self._decryptor = seal.Decryptor(self.context, self._secret_key)
        self._public_bundle = pack_bundle({
            "params": self._parms.to_bytes(), "public_key": self._public_key.to_string(),
            "relin_keys": self._relin_keys.to_string(), "galois_keys": self._galois_keys})
        self.fingerprint_public = fingerprint(self._public_bundle)

    @staticmethod
    def slot_count(scheme: str) -> int:
        """Slots of a ciphertext of ``scheme`` (CKKS: complex slots, N/2; BFV: N)."""
        return scheme_named(scheme).n_slots

    def secret_bytes(self) -> bytes:
        """Parameters and all keys, *including the secret key*: for the owner's 0600 files
        only (:meth:`from_secret_bytes` reads them back)."""
        return pack_bundle({
            "params": self._parms.to_bytes(), "public_key": self._public_key.to_string(),
            "relin_keys": self._relin_keys.to_string(), "galois_keys": self._galois_keys,
            "secret_key": self._secret_key.to_string()}, SECRET_PARTS, SECRET_MAGIC)

    @classmethod
    def from_secret_bytes(cls, data: bytes) -> SecretContext:
        """The context :meth:`secret_bytes` saved (same keys, same public fingerprint)."""
        parts = unpack_bundle(data, SECRET_PARTS, SECRET_MAGIC)
        kind, parms = _library_parameters(parts["params"])
        try:
            self = cls.__new__(cls)
            _Base.__init__(self, kind, parms)
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

    def public_context(self) -> PublicContext:
        """The evaluation-only context of these keys, built without a bundle round trip
        (for any scheme instance, also one :meth:`PublicContext.from_bytes` refuses)."""
        galois = (self.context.from_galois_str(self._galois_keys) if self._galois_keys
                  else None)
        public = PublicContext(self.kind, self._parms, self._relin_keys, galois)
        public.fingerprint_public = self.fingerprint_public
        return public

    def encrypt_vector(self, values: np.ndarray) -> seal.Ciphertext:
        """Encrypt a vector of at most ``n_slots`` numbers (zero-padded), secret-key mode."""
        values = np.asarray(values)
        if values.ndim != 1 or values.shape[0] > self.n_slots:
            raise ValueError(f"expected a vector of at most {self.n_slots} values, "
                             f"got shape {values.shape}")
        padded = np.zeros(self.n_slots, dtype=self.kind.slot_dtype)
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
        (:meth:`~cipherforest.privacy.he.blocks.BlockLayout.pack_values`)."""
        y = np.asarray(y, dtype=np.int64)
        if y.size and (y.min() < 0 or y.max() >= layout.tau):
            raise ValueError("labels must be class indices in [0, n_classes)")
        return self.encrypt_packed_rows(np.eye(layout.tau)[y], layout)

    def encrypt_packed_rows(self, rows: np.ndarray, layout) -> list[bytes]:
        """As :meth:`encrypt_packed_labels` for any ``(n, τ)`` row vectors (a regression
        target's statistics in CKKS): row ``b`` of a pack in lane ``b``
        (:meth:`~cipherforest.privacy.he.blocks.BlockLayout.pack_rows`)."""
        if layout.scheme != self.scheme or layout.n_slots != self.n_slots:
            raise ValueError("the layout was made for another scheme or slot count")
        m = layout.rows_per_pack
        return [self._encryptor.encrypt_symmetric(
            self._encode(layout.pack_rows(rows[start: start + m]), self.label_scale)
        ).to_string() for start in range(0, rows.shape[0], m)]

    def decrypt(self, ct: seal.Ciphertext, complex_slots: bool = False) -> np.ndarray:
        """Decrypt and decode all slots (float64, or complex128 with ``complex_slots``, for
        CKKS; int64 in [0, t) for BFV)."""
        return self.kind.decode(self._encoder, self._decryptor.decrypt(ct), complex_slots)

    def noise_budget(self, ct: seal.Ciphertext) -> int | None:
        """BFV: bits of noise budget ``ct`` has left (0: it no longer decrypts correctly);
        None for CKKS, whose noise is an error in the values instead."""
        if self.kind.approximate:
            return None
        if ct.is_ntt_form():
            ct = seal.Evaluator(self.context).transform_from_ntt(ct)
        return int(self._decryptor.invariant_noise_budget(ct))

    def centered(self, slots: np.ndarray) -> np.ndarray:
        """BFV slots as signed integers in (-t/2, t/2]; CKKS slots unchanged."""
        return self.kind.centered(slots, self.plain_modulus)


class PublicContext(_Base):
    """The server's side: evaluation with public material only; it cannot decrypt.

    Build it with :meth:`from_bytes` on what :meth:`SecretContext.public_bytes` produced.
    """

    def __init__(self, kind: HEScheme, parms, relin_keys, galois_keys=None):
        super().__init__(kind, parms)
        self._relin_keys = relin_keys
        self._galois_keys = galois_keys
        self._evaluator = seal.Evaluator(self.context)
        self._masks: dict[tuple, seal.Plaintext] = {}

    @classmethod
    def from_bytes(cls, data: bytes) -> PublicContext:
        """Load and validate a public bundle; anything but params + public + relin keys fails."""
        parts = unpack_bundle(data, PUBLIC_PARTS)
        kind, parms = _library_parameters(parts["params"])
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
        public = cls(kind, parms, relin_keys, galois_keys)
        public.fingerprint_public = fingerprint(bytes(data))
        return public

    def has_rotation(self, step: int, both_ways: bool = True) -> bool:
        """Whether the bundle brought Galois keys for rotations by ``±step`` (or, with
        ``both_ways=False``, by ``+step``)."""
        steps = (step, -step) if both_ways else (step,)
        return self._galois_keys is not None and all(
            self._galois_keys.has_key(self.kind.galois_element(s)) for s in steps)

    # ------------------------------------------------------------------ evaluation
    def rotate(self, ct: seal.Ciphertext, step: int) -> seal.Ciphertext:
        """Slots moved ``step`` places to the left (cyclically; BFV: within each row)."""
        return self.kind.rotate(self._evaluator, ct, step, self._galois_keys)

    def clear_masks(self) -> None:
        """Forget the cached pre-encoded masks."""
        self._masks.clear()

    def prepare(self, ct: seal.Ciphertext) -> seal.Ciphertext:
        """Put a fresh ciphertext in the form masks multiply fastest (BFV: NTT form)."""
        return self.kind.prepare(self._evaluator, ct)

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
        self.kind.place_mask(self._evaluator, plain, parms_id)
        return plain

    def multiply_mask(self, ct: seal.Ciphertext, plain: seal.Plaintext) -> seal.Ciphertext:
        """``ct ⊙ plain``; CKKS results are rescaled later, once per sum (:meth:`finish_sum`)."""
        return self._evaluator.multiply_plain(ct, plain)

    def finish_sum(self, ct: seal.Ciphertext) -> seal.Ciphertext:
        """After masked products were added up: rescale (CKKS) or leave NTT form (BFV)."""
        self.kind.finish_sum(self._evaluator, ct)
        return ct

    def finish_leaf_store(self, ct: seal.Ciphertext) -> seal.Ciphertext:
        """A finished leaf-store sum: rescaled (CKKS, keeping one level for the row-sum
        masks of prediction) or out of NTT form and switched down (BFV)."""
        self.kind.finish_sum(self._evaluator, ct)
        if not self.kind.leaf_store_keeps_level:
            self._to_last_level(ct)
        return ct

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
