"""The damage-tolerant bz2 reader, on the real 2014 enwiki sample (12 bz2 blocks in one stream)."""

from __future__ import annotations

import bz2
import io
import random
import tracemalloc
from functools import cache
from itertools import pairwise

import pytest

from bertcorpus.transforms.bz2_blocks import BLOCK_MAGIC, END_MAGIC, Bz2Reader, Damage, decode_block, find_magic
from bertcorpus.transforms.compression import open_decompressed
from bertcorpus.transforms.wiki_page_items import PageError
from bertcorpus.transforms.wiki_pages import iter_pages

from wiki_fixtures import ENWIKI_2014, ENWIKI_SMALL, flip_bytes, read_xml


def all_magics(data: bytes, magic: int) -> list[int]:
    found, bit = [], 0
    while (bit := find_magic(data, magic, bit)) is not None:
        found.append(bit)
        bit += 1
    return found


@cache
def sample() -> tuple[bytes, bytes, list[int], int]:
    data = ENWIKI_2014.read_bytes()
    return data, read_xml(ENWIKI_2014), all_magics(data, BLOCK_MAGIC), all_magics(data, END_MAGIC)[0]


def read(data: bytes) -> tuple[bytes, list[tuple[int, Damage]]]:
    """The decompressed bytes, and each Damage with the number of bytes decompressed before it."""
    output, damage = [], []
    for chunk in Bz2Reader(io.BytesIO(data)).chunks():
        if isinstance(chunk, Damage):
            damage.append((sum(map(len, output)), chunk))
        else:
            output.append(chunk)
    return b"".join(output), damage


def test_every_block_is_found_and_decodes_on_its_own():
    data, xml, blocks, end = sample()
    assert len(blocks) == 12 and blocks[0] == 32  # just after "BZh9"
    assert b"".join(decode_block(data, a, b) for a, b in pairwise([*blocks, end])) == xml


def test_blocks_of_a_smaller_block_size_decode_too():
    part = sample()[1][:2_000_000]
    data = bz2.compress(part, 1)  # blocks of 100 kB
    blocks = all_magics(data, BLOCK_MAGIC)
    assert len(blocks) == 20
    end = all_magics(data, END_MAGIC)[0]
    assert b"".join(decode_block(data, a, b) for a, b in pairwise([*blocks, end])) == part
    output, damage = read(flip_bytes(data, blocks[10] // 8 + 500))
    assert len(damage) == 1 and 0 < len(part) - len(output) < 200_000


def test_a_clean_file_reads_like_bz2_decompress():
    data, xml, _, _ = sample()
    assert read(data) == (xml, [])
    assert Bz2Reader(io.BytesIO(data)).read() == xml


def test_a_corrupt_block_costs_that_block_only():
    data, xml, blocks, end = sample()
    damaged = flip_bytes(data, (blocks[5] + blocks[6]) // 16)  # inside the sixth block
    output, damage = read(damaged)
    sizes = [len(decode_block(data, a, b)) for a, b in pairwise([*blocks, end])]
    lost_from, lost_to = sum(sizes[:5]), sum(sizes[:6])
    assert output == xml[:lost_from] + xml[lost_to:]
    assert [(at, d.reason) for at, d in damage] == [(lost_from, "read_error")]
    with pytest.raises(OSError, match="bad bz2 data after byte"):
        Bz2Reader(io.BytesIO(damaged)).read()


def test_a_cut_file_keeps_every_whole_block():
    data, xml, blocks, _ = sample()
    output, damage = read(data[: blocks[4] // 8 + 1000])
    assert output == bz2.BZ2Decompressor().decompress(data[: blocks[4] // 8 + 1000])
    assert len(output) < len(xml) and xml.startswith(output)
    assert [d.reason for _, d in damage] == ["truncated"]


def test_garbage_between_streams_is_one_damage_and_both_streams_are_read():
    first, second = ENWIKI_SMALL.read_bytes(), bz2.compress(read_xml(ENWIKI_SMALL))
    output, damage = read(first + bytes(range(256)) * 3 + second)
    assert output == read_xml(ENWIKI_SMALL) * 2
    # what lay between the streams was not bz2 data: how much it held cannot be told
    assert [(at, d.detail, d.lost_bytes) for at, d in damage] == [
        (
            len(read_xml(ENWIKI_SMALL)),
            f"the bytes at {len(first)} are not a bz2 stream; bytes {len(first)}-"
            f"{len(first) + 768 + 4} of the file could not be decompressed",
            None,
        )
    ]


def test_a_file_that_is_bz2_only_by_its_first_bytes_is_one_damage():
    output, damage = read(b"BZh9" + bytes(range(256)) * 40)
    assert output == b"" and [(d.detail, d.lost_bytes) for _, d in damage] == [
        ("bad bz2 data after byte 0: Invalid data stream; bytes 4-10244 of the file could not be decompressed", None)
    ]
    pages = list(iter_pages(Bz2Reader(io.BytesIO(b"BZh9" + bytes(range(256)) * 40))))
    assert [(p.where, p.reason) for p in pages] == [("byte 0", "read_error")]


def test_garbage_after_damage_is_read_in_bounded_memory():
    xml = read_xml(ENWIKI_SMALL)
    damaged = flip_bytes(ENWIKI_SMALL.read_bytes(), 10_000)
    garbage = random.Random(7).randbytes(8 << 20)
    data = damaged + garbage + bz2.compress(xml)
    tracemalloc.start()
    try:
        output, damage = read(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert output == xml
    assert [d.detail.split(";")[0] for _, d in damage] == [
        "bad bz2 data after byte 0: Invalid data stream",
        f"the bytes at {len(damaged)} are not a bz2 stream",
    ]
    assert peak < 4 << 20  # about two blocks, where all the garbage was held before


def test_pages_read_from_a_path_opened_inline(tmp_path):
    # nothing but the page iterator refers to the reader that open_decompressed made: it must stay open while it runs
    pages = [p for p in iter_pages(open_decompressed(ENWIKI_SMALL)) if not isinstance(p, PageError)]
    assert [p.page_id for p in pages] == [10, 411964, 302109]
