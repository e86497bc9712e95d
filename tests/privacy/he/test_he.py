"""Homomorphic label encryption (``cipherforest.privacy.he``) over seal-python, CKKS and BFV.

Proves: for both schemes, labels encrypted by a :class:`SecretContext` and loaded on a
:class:`PublicContext` rebuilt from ``public_bytes()`` add up, take block masks and finish
into exactly the expected class counts (CKKS within 1e-6, BFV exactly), also on random label
vectors (hypothesis); BFV counts stay exact up to its largest count (the plain modulus less
one), through the server's lane rotations; the public bundle carries no secret-key
bytes and a public context cannot decrypt; loading a public bundle rejects garbage, truncation,
trailing bytes, a secret key in place of any part and any parameter set but the library's;
loading a ciphertext rejects truncation, coefficients beyond their modulus, non-bytes, a
3-polynomial ciphertext and ciphertexts of the other scheme or another parameter set; a
ciphertext decrypted under another client's key does not give its plaintext.
"""

from __future__ import annotations

import numpy as np
import pytest
import seal
from hypothesis import given, settings
from hypothesis import strategies as st

from cipherforest.privacy.he import (
    BlockLayout,
    HEError,
    PublicContext,
    SecretContext,
    bundles,
    scheme_named,
)

SCHEMES = ("ckks", "bfv")
SEAL_HEADER = 16
WORD = 8


@pytest.fixture(scope="module")
def contexts():
    """One secret context per scheme and its server-side public context (keygen once)."""
    out = {}
    for scheme in SCHEMES:
        secret = SecretContext(scheme)
        out[scheme] = (secret, PublicContext.from_bytes(secret.public_bytes()))
    return out


@pytest.fixture(scope="module")
def other_contexts():
    """A second client per scheme: same parameters, different keys."""
    return {scheme: SecretContext(scheme) for scheme in SCHEMES}


@pytest.fixture(scope="module")
def foreign_ckks():
    """Keys of a valid 128-bit CKKS parameter set that is not the library's (60+40+60 bits)."""
    parms = seal.EncryptionParameters(seal.scheme_type.ckks)
    parms.set_poly_modulus_degree(8192)
    parms.set_coeff_modulus(seal.CoeffModulus.Create(8192, [60, 40, 60]))
    context = seal.SEALContext(parms, True, seal.sec_level_type.tc128)
    assert context.parameters_set()
    keygen = seal.KeyGenerator(context)
    public_key = keygen.create_public_key()
    encoder = seal.CKKSEncoder(context)
    encryptor = seal.Encryptor(context, public_key)
    ct = encryptor.encrypt(encoder.encode(np.ones(encoder.slot_count()), 2.0 ** 40))
    return {"parms": parms, "public_key": public_key.to_string(),
            "relin_keys": keygen.create_relin_keys().to_string(), "ciphertext": ct.to_string()}


# ---------------------------------------------------------------------- helpers
def _to_client(secret: SecretContext, public: PublicContext, ct) -> np.ndarray:
    """What the client sees: serialise on the server, load and decrypt with the secret key."""
    blob = public.dump_ciphertext(ct)
    return secret.centered(secret.decrypt(secret.load_ciphertext(blob)))


def _assert_slots(scheme: str, got: np.ndarray, expected: np.ndarray,
                  integer: bool = True) -> None:
    """CKKS within 1e-6 (relative, and absolute for zeros); BFV exactly (and as int64)."""
    assert got.shape == expected.shape
    if scheme == "ckks":
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    else:
        if integer:
            assert got.dtype == np.int64
        np.testing.assert_array_equal(got, expected)


def _load_labels(secret, public, y, n_classes, prepare=True):
    blobs = secret.encrypt_labels(np.asarray(y), n_classes)
    assert len(blobs) == len(y) and all(isinstance(b, bytes) for b in blobs)
    cts = [public.load_ciphertext(b) for b in blobs]
    return [public.prepare(ct) for ct in cts] if prepare else cts


def _sum(public, cts, start, stop):
    """Sum of ``cts[start:stop]``; None for an empty range (SEAL has no encrypted zero)."""
    acc = None
    for ct in cts[start:stop]:
        if acc is None:
            acc = public.copy(ct)
        else:
            public.add_inplace(acc, ct)
    return acc


def _packed_counts(secret, public, y, n_classes, split):
    """Masked sums for one node and one candidate, decrypted by the client.

    Block 0 holds the node's total ``(T | 0)``; block 1 the candidate ``(L | T - L)`` with
    ``L`` the counts of rows ``[0, split)``. Returns (decrypted slots, expected slots).
    """
    tau, block, n = n_classes, 2 * n_classes, public.n_slots
    cts = _load_labels(secret, public, y, n_classes)
    left = _sum(public, cts, 0, split)
    total = _sum(public, cts, 0, len(y))
    lr_mask = np.zeros(n)
    lr_mask[block: block + tau] = 1
    lr_mask[block + tau: 2 * block] = -1
    total_mask = np.zeros(n)
    total_mask[:tau] = 1
    total_mask[block + tau: 2 * block] = 1
    acc = public.multiply_mask(total, public.encode_mask(total_mask))
    if left is not None:  # split == 0: L = 0, the block is (0 | T)
        public.add_inplace(acc, public.multiply_mask(left, public.mask(("test-lr", tau),
                                                                       lambda: lr_mask)))
    finished = public.finish_plain(acc)
    assert finished.parms_id() == public.context.last_parms_id()

    y = np.asarray(y)
    t_counts = np.bincount(y, minlength=tau)
    l_counts = np.bincount(y[:split], minlength=tau)
    expected = np.zeros(n, dtype=np.float64 if secret.scheme == "ckks" else np.int64)
    expected[:tau] = t_counts
    expected[block: block + tau] = l_counts
    expected[block + tau: 2 * block] = t_counts - l_counts
    return _to_client(secret, public, finished), expected


# ---------------------------------------------------------------------- correctness
@pytest.mark.parametrize("scheme", SCHEMES)
def test_public_context_matches_secret_context(contexts, scheme):
    secret, public = contexts[scheme]
    assert public.scheme == secret.scheme == scheme
    n_slots = 4096 if scheme == "ckks" else 8192  # N = 8192: complex / integer slots
    assert public.n_slots == secret.n_slots == n_slots
    assert public.fingerprint_public == secret.fingerprint_public
    assert len(public.fingerprint_public) == 32


@pytest.mark.parametrize("scheme", SCHEMES)
def test_fresh_keys_per_context(contexts, other_contexts, scheme):
    secret, other = contexts[scheme][0], other_contexts[scheme]
    assert secret._secret_key.to_string() != other._secret_key.to_string()
    assert secret.public_bytes() != other.public_bytes()
    assert secret.fingerprint_public != other.fingerprint_public


@pytest.mark.parametrize("scheme", SCHEMES)
def test_label_ciphertexts_decrypt_to_replicated_one_hot(contexts, scheme):
    secret, _ = contexts[scheme]
    y = np.array([2, 0, 1, 2])
    slot_class = np.arange(secret.n_slots) % 3
    for label, blob in zip(y, secret.encrypt_labels(y, 3), strict=True):
        got = secret.centered(secret.decrypt(secret.load_ciphertext(blob)))
        _assert_slots(scheme, got, (slot_class == label).astype(got.dtype))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_sum_of_labels_gives_class_counts(contexts, scheme):
    secret, public = contexts[scheme]
    y = np.array([0, 1, 1, 2, 1, 0, 1])
    cts = _load_labels(secret, public, y, 3, prepare=False)
    total = public.copy(cts[0])
    for ct in cts[1:]:
        public.add_inplace(total, ct)
    got = secret.centered(secret.decrypt(total))
    counts = np.bincount(y, minlength=3)
    _assert_slots(scheme, got, counts[np.arange(secret.n_slots) % 3].astype(got.dtype))
    # The copy is independent of the ciphertext it was made from.
    _assert_slots(scheme, secret.centered(secret.decrypt(cts[0])),
                  (np.arange(secret.n_slots) % 3 == 0).astype(got.dtype))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_masked_sums_give_exact_counts(contexts, scheme):
    secret, public = contexts[scheme]
    y = [0, 1, 1, 0, 1, 1, 1, 0, 1, 0, 0]
    got, expected = _packed_counts(secret, public, y, 2, split=4)
    # T = (5, 6), L = (2, 2), R = (3, 4): blocks (T | 0) and (L | R), zeros elsewhere.
    assert expected[:8].tolist() == [5, 6, 0, 0, 2, 2, 3, 4]
    assert not expected[8:].any()
    _assert_slots(scheme, got, expected)


def test_ckks_masks_with_scaled_values(contexts):
    """CKKS shrinks heavy nodes with 2^-shift masks: the counts are scaled by 2^-shift."""
    scheme = "ckks"
    secret, public = contexts[scheme]
    y = np.array([0] * 30 + [1] * 50)
    cts = _load_labels(secret, public, y, 2)
    total = _sum(public, cts, 0, len(y))
    mask = np.zeros(public.n_slots)
    mask[:2] = 2.0 ** -3
    finished = public.finish_plain(public.multiply_mask(total, public.encode_mask(mask)))
    got = _to_client(secret, public, finished)
    expected = np.zeros(public.n_slots)
    expected[:2] = np.array([30.0, 50.0]) / 8
    _assert_slots(scheme, got, expected)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_leaf_counts_for_prediction(contexts, scheme):
    """A leaf mask + finish_leaf_store: the leaf counts land in one block. CKKS keeps one
    level for the prediction masks (a cached block mask + finish_plain); BFV is finished on
    the last level."""
    secret, public = contexts[scheme]
    y = np.array([1, 2, 2, 0, 2])
    total = _sum(public, _load_labels(secret, public, y, 3), 0, len(y))
    mask = np.zeros(public.n_slots)
    mask[6:9] = 1
    leaf = public.finish_leaf_store(public.multiply_mask(total, public.encode_mask(mask)))
    assert public.has_level_left(leaf) == (scheme == "ckks")
    if scheme == "ckks":
        plain = public.mask(("test-row", 3, 2), lambda: mask, like=leaf)
        assert public.mask(("test-row", 3, 2), lambda: mask, like=leaf) is plain  # per level
        leaf = public.finish_plain(public.multiply_mask(leaf, plain))
    assert leaf.parms_id() == public.context.last_parms_id()
    expected = np.zeros(public.n_slots, dtype=np.float64 if scheme == "ckks" else np.int64)
    expected[6:9] = [1, 1, 3]
    _assert_slots(scheme, _to_client(secret, public, leaf), expected)


_ROTATING = {}


def _rotating_contexts(scheme, stride):
    """Secret and public contexts with Galois keys for ``±stride`` (keygen once per stride)."""
    if (scheme, stride) not in _ROTATING:
        secret = SecretContext(scheme, rotation_step=stride)
        _ROTATING[scheme, stride] = (secret, PublicContext.from_bytes(secret.public_bytes()))
    return _ROTATING[scheme, stride]


def _layout_counts(scheme, y, n_classes, splits, shift=0, pack_rows=None, weights=None):
    """Query blocks made as the server makes them (``he.blocks``): labels uploaded in packs,
    the server's lane rotations of each pack, block ``b`` filled through its lane's part
    mask (lane ``b // 2``, part ``b % 2``) by a running sum of the first ``splits[b]`` rows
    bound to that lane (sums of lanes 1, 3, ... moved there from the previous lane by a
    rotation, as when a feature's blocks change lanes).

    Returns the client's per-class counts of each block (scaled back by ``2^shift``) and
    the exact values. ``weights``: how often each row is added (as the
    server adds a bootstrap-drawn row), splits count rows.
    """
    from cipherforest.privacy.protocol.server.labels import lane_rotations

    y = np.asarray(y)
    weights = np.ones(len(y), dtype=int) if weights is None else np.asarray(weights)
    layout = BlockLayout(scheme, SecretContext.slot_count(scheme), n_classes, len(y), pack_rows)
    assert len(splits) <= layout.blocks_per_ciphertext
    secret, public = _rotating_contexts(scheme, layout.stride)
    packs = [lane_rotations(public, layout, public.load_fresh_ciphertext(blob))
             for blob in secret.encrypt_packed_labels(y, layout)]

    def lane_sum(stop, lane):
        acc = None
        for row in range(stop):
            pack, b = divmod(row, layout.rows_per_pack)
            part, d = layout.copy_index(b, layout.lane_position(lane))
            assert part == 0  # packs this small hold every rotation
            ct = packs[pack][d]
            for _ in range(weights[row]):
                acc = public.copy(ct) if acc is None else (public.add_inplace(acc, ct) or acc)
        return acc

    value = 2.0 ** -shift if scheme == "ckks" else 1
    acc = None
    for block, split in enumerate(splits):
        lane, part = divmod(block, 2)
        same_row = lane % layout.lanes_per_row > 0
        if lane % 2 and same_row and split > 0:
            running = public.rotate(lane_sum(split, lane - 1), -layout.stride)
        else:
            running = lane_sum(split, lane)
        if running is None:  # an empty block
            continue
        product = public.multiply_mask(
            running, public.encode_mask(layout.block_mask(lane, part, value)))
        acc = product if acc is None else (public.add_inplace(acc, product) or acc)
    expected = [np.bincount(y[:split], weights[:split], minlength=n_classes)
                for split in splits]
    if acc is None:  # every block empty
        return np.zeros((len(splits), n_classes)), np.array(expected, dtype=np.float64)
    blob = public.dump_ciphertext(public.finish_plain(acc))
    slots = secret.decrypt(secret.load_ciphertext(blob), complex_slots=True)
    if scheme == "ckks":
        assert slots.dtype == np.complex128
    got = layout.block_values(slots)[: len(splits)] * 2.0 ** shift
    return got, np.array(expected, dtype=np.float64)


def _assert_class_counts(scheme, got, expected):
    if scheme == "bfv":
        np.testing.assert_array_equal(got, expected)
    else:
        # What the client needs: rounding recovers every count (its tolerance).
        np.testing.assert_allclose(got, expected, rtol=0, atol=0.25)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_server_block_layout_gives_class_counts(scheme):
    y = [0, 2, 1, 1, 0, 2, 2, 2, 1, 0]
    got, expected = _layout_counts(scheme, y, 3, splits=[1, 4, 9, 10, 0, 6])
    # Block 1 (lane 0, second part): L = (1, 2, 1); block 3: the total T = (3, 3, 4).
    assert expected[1].tolist() == [1, 2, 1] and expected[3].tolist() == [3, 3, 4]
    assert expected[4].tolist() == [0, 0, 0]
    _assert_class_counts(scheme, got, expected)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_lanes_across_packs_and_slot_matrix_rows(scheme):
    """Rows spread over several packs (3 rows each) reach every lane; BFV lanes of both
    slot-matrix rows (lanes 3..5, blocks 6..11, are in the second) give the same sums."""
    y = [0, 1, 1, 0, 1, 1, 1, 0]
    splits = [2, 3, 5, 7, 8, 1, 4, 6, 8, 3, 5, 7][: 6 if scheme == "ckks" else 12]
    got, expected = _layout_counts(scheme, y, 2, splits=splits, pack_rows=3)
    _assert_class_counts(scheme, got, expected)


def test_bfv_counts_exact_at_the_largest_count():
    """BFV's noise budget holds the worst case the server can make: every block of a query
    ciphertext at the largest count (the plain modulus less one), each a lane rotation added
    to itself that often (noise grows linearly, more than sums of different rows), masked
    and summed. Exact after the switch to the last prime."""
    from cipherforest.privacy.protocol.server.labels import lane_rotations

    layout = BlockLayout("bfv", SecretContext.slot_count("bfv"), 2, 10_000)
    secret, public = _rotating_contexts("bfv", layout.stride)
    most = public.kind.max_count
    assert most == public.plain_modulus - 1 and most >= 75_000  # a 100,000-row data set
    y = np.zeros(layout.rows_per_pack, dtype=np.int64)
    y[1] = 1
    rotations = lane_rotations(public, layout, public.load_fresh_ciphertext(
        secret.encrypt_packed_labels(y, layout)[0]))
    acc = public.copy(rotations[1])  # row 1 (class 1) brought to lane 0
    for bit in reversed(range(most.bit_length() - 1)):
        public.add_inplace(acc, acc)
        if most >> bit & 1:
            public.add_inplace(acc, rotations[1])
    query, running = None, acc
    for lane in range(layout.per_ciphertext):  # moved along lane by lane, as the server does
        running = public.rotate(running, -layout.stride) if lane % layout.lanes_per_row \
            else acc
        product = public.multiply_mask(running, public.encode_mask(
            layout.block_mask(lane, lane % 2, 1)))
        query = product if query is None else (public.add_inplace(query, product) or query)
    slots = secret.decrypt(secret.load_ciphertext(
        public.dump_ciphertext(public.finish_plain(query))))
    values = np.mod(layout.block_values(slots), public.plain_modulus)  # signed decoding
    expected = np.zeros_like(values)
    for lane in range(layout.per_ciphertext):
        expected[2 * lane + lane % 2, 1] = most
    np.testing.assert_array_equal(values, expected)


def test_block_layout_geometry():
    layout = BlockLayout("ckks", 4096, 4, 10_000)
    assert layout.block_size == 4  # τ complex slots, half the real layout's 2τ
    assert layout.per_ciphertext == layout.rows_per_pack == 1024
    assert layout.blocks_per_ciphertext == 2048  # two blocks per lane
    # Four rotation parts: a quarter of the cycle's rotations, one per four rows.
    assert layout.parts == 4 and layout.offsets() == list(range(256))
    assert layout.copy_index(5, 2) == (0, 3) and layout.copy_index(2, 5) == (3, 253)
    assert layout.part_lane(5, 3) == 5 + 768 and layout.part_lane(300, 3) == 44
    assert layout.rotation_steps() == [4, -4, 1024, 32 * 4]  # lanes, parts, row-sum giant
    whole = BlockLayout("ckks", 4096, 4, 10_000, rotation_parts=1)
    assert whole.parts == 1 and whole.offsets() == list(range(1024))  # one per row
    ten = BlockLayout("ckks", 4096, 10, 3000)
    assert (ten.stride, ten.per_ciphertext, ten.leaves_per_ciphertext) == (16, 256, 256)
    bfv = BlockLayout("bfv", 8192, 4, 10_000)
    assert (bfv.block_size, bfv.rows_per_pack, bfv.per_ciphertext) == (8, 512, 1024)
    small = BlockLayout("ckks", 4096, 2, 5)  # fewer rows than a pack: rows ± lanes only
    assert small.rows_per_pack == 5 and small.offsets() == [0, 1, 2, 3, 4, 2044, 2045, 2046,
                                                            2047]
    assert small.parts == 1  # 9 rotations per pack: fewer than a part's 512
    with pytest.raises(ValueError, match="rotation_parts"):
        BlockLayout("bfv", 8192, 2, 10_000, rotation_parts=3)


def test_ckks_block_layout_with_shift(contexts):
    """Heavy nodes: masks carry 2^-shift, the client scales the counts back by 2^shift.
    Both parts of a lane at the largest counts the shift allows (v·W = 2^11, W = 16,384)."""
    secret, public = contexts["ckks"]
    got, expected = _layout_counts("ckks", [0, 1, 0, 1], 2, splits=[1, 2, 4, 3], shift=3,
                                   weights=[4800, 3200, 1600, 6784])
    assert expected[2].tolist() == [6400, 9984]
    _assert_class_counts("ckks", got, expected)


@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_random_label_vectors_count_exactly(contexts, data):
    scheme = data.draw(st.sampled_from(SCHEMES), label="scheme")
    n_classes = data.draw(st.integers(2, 5), label="n_classes")
    y = data.draw(st.lists(st.integers(0, n_classes - 1), min_size=1, max_size=12), label="y")
    split = data.draw(st.integers(0, len(y)), label="split")
    secret, public = contexts[scheme]
    got, expected = _packed_counts(secret, public, y, n_classes, split)
    _assert_slots(scheme, got, expected)
    # One lane per candidate; with fewer rows than a pack there are as many lanes as rows.
    splits = data.draw(st.lists(st.integers(0, len(y)), min_size=1, max_size=min(4, len(y))),
                       label="splits")
    got, expected = _layout_counts(scheme, y, n_classes, sorted(splits))
    _assert_class_counts(scheme, got, expected)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_encrypt_labels_validates_input(contexts, scheme):
    secret, _ = contexts[scheme]
    with pytest.raises(ValueError, match="n_classes"):
        secret.encrypt_labels(np.array([0, 1]), 1)
    with pytest.raises(ValueError, match="n_classes"):
        secret.encrypt_labels(np.array([0, 1]), secret.n_slots)
    with pytest.raises(ValueError, match="class indices"):
        secret.encrypt_labels(np.array([0, 2]), 2)
    with pytest.raises(ValueError, match="class indices"):
        secret.encrypt_labels(np.array([-1, 1]), 2)


def test_unknown_scheme_rejected():
    with pytest.raises(ValueError, match="scheme must be one of"):
        SecretContext("bgv")


# ---------------------------------------------------------------------- the public bundle
def _secret_key_windows(secret: SecretContext, n_windows: int = 6, size: int = 64):
    """64-byte windows of the secret key's coefficients (past the SEAL header and metadata)."""
    payload = secret._secret_key.to_string()[SEAL_HEADER:]
    n_coeffs = secret.context.key_context_data().parms().poly_modulus_degree() * len(
        secret.context.key_context_data().parms().coeff_modulus())
    data_start = len(payload) - n_coeffs * WORD
    assert data_start > 0
    starts = np.linspace(data_start, len(payload) - size, n_windows).astype(int)
    return [payload[s: s + size] for s in starts]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_public_bundle_holds_no_secret_key(contexts, scheme):
    secret, public = contexts[scheme]
    bundle = secret.public_bytes()
    windows = _secret_key_windows(secret)
    assert len(set(windows)) == len(windows)  # random-looking, distinct
    for window in windows:
        assert window not in bundle
    # The check can fail: it finds the key when a bundle does carry it.
    leaky = bundle + secret._secret_key.to_string()
    assert all(window in leaky for window in windows)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_public_context_cannot_decrypt(contexts, scheme):
    _, public = contexts[scheme]
    for name in ("decrypt", "centered", "encrypt_labels", "encrypt_vector", "public_bytes"):
        assert not hasattr(public, name), name
    for name in ("_secret_key", "_decryptor", "_encryptor", "_public_key"):
        assert not hasattr(public, name), name
    for value in vars(public).values():
        assert not isinstance(value, (seal.SecretKey, seal.Decryptor, seal.Encryptor,
                                      seal.KeyGenerator))


def _parts(secret):
    return bundles.unpack_bundle(secret.public_bytes())


@pytest.mark.parametrize("scheme", SCHEMES)
def test_bundle_round_trip(contexts, scheme):
    secret, _ = contexts[scheme]
    parts = _parts(secret)
    assert set(parts) == set(bundles.PUBLIC_PARTS)
    rebuilt = bundles.pack_bundle(parts)
    assert rebuilt == secret.public_bytes()
    assert PublicContext.from_bytes(bytearray(rebuilt)).scheme == scheme
    assert PublicContext.from_bytes(memoryview(rebuilt)).fingerprint_public == \
        secret.fingerprint_public


@pytest.mark.parametrize("data", [b"", b"garbage", b"CFHE1\n", b"CFHE1\n\x00\x00",
                                  b"\x00" * 4096, bytes(range(256)) * 64],
                         ids=["empty", "garbage", "magic-only", "short-header", "zeros",
                              "noise"])
def test_from_bytes_rejects_garbage(data):
    with pytest.raises(HEError):
        PublicContext.from_bytes(data)


@pytest.mark.parametrize("data", ["CFHE1\n", None, 12, ["bytes"]])
def test_from_bytes_rejects_non_bytes(data):
    with pytest.raises(HEError, match="must be bytes"):
        PublicContext.from_bytes(data)


def test_from_bytes_rejects_header_garbage(contexts):
    bundle = contexts["ckks"][0].public_bytes()
    magic = bundles.BUNDLE_MAGIC
    bad_json = magic + (5).to_bytes(4, "little") + b"{nope" + bundle[len(magic) + 4:]
    with pytest.raises(HEError, match="not valid JSON"):
        PublicContext.from_bytes(bad_json)
    parts = _parts(contexts["ckks"][0])
    for header in (b'["params"]', b'{"params": 1}',
                   b'{"params": 1, "public_key": 1, "relin_keys": -1}',
                   b'{"params": 1, "public_key": 1, "relin_keys": 1, "secret_key": 1}',
                   b'{"params": 1, "public_key": "1", "relin_keys": 1}'):
        data = magic + len(header).to_bytes(4, "little") + header + b"".join(parts.values())
        with pytest.raises(HEError, match="exactly the parts"):
            PublicContext.from_bytes(data)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_from_bytes_rejects_truncated_or_padded(contexts, scheme):
    bundle = contexts[scheme][0].public_bytes()
    for cut in (len(bundle) - 1, len(bundle) // 2, 200, len(bundles.BUNDLE_MAGIC) + 3):
        with pytest.raises(HEError):
            PublicContext.from_bytes(bundle[:cut])
    with pytest.raises(HEError, match="trailing"):
        PublicContext.from_bytes(bundle + b"\x00")
    with pytest.raises(HEError, match="trailing"):
        PublicContext.from_bytes(bundle + bundle)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("part", bundles.PUBLIC_PARTS)
def test_from_bytes_rejects_secret_key_in_place_of_a_part(contexts, scheme, part):
    secret, _ = contexts[scheme]
    parts = _parts(secret)
    parts[part] = secret._secret_key.to_string()
    with pytest.raises(HEError):
        PublicContext.from_bytes(bundles.pack_bundle(parts))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_from_bytes_rejects_swapped_keys(contexts, scheme):
    parts = _parts(contexts[scheme][0])
    parts["public_key"], parts["relin_keys"] = parts["relin_keys"], parts["public_key"]
    with pytest.raises(HEError, match="public or relinearisation key"):
        PublicContext.from_bytes(bundles.pack_bundle(parts))


def test_from_bytes_rejects_keys_of_the_other_scheme(contexts):
    ckks, bfv = _parts(contexts["ckks"][0]), _parts(contexts["bfv"][0])
    for name in ("public_key", "relin_keys"):
        mixed = dict(ckks)
        mixed[name] = bfv[name]
        with pytest.raises(HEError, match="public or relinearisation key"):
            PublicContext.from_bytes(bundles.pack_bundle(mixed))


def test_from_bytes_rejects_non_library_parameters(foreign_ckks, contexts):
    bundle = bundles.pack_bundle({"params": foreign_ckks["parms"].to_bytes(),
                              "public_key": foreign_ckks["public_key"],
                              "relin_keys": foreign_ckks["relin_keys"], "galois_keys": b""})
    with pytest.raises(HEError, match="only the library's 128-bit parameter set"):
        PublicContext.from_bytes(bundle)
    # The library's parameters with keys generated for other parameters.
    parts = _parts(contexts["ckks"][0])
    parts["public_key"], parts["relin_keys"] = (foreign_ckks["public_key"],
                                                foreign_ckks["relin_keys"])
    with pytest.raises(HEError, match="public or relinearisation key"):
        PublicContext.from_bytes(bundles.pack_bundle(parts))


def test_bundle_carries_rotation_keys_of_one_step(foreign_ckks, contexts):
    secret, public = _rotating_contexts("ckks", 4)
    assert public.has_rotation(4) and not public.has_rotation(8)
    assert not contexts["ckks"][1].has_rotation(4)  # no Galois keys asked for
    ct = public.load_ciphertext(secret.encrypt_vector(np.arange(12.0)).to_string())
    np.testing.assert_allclose(secret.decrypt(public.rotate(ct, 4))[:8], np.arange(4.0, 12.0),
                               atol=1e-5)
    np.testing.assert_allclose(secret.decrypt(public.rotate(ct, -4))[4:8], np.arange(4.0),
                               atol=1e-5)
    # Galois keys made for another parameter set are rejected.
    keygen = seal.KeyGenerator(seal.SEALContext(foreign_ckks["parms"], True,
                                                seal.sec_level_type.tc128))
    keys = seal.GaloisKeys()
    keygen.create_galois_keys([4, -4], keys)
    parts = _parts(secret)
    parts["galois_keys"] = keys.to_string()
    with pytest.raises(HEError, match="invalid Galois keys"):
        PublicContext.from_bytes(bundles.pack_bundle(parts))


def test_from_bytes_rejects_other_bfv_plain_modulus(contexts):
    parms = scheme_named("bfv").parameters()
    parms.set_plain_modulus(seal.PlainModulus.Batching(4096, 20))
    parts = _parts(contexts["bfv"][0])
    parts["params"] = parms.to_bytes()
    with pytest.raises(HEError, match="unexpected bfv parameters"):
        PublicContext.from_bytes(bundles.pack_bundle(parts))


def test_from_bytes_rejects_the_earlier_bfv_parameters(contexts):
    """SEAL's default modulus with a 30-bit plain modulus (the earlier set) is refused."""
    parms = seal.EncryptionParameters(seal.scheme_type.bfv)
    parms.set_poly_modulus_degree(8192)
    parms.set_coeff_modulus(seal.CoeffModulus.BFVDefault(8192))
    parms.set_plain_modulus(seal.PlainModulus.Batching(8192, 30))
    parts = _parts(contexts["bfv"][0])
    parts["params"] = parms.to_bytes()
    with pytest.raises(HEError, match="unexpected bfv parameters"):
        PublicContext.from_bytes(bundles.pack_bundle(parts))


def test_from_bytes_rejects_insecure_parameters():
    parms = seal.EncryptionParameters(seal.scheme_type.ckks)
    parms.set_poly_modulus_degree(4096)
    parms.set_coeff_modulus(seal.CoeffModulus.Create(4096, [60, 60, 60]))  # 180 > 109 bits
    bundle = bundles.pack_bundle({"params": parms.to_bytes(), "public_key": b"",
                              "relin_keys": b"", "galois_keys": b""})
    with pytest.raises(HEError, match="unexpected ckks parameters"):
        PublicContext.from_bytes(bundle)


# ---------------------------------------------------------------------- ciphertexts
def _data_offset(ct_bytes: bytes, ct: seal.Ciphertext) -> int:
    """Offset of the first coefficient word (uncompressed SEAL serialisation ends in them)."""
    n_words = ct.size() * ct.coeff_modulus_size() * ct.poly_modulus_degree()
    offset = len(ct_bytes) - n_words * WORD
    assert 0 < offset < 200
    return offset


@pytest.fixture(scope="module")
def label_blobs(contexts):
    return {scheme: contexts[scheme][0].encrypt_labels(np.array([1, 0]), 2)
            for scheme in SCHEMES}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_load_ciphertext_round_trip(contexts, label_blobs, scheme):
    secret, public = contexts[scheme]
    blob = label_blobs[scheme][0]
    for data in (blob, bytearray(blob), memoryview(blob)):
        ct = public.load_ciphertext(data)
        assert ct.size() == 2
        assert public.dump_ciphertext(ct) == blob


@pytest.mark.parametrize("scheme", SCHEMES)
def test_load_ciphertext_rejects_truncated(contexts, label_blobs, scheme):
    _, public = contexts[scheme]
    blob = label_blobs[scheme][0]
    for cut in (0, 8, SEAL_HEADER, 64, 120, len(blob) // 2, len(blob) - WORD, len(blob) - 1):
        with pytest.raises(HEError, match="invalid ciphertext"):
            public.load_ciphertext(blob[:cut])


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_load_ciphertext_rejects_coefficient_beyond_modulus(contexts, label_blobs, scheme,
                                                           where):
    _, public = contexts[scheme]
    blob = label_blobs[scheme][0]
    offset = _data_offset(blob, public.load_ciphertext(blob))
    n_words = (len(blob) - offset) // WORD
    word = {"first": 0, "middle": n_words // 2 + 3, "last": n_words - 1}[where]
    pos = offset + word * WORD
    for patch in (b"\xff" * WORD, None):
        bad = bytearray(blob)
        if patch is None:
            bad[pos + WORD - 1] ^= 0x80  # bit 63: above every coefficient modulus (<= 60 bits)
        else:
            bad[pos: pos + WORD] = patch
        with pytest.raises(HEError, match="invalid ciphertext"):
            public.load_ciphertext(bytes(bad))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_load_ciphertext_rejects_corrupted_metadata(contexts, label_blobs, scheme):
    _, public = contexts[scheme]
    blob = label_blobs[scheme][0]
    # magic, header size, parms_id (first and last byte), polynomial degree
    for pos in (0, 2, SEAL_HEADER, SEAL_HEADER + 31, 60):
        bad = bytearray(blob)
        bad[pos] ^= 0x01
        with pytest.raises(HEError, match="invalid ciphertext"):
            public.load_ciphertext(bytes(bad))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_low_bit_flip_in_coefficients_is_not_detectable_by_seal(contexts, label_blobs, scheme):
    """Documents SEAL's limit: an in-range coefficient change loads (and decrypts to noise).

    This is why the protocol digests every message body; see test_protocol.
    """
    secret, public = contexts[scheme]
    blob = label_blobs[scheme][0]
    offset = _data_offset(blob, public.load_ciphertext(blob))
    bad = bytearray(blob)
    bad[offset + 5 * WORD] ^= 0x01
    ct = public.load_ciphertext(bytes(bad))
    assert public.dump_ciphertext(ct) == bytes(bad)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("data", ["ciphertext", None, 7, [b"x"], np.zeros(4, dtype=np.uint8)],
                         ids=["str", "none", "int", "list", "ndarray"])
def test_load_ciphertext_rejects_non_bytes(contexts, scheme, data):
    _, public = contexts[scheme]
    with pytest.raises(HEError, match="must be bytes"):
        public.load_ciphertext(data)


def test_load_ciphertext_rejects_other_scheme(contexts, label_blobs):
    for mine, theirs in (("ckks", "bfv"), ("bfv", "ckks")):
        secret, public = contexts[mine]
        for ctx in (secret, public):
            with pytest.raises(HEError, match="invalid ciphertext"):
                ctx.load_ciphertext(label_blobs[theirs][0])


def test_load_ciphertext_rejects_other_parameter_set(contexts, foreign_ckks):
    secret, public = contexts["ckks"]
    for ctx in (secret, public):
        with pytest.raises(HEError, match="invalid ciphertext"):
            ctx.load_ciphertext(foreign_ckks["ciphertext"])


@pytest.mark.parametrize("scheme", SCHEMES)
def test_load_ciphertext_rejects_three_polynomials(contexts, label_blobs, scheme):
    _, public = contexts[scheme]
    ct = public.load_ciphertext(label_blobs[scheme][0])
    unrelinearised = seal.Evaluator(public.context).square(ct)
    assert unrelinearised.size() == 3
    with pytest.raises(HEError, match="2 polynomials"):
        public.load_ciphertext(unrelinearised.to_string())


@pytest.mark.parametrize("scheme", SCHEMES)
def test_same_parameter_foreign_ciphertext_loads(contexts, other_contexts, scheme):
    """SEAL cannot tell keys apart: a same-parameter ciphertext of another client loads.

    The protocol therefore carries the public-context fingerprint (see test_private_forest).
    """
    _, public = contexts[scheme]
    blob = other_contexts[scheme].encrypt_labels(np.array([1]), 2)[0]
    assert public.load_ciphertext(blob).size() == 2


@pytest.mark.parametrize("scheme", SCHEMES)
def test_other_clients_key_does_not_decrypt(contexts, other_contexts, scheme):
    secret, _ = contexts[scheme]
    other = other_contexts[scheme]
    y = np.array([1, 0, 1])
    slot_class = np.arange(secret.n_slots) % 2
    for label, blob in zip(y, secret.encrypt_labels(y, 2), strict=True):
        plain = (slot_class == label).astype(np.float64)
        own = secret.centered(secret.decrypt(secret.load_ciphertext(blob)))
        _assert_slots(scheme, own, plain.astype(own.dtype))
        wrong = other.centered(other.decrypt(other.load_ciphertext(blob))).astype(np.float64)
        # Essentially random: far from 0/1 in nearly every slot.
        assert np.mean(np.abs(wrong - plain) < 0.5) < 0.01
        assert np.abs(wrong).max() > 1e3


# ---------------------------------------------------------------------- fixed gaps
@pytest.mark.parametrize("scheme", SCHEMES)
def test_load_ciphertext_rejects_trailing_bytes(contexts, label_blobs, scheme):
    _, public = contexts[scheme]
    with pytest.raises(HEError):
        public.load_ciphertext(label_blobs[scheme][0] + b"\x00")


@pytest.mark.parametrize("scheme", SCHEMES)
def test_load_ciphertext_rejects_flipped_ntt_flag(contexts, label_blobs, scheme):
    _, public = contexts[scheme]
    blob = label_blobs[scheme][0]
    bad = bytearray(blob)
    ntt_flag = SEAL_HEADER + 32  # after the 32-byte parms_id
    assert bad[ntt_flag] == (1 if scheme == "ckks" else 0)
    bad[ntt_flag] ^= 1
    with pytest.raises(HEError, match="NTT flag"):
        public.load_fresh_ciphertext(bytes(bad))
