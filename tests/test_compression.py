"""transforms/compression.py: the compression a file's first bytes name, and both ways of opening one (by its content
and by its name) on real text, whole and cut."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma

import pytest
import zstandard

from bertcorpus.transforms.compression import (
    UnreadableCompression,
    compression_of,
    decompressed_by_suffix,
    is_cut,
    open_decompressed,
)

from conftest import BOOKS

TEXT = BOOKS[-1].read_bytes()  # Frankenstein, 421 KB
COMPRESSORS = {
    "bzip2": bz2.compress,
    "gzip": gzip.compress,
    "xz": lzma.compress,
    "zstd": lambda data: zstandard.ZstdCompressor().compress(data),
}


@pytest.mark.parametrize("name", sorted(COMPRESSORS))
def test_each_compression_is_known_by_its_first_bytes_and_read_back(name):
    packed = COMPRESSORS[name](TEXT)
    assert compression_of(packed[:10]) == name
    assert open_decompressed(io.BytesIO(packed)).read() == TEXT


def test_text_and_an_empty_bzip2_stream_are_told_apart():
    assert compression_of(TEXT[:10]) is None
    assert compression_of(b"BZh9 is how this line starts") is None
    assert compression_of(bz2.compress(b"")) == "bzip2"
    assert open_decompressed(io.BytesIO(TEXT)).read() == TEXT


@pytest.mark.parametrize(
    ("head", "name"),
    [(b"7z\xbc\xaf\x27\x1c\x00\x04", "7z"), (b"PK\x03\x04\x14\x00", "zip"), (b"\x04\x22\x4d\x18\x64\x40", "lz4")],
)
def test_a_compression_that_is_not_read_is_named_at_the_first_read(head, name):
    reader = open_decompressed(io.BytesIO(head + TEXT))
    with pytest.raises(UnreadableCompression, match=f"{name}-compressed"):
        reader.read()


def test_a_cut_zstd_file_keeps_what_precedes_the_cut_either_way():
    frames = b"".join(zstandard.ZstdCompressor().compress(TEXT[i : i + 65536]) for i in range(0, len(TEXT), 65536))
    cut = frames[: len(frames) * 2 // 3]
    by_content = open_decompressed(io.BytesIO(cut))
    kept = bytearray()
    with pytest.raises(EOFError):
        while piece := by_content.read(1000):
            kept += piece
    by_name = decompressed_by_suffix(io.BytesIO(cut), "text.zst")
    assert by_name.read() == bytes(kept) and is_cut(by_name)
    assert len(kept) >= 4 * 65536 and TEXT.startswith(kept)
    whole = decompressed_by_suffix(io.BytesIO(frames), "text.zst")
    assert whole.read() == TEXT and not is_cut(whole)


def test_a_cut_gzip_file_gives_what_precedes_the_cut():
    packed = gzip.compress(TEXT)
    stream = decompressed_by_suffix(io.BytesIO(packed[: len(packed) * 3 // 4]), "text.gz")
    kept = stream.read()
    assert is_cut(stream) and len(TEXT) // 2 < len(kept) < len(TEXT) and TEXT.startswith(kept)
