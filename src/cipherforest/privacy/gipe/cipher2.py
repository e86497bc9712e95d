"""cipher2: the authenticated encryption of a row's positions (the paper's CKKS ciphertext).

In the paper cipher2 is a CKKS encryption of a sample's position in its node's list; here it is
one authenticated token per row, bound to the row's cipher1. The payload of a row holds, per
feature, an int64 word (the position of a stored sample equal to the value, or the value's
float64 bits when no stored sample equals it) and one bit per feature telling which
(:func:`pack_payload` / :func:`unpack_payload`).

Why a construction of our own: the standard library has hashes and HMAC but no authenticated
cipher (no AES, no ChaCha20), and none of the project's dependencies (numpy, numba,
scikit-learn, scipy, seal-python) offers one; ``cryptography`` (AES-GCM) would be the vetted
choice but is not a dependency. :class:`Cipher2` is therefore the textbook encrypt-then-MAC of
a PRF stream, described in its docstring. Its token layout is part of the compatibility
contract: tokens made by earlier versions decrypt as long as ``Cipher2.VERSION`` is 1 and the
key derivations below are unchanged.
"""

from __future__ import annotations

import hashlib
import hmac
import os

import numpy as np

__all__ = ["Cipher2", "GipeDecryptionError", "pack_payload", "payload_size", "unpack_payload"]


class GipeDecryptionError(ValueError):
    """A ciphertext does not decrypt under this state (tampered, foreign key, or stale)."""


class Cipher2:
    """Authenticated encryption of a row's cipher2 payload (encrypt-then-MAC).

    Token layout (bytes)::

        version (1) | nonce (16) | payload XOR keystream (len(payload)) | tag (16)

    keystream = SHAKE-256(k_enc ‖ nonce), the keyed-sponge PRF that NIST standardised as KMAC;
    tag = HMAC-SHA256(k_mac, context ‖ key id ‖ cipher1 row ‖ version ‖ nonce ‖ ciphertext)
    truncated to 128 bits. ``k_enc``, ``k_mac`` and the key id are HMAC-SHA256 derivations of a
    256-bit master key drawn with :mod:`secrets`; nonces come from ``os.urandom``. Under the
    PRF assumption for SHAKE-256 and HMAC-SHA256 this is IND-CCA secure, and binding the
    cipher1 row (little-endian int64 bytes) into the tag makes a token useless with any other
    row. It is a textbook construction from the standard library, not a vetted AEAD: with
    ``cryptography`` available, AES-GCM would be the better choice (see the module docstring).

    Parameters
    ----------
    key : bytes
        The 256-bit master key (the encryptor's secret, saved in its state file).
    """

    VERSION = 1
    NONCE = 16
    TAG = 16
    CONTEXT = b"cipherforest/gipe/cipher2"

    def __init__(self, key: bytes):
        self.enc_key = hmac.digest(key, b"cipherforest/gipe/cipher2/enc", "sha256")
        self.mac_key = hmac.digest(key, b"cipherforest/gipe/cipher2/mac", "sha256")
        self.key_id = hmac.digest(key, b"cipherforest/gipe/key-id", "sha256")[:8]

    def token_size(self, payload_size: int) -> int:
        """Bytes of a token carrying ``payload_size`` bytes."""
        return 1 + self.NONCE + payload_size + self.TAG

    def _tag(self, cipher1_row: bytes, head: bytes, body: bytes) -> bytes:
        message = b"".join((self.CONTEXT, self.key_id, cipher1_row, head, body))
        return hmac.digest(self.mac_key, message, "sha256")[:self.TAG]

    def seal(self, cipher1: np.ndarray, payload: np.ndarray) -> np.ndarray:
        """Tokens ``(n, token_size)`` uint8 for payload rows ``(n, P)`` bound to cipher1 rows.

        ``cipher1`` is the int64 cipher matrix of the same ``n`` rows.
        """
        cipher1 = _little_endian(cipher1)
        n, size = payload.shape
        tokens = np.empty((n, self.token_size(size)), dtype=np.uint8)
        nonces = np.frombuffer(os.urandom(self.NONCE * n), dtype=np.uint8).reshape(n, -1)
        tokens[:, 0] = self.VERSION
        tokens[:, 1:1 + self.NONCE] = nonces
        body = tokens[:, 1 + self.NONCE:1 + self.NONCE + size]
        for i in range(n):
            nonce = nonces[i].tobytes()
            stream = hashlib.shake_256(self.enc_key + nonce).digest(size)
            body[i] = payload[i] ^ np.frombuffer(stream, dtype=np.uint8)
            tokens[i, -self.TAG:] = np.frombuffer(
                self._tag(cipher1[i].tobytes(), tokens[i, :1 + self.NONCE].tobytes(),
                          body[i].tobytes()), dtype=np.uint8)
        return tokens

    def open(self, cipher1: np.ndarray, tokens: np.ndarray, size: int) -> np.ndarray:
        """Payload rows of authentic tokens; GipeDecryptionError naming the first bad row."""
        cipher1 = _little_endian(cipher1)
        n = tokens.shape[0]
        if tokens.ndim != 2 or tokens.shape[1] != self.token_size(size):
            raise GipeDecryptionError(
                f"cipher2 must have shape (n_samples, {self.token_size(size)}) for "
                f"{cipher1.shape[1]} features, got {tokens.shape}")
        payload = np.empty((n, size), dtype=np.uint8)
        for i in range(n):
            token = tokens[i]
            head = token[:1 + self.NONCE].tobytes()
            body = token[1 + self.NONCE:-self.TAG].tobytes()
            if token[0] != self.VERSION or not hmac.compare_digest(
                    self._tag(cipher1[i].tobytes(), head, body), token[-self.TAG:].tobytes()):
                raise GipeDecryptionError(
                    f"cipher2 of row {i} does not authenticate: it was made by another key, "
                    "was altered, or does not belong to this cipher1 row")
            stream = hashlib.shake_256(self.enc_key + head[1:]).digest(size)
            payload[i] = np.frombuffer(body, dtype=np.uint8) ^ np.frombuffer(stream, np.uint8)
        return payload


def _little_endian(cipher1: np.ndarray) -> np.ndarray:
    """cipher1 as contiguous little-endian int64: the bytes the tag binds."""
    return np.ascontiguousarray(cipher1.astype("<i8"))


def payload_size(n_features: int) -> int:
    """Bytes of a row's payload: an int64 word per feature, then one bit per feature."""
    return 8 * n_features + (n_features + 7) // 8


def pack_payload(words: np.ndarray, inline: np.ndarray) -> np.ndarray:
    """Payload rows ``(n, payload_size(d))`` uint8 of int64 ``words`` and bool ``inline`` (n, d).

    ``inline[i, j]`` is True when ``words[i, j]`` holds the value's float64 bits rather than
    a position.
    """
    return np.concatenate([np.ascontiguousarray(words.astype("<i8")).view(np.uint8),
                           np.packbits(inline, axis=1)], axis=1)


def unpack_payload(payload: np.ndarray, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """``(words, inline)`` of payload rows: the inverse of :func:`pack_payload`."""
    words = np.ascontiguousarray(payload[:, :8 * n_features]).view("<i8").astype(np.int64)
    inline = np.unpackbits(payload[:, 8 * n_features:], axis=1,
                           count=n_features).astype(bool)
    return words, inline
