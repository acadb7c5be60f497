"""DECTRIS blobs (``ltdask.acquire.bslz4``): decoded against what hdf5plugin's bitshuffle
filter and the lz4 library write, encoded so that they read them back; malformed blobs give
errors naming the frame and the byte, never a crash."""

from __future__ import annotations

import io
import mmap

import numpy as np
import pytest
from helpers.lz4blocks import lz4_sequences

from ltdask.acquire import AcquisitionError, bslz4
from ltdask.acquire.simulate.encode import encode_frame

h5py = pytest.importorskip("h5py")
hdf5plugin = pytest.importorskip("hdf5plugin")
lz4_block = pytest.importorskip("lz4.block")

DTYPES = [np.uint8, np.uint16, np.uint32]
# elements per frame around bitshuffle's blocks (8192 bytes: 8192/4096/2048 elements) and
# its multiple of 8; (1, n) frames
SHAPES = [
    pytest.param((1, 1), id="1-element"),
    pytest.param((3, 5), id="15-elements"),
    pytest.param((67, 61), id="odd-multi-block"),
    pytest.param((1, 2048), id="2048"),
    pytest.param((1, 2048 + 8), id="2048+8"),
    pytest.param((1, 4096 + 7), id="4096+7"),
    pytest.param((1, 3 * 8192 - 1), id="3x8192-1"),
    pytest.param((96, 96), id="96x96"),
]


def _frame(shape, dtype, kind, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "zeros":
        return np.zeros(shape, dtype)
    if kind == "random":
        return rng.integers(0, np.iinfo(dtype).max, shape, dtype=dtype, endpoint=True)
    frame = rng.poisson(0.3, shape).astype(dtype)  # sparse, like a diffraction frame
    frame.flat[:: max(1, frame.size // 7)] = np.iinfo(dtype).max
    return frame


def _hdf5plugin_blob(frame: np.ndarray) -> bytes:
    """The chunk hdf5plugin's Bitshuffle(lz4) filter writes for one frame."""
    with h5py.File(io.BytesIO(), "w") as f:
        dset = f.create_dataset(
            "x", data=frame[None], chunks=(1, *frame.shape), **hdf5plugin.Bitshuffle(cname="lz4")
        )
        _, blob = dset.id.read_direct_chunk((0, 0, 0))
    return bytes(blob)


def _hdf5plugin_read(blob: bytes, shape, dtype) -> np.ndarray:
    """What hdf5plugin's filter reads from `blob` written as the chunk of one frame."""
    with h5py.File(io.BytesIO(), "w") as f:
        dset = f.create_dataset(
            "x", (1, *shape), dtype=dtype, chunks=(1, *shape), **hdf5plugin.Bitshuffle(cname="lz4")
        )
        dset.id.write_direct_chunk((0, 0, 0), blob, 0)
        return dset[0]


def _bs(dtype) -> str:
    return f"bs{np.dtype(dtype).itemsize * 8}-lz4<"


@pytest.mark.parametrize("kind", ["zeros", "random", "sparse"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_decodes_what_hdf5plugin_and_lz4_write(dtype, shape, kind):
    frame = _frame(shape, dtype, kind)
    blob = _hdf5plugin_blob(frame)
    np.testing.assert_array_equal(bslz4.decode_blob(blob, shape, dtype, _bs(dtype)), frame)
    # LiberTEM's mock writes zeros in the 12-byte header: the frame says its size
    unfilled = bytes(12) + blob[12:]
    np.testing.assert_array_equal(bslz4.decode_blob(unfilled, shape, dtype, _bs(dtype)), frame)
    plain = lz4_block.compress(frame.tobytes(), store_size=False)
    np.testing.assert_array_equal(bslz4.decode_blob(plain, shape, dtype, "lz4<"), frame)
    np.testing.assert_array_equal(bslz4.decode_blob(frame.tobytes(), shape, dtype, "<"), frame)


@pytest.mark.parametrize("kind", ["zeros", "random", "sparse"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_encodes_what_hdf5plugin_and_lz4_read(dtype, shape, kind):
    frame = _frame(shape, dtype, kind, seed=1)
    bs_blob = encode_frame(frame, bslz4.BSLZ4)
    np.testing.assert_array_equal(_hdf5plugin_read(bs_blob, shape, dtype), frame)
    lz4_blob = encode_frame(frame, bslz4.LZ4)
    assert lz4_block.decompress(lz4_blob, uncompressed_size=frame.nbytes) == frame.tobytes()
    assert encode_frame(frame, bslz4.RAW) == frame.tobytes()


def test_sparse_frames_compress():
    frame = _frame((192, 192), np.uint16, "sparse")
    assert len(encode_frame(frame, bslz4.BSLZ4)) < frame.nbytes / 4


@pytest.mark.parametrize("frame_bytes, itemsize", [(73728, 2), (4096, 1), (5000, 4), (2**20, 2)])
def test_slots_of_a_page_or_more_are_whole_pages(frame_bytes, itemsize):
    """A store's buffers begin a page: whole-page slots make a blob touch the fewest pages
    (each a page fault the first time it is written)."""
    slot = bslz4.slot_bytes(frame_bytes, itemsize)
    need = bslz4.PREFIX + bslz4.max_blob_bytes(frame_bytes, itemsize)
    assert slot % mmap.PAGESIZE == 0
    assert need <= slot < need + mmap.PAGESIZE
    assert bslz4.slot_bytes(24, 2) == bslz4.PREFIX + bslz4.max_blob_bytes(24, 2)  # (< a page)


def _slots(blobs, code, frame_bytes, itemsize, first_index=0):
    slots = np.zeros((len(blobs), bslz4.slot_bytes(frame_bytes, itemsize)), np.uint8)
    for k, blob in enumerate(blobs):
        if blob is not None:
            bslz4.put_blob(slots[k], blob, code, first_index + k)
    return slots


def test_slots_decode_frames_and_zeros_where_none_came():
    frames = [_frame((20, 24), np.uint16, "sparse", seed=s) for s in range(3)]
    blobs = [_hdf5plugin_blob(frames[0]), None, _hdf5plugin_blob(frames[2])]
    out = bslz4.decode_slots(_slots(blobs, bslz4.BSLZ4, 960, 2), (20, 24), np.uint16)
    np.testing.assert_array_equal(out, [frames[0], np.zeros((20, 24)), frames[2]])


def _random_sequences(seed: int) -> bytes:
    """An LZ4 block of random sequences whose matches take every copy path of the decoder
    (offsets from 1 to far back, overlapping themselves or not; short and long runs; the
    end of the block near), ending as LZ4 requires (12+ literals) for the lz4 library."""
    rng = np.random.default_rng(seed)
    seqs, written = [], 0
    for _ in range(60):
        literals = rng.integers(0, 256, rng.choice([0, 1, 3, 14, 15, 16, 17, 40, 300]))
        written += len(literals)
        if written == 0:
            literals, written = np.array([rng.integers(0, 256)]), 1
        offset = int(rng.choice([1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 100, 5000]))
        offset = min(offset, written)
        length = int(rng.choice([4, 5, 8, 15, 16, 17, 18, 19, 33, 300, 1000]))
        seqs.append((literals.astype(np.uint8).tobytes(), offset, length))
        written += length
    seqs.append((rng.integers(0, 256, 12 + int(rng.integers(0, 20)), np.uint8).tobytes(), None, 0))
    return lz4_sequences(*seqs)


@pytest.mark.parametrize("seed", range(6))
def test_lz4_matches_of_any_offset_and_length_as_the_lz4_library(seed):
    block = _random_sequences(seed)
    expected = np.frombuffer(lz4_block.decompress(block, uncompressed_size=10**6), np.uint8)
    decoded = bslz4.decode_blob(block, (1, expected.size), np.uint8, "lz4<")[0]
    np.testing.assert_array_equal(decoded, expected)


MALFORMED = [
    pytest.param(
        lz4_sequences((b"\x01\x02", 3, 6), (b"", None, 0)), "points before the start", id="offset"
    ),
    pytest.param(
        lz4_sequences((b"\x01", 1, 400), (b"", None, 0)), "writes past the end", id="long-match"
    ),
    pytest.param(lz4_sequences((bytes(20), None, 0)), "writes past the end", id="long-literals"),
    pytest.param(lz4_sequences((bytes(5), None, 0)), "fewer bytes", id="short"),
    pytest.param(b"\xf0\xff\xff", "ends inside", id="literal-length-cut"),
    pytest.param(lz4_sequences((b"\x01", 1, 4))[:-1], "ends inside", id="offset-cut"),
    pytest.param(b"\x00\x00\x00", "points before the start", id="zero-offset"),
]


@pytest.mark.parametrize("blob, message", MALFORMED)
def test_malformed_lz4_blocks_name_frame_and_byte(blob, message):
    slots = _slots([blob], bslz4.LZ4, 16, 1, first_index=41)
    with pytest.raises(AcquisitionError, match=rf"frame 41: .*{message}.*\(byte \d+ of its"):
        bslz4.decode_slots(slots, (4, 4), np.uint8)


def test_malformed_bitshuffle_blobs_name_frame_and_byte():
    frame = _frame((67, 61), np.uint16, "sparse")
    blob = _hdf5plugin_blob(frame)
    cases = {
        "total bytes do not match": (99).to_bytes(8, "big") + blob[8:],
        "block size is not a multiple": blob[:8] + (1001).to_bytes(4, "big") + blob[12:],
        "runs past the blob's end": blob[:12] + (10**6).to_bytes(4, "big") + blob[16:],
        "trailing or missing bytes": blob + b"\x00",
    }
    for message, bad in cases.items():
        slots = _slots([bad], bslz4.BSLZ4, frame.nbytes, 2, first_index=7)
        with pytest.raises(AcquisitionError, match=rf"frame 7: .*{message}.* \(byte \d+ of its"):
            bslz4.decode_slots(slots, frame.shape, np.uint16)
    for cut in (5, 12, 15, 40, len(blob) - 1):
        with pytest.raises(AcquisitionError, match=r"frame 0: .*byte \d+"):
            bslz4.decode_blob(blob[:cut], frame.shape, np.uint16, "bs16-lz4<")


@pytest.mark.parametrize("encoding", ["bs16-lz4<", "lz4<"])
def test_corrupted_blobs_decode_or_raise_never_crash(encoding):
    """Any byte changed anywhere: the kernels check every length and offset themselves."""
    frame = _frame((40, 30), np.uint16, "sparse", seed=3)
    code = bslz4.parse_encoding(encoding, np.uint16)
    blob = bytearray(encode_frame(frame, code))
    rng = np.random.default_rng(34)
    outcomes = set()
    for _ in range(300):
        bad = bytearray(blob)
        for at in rng.integers(0, len(bad), rng.integers(1, 4)):
            bad[at] = rng.integers(0, 256)
        try:
            out = bslz4.decode_blob(bytes(bad), frame.shape, np.uint16, encoding)
        except AcquisitionError as e:
            assert "byte" in str(e)
            outcomes.add("error")
        else:
            assert out.shape == frame.shape
            outcomes.add("decoded")
    assert "error" in outcomes


@pytest.mark.parametrize(
    "encoding, dtype, message",
    [
        pytest.param("bs8-lz4<", np.uint16, "bs16-lz4<", id="bits-not-the-type's"),
        pytest.param("bs16-lz4>", np.uint16, "big-endian", id="big-endian"),
        pytest.param("zstd<", np.uint8, "expected '<', 'lz4<' or 'bs8-lz4<'", id="unknown"),
    ],
)
def test_unknown_encodings_say_what_is_read(encoding, dtype, message):
    with pytest.raises(AcquisitionError, match=rf"encoding {encoding!r}.*{message}"):
        bslz4.parse_encoding(encoding, dtype)


def test_a_blob_larger_than_any_encoding_of_the_frame():
    with pytest.raises(AcquisitionError, match=r"frame 3: a blob of 500 bytes, larger than"):
        _slots([bytes(500)], bslz4.LZ4, 64, 1, first_index=3)


def _numpy_shuffled(elements: np.ndarray) -> np.ndarray:
    """The bitshuffle filter's bit rows of `elements` (m, a multiple of 8), with numpy:
    row 8j+b = bit b of byte j of every element, element e at bit e % 8 of byte e // 8."""
    raw = elements.astype(elements.dtype.newbyteorder("<")).view(np.uint8)
    bits = np.unpackbits(raw.reshape(len(elements), -1), axis=1, bitorder="little")
    return np.packbits(bits.T, axis=1, bitorder="little").reshape(-1)


@pytest.mark.parametrize("m", [8, 64, 72, 2048, 4096])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kind", ["random", "sparse"])
def test_bit_shuffling_equals_numpy(m, dtype, kind):
    """Both kernels against numpy's unpackbits/packbits; sparse and random blocks take the
    unshuffle's set-bit and transpose paths (64-element words), m = 72 its byte path."""
    from ltdask.io.codecs.bitshuffle import bitshuffle, bitunshuffle

    elements = _frame((m,), dtype, kind, seed=m)
    raw = elements.view(np.uint8)
    expected = _numpy_shuffled(elements)
    shuffled = np.empty(raw.size, np.uint8)
    bitshuffle(raw, 0, shuffled, m, elements.itemsize)
    np.testing.assert_array_equal(shuffled, expected)
    out = np.full(raw.size + 5, 7, np.uint8)
    bitunshuffle(expected, out, 3, m, elements.itemsize)
    np.testing.assert_array_equal(out[3 : 3 + raw.size], raw)
    assert out[:3].tolist() == [7, 7, 7] and out[-2:].tolist() == [7, 7]
