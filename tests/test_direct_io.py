"""Published files written past the page cache (pipeline/direct_io.py through output.write_bytes)."""
from __future__ import annotations

import errno
import hashlib
import os
import sys

import pytest
from conftest import BOOKS

from pipeline import direct_io, output

pytestmark = pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="direct I/O is a Linux feature")


def real_bytes(size: int) -> bytes:
    """The bundled books, repeated to `size` bytes."""
    text = b"".join(path.read_bytes() for path in BOOKS)
    return (text * (size // len(text) + 1))[:size]


def chunked(data: bytes, sizes: list[int]) -> list[bytes]:
    chunks, start = [], 0
    for size in sizes:
        chunks.append(data[start:start + size])
        start += size
    return chunks + [data[start:]]


SIZES = [0, 1, direct_io.ALIGNMENT - 1, direct_io.ALIGNMENT, direct_io.ALIGNMENT + 1,
         direct_io.BUFFER_BYTES, direct_io.BUFFER_BYTES + 3 * direct_io.ALIGNMENT + 17, 19_000_003]


@pytest.mark.parametrize("size", SIZES)
def test_the_file_holds_exactly_the_chunks_and_its_digest(tmp_path, size):
    data = real_bytes(size)
    # Chunks that straddle the buffer's end and the block boundaries, and an empty one.
    chunks = chunked(data, [size // 3, 0, direct_io.ALIGNMENT + 5, direct_io.BUFFER_BYTES - 7])
    path = tmp_path / "out" / "shard.tfrecord"
    assert output.write_bytes(str(path), chunks, read_back=False) == (size, hashlib.sha256(data).hexdigest())
    assert path.read_bytes() == data


def test_a_rewrite_truncates_the_longer_file_it_replaces(tmp_path):
    path = tmp_path / "shard.tfrecord"
    output.write_bytes(str(path), [real_bytes(3 * direct_io.BUFFER_BYTES)], read_back=False)
    output.write_bytes(str(path), [b"short"], read_back=False)
    assert path.read_bytes() == b"short"


def test_one_buffer_serves_one_write_after_another_and_the_first_bytes_of_each(tmp_path):
    first, second = real_bytes(direct_io.BUFFER_BYTES + 5), real_bytes(direct_io.ALIGNMENT + 1)[::-1]
    assert direct_io.write_file(str(tmp_path / "a"), [first])
    spare = list(direct_io._SPARE_BUFFERS)
    assert direct_io.write_file(str(tmp_path / "b"), [second])
    assert direct_io._SPARE_BUFFERS == spare and len(spare) == 1  # taken and given back, not made anew
    # A reused buffer still holds the bytes of the last write: none of them may reach the next file.
    assert (tmp_path / "a").read_bytes() == first and (tmp_path / "b").read_bytes() == second


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_process_never_writes_into_a_buffer_its_parent_keeps(tmp_path):
    # A local runner forks its workers from the launcher; a buffer they shared would be written by two at once.
    first = real_bytes(3 * direct_io.ALIGNMENT)
    assert direct_io.write_file(str(tmp_path / "parent"), [first])
    _, kept = direct_io._SPARE_BUFFERS[-1]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        try:
            os._exit(0 if direct_io.write_file(str(tmp_path / "child"), [b"x" * len(first)]) else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert kept[:len(first)] == first  # the child's bytes never reached the parent's buffer
    assert (tmp_path / "child").read_bytes() == b"x" * len(first)


def fdinfo_flags(fd: int) -> int:
    with open(f"/proc/self/fdinfo/{fd}") as f:
        return int(next(line for line in f if line.startswith("flags:")).split()[1], 8)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_bytes_go_out_with_direct_io_while_the_page_cache_takes_the_last_partial_block(tmp_path, monkeypatch):
    flags_seen = []
    real_write = os.write

    def watching_write(fd, data):
        flags_seen.append((fdinfo_flags(fd) & os.O_DIRECT != 0, len(data)))
        return real_write(fd, data)

    monkeypatch.setattr(direct_io.os, "write", watching_write)
    if not direct_io.write_file(str(tmp_path / "probe"), [b"x"]):
        pytest.skip("this filesystem refuses direct I/O")
    flags_seen.clear()
    size = 2 * direct_io.BUFFER_BYTES + direct_io.ALIGNMENT + 100
    assert direct_io.write_file(str(tmp_path / "shard"), [real_bytes(size)])
    assert flags_seen == [(True, direct_io.BUFFER_BYTES), (True, direct_io.BUFFER_BYTES),
                          (True, direct_io.ALIGNMENT), (False, 100)]


def test_a_filesystem_that_refuses_direct_io_at_open_gets_an_ordinary_write(tmp_path, monkeypatch):
    real_open = os.open

    def refusing_open(path, flags, *args):
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(direct_io.os, "open", refusing_open)
    data = real_bytes(direct_io.BUFFER_BYTES + 12345)
    path = tmp_path / "shard.tfrecord"
    assert output.write_bytes(str(path), [data], read_back=False)[0] == len(data)
    assert path.read_bytes() == data


def test_a_filesystem_that_refuses_the_direct_writes_gets_the_same_bytes_through_the_page_cache(tmp_path,
                                                                                                monkeypatch):
    real_write = os.write
    refused = []

    def refusing_write(fd, data):
        if fdinfo_flags(fd) & os.O_DIRECT:
            refused.append(len(data))
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    monkeypatch.setattr(direct_io.os, "write", refusing_write)
    data = real_bytes(3 * direct_io.BUFFER_BYTES + 999)
    path = tmp_path / "shard.tfrecord"
    assert output.write_bytes(str(path), chunked(data, [5, direct_io.BUFFER_BYTES]), read_back=False)[0] == len(data)
    assert path.read_bytes() == data
    assert refused == [direct_io.BUFFER_BYTES]  # refused once, then buffered from there on


def test_other_errors_are_raised(tmp_path, monkeypatch):
    def full_disk(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(direct_io.os, "write", full_disk)
    with pytest.raises(OSError) as raised:
        output.write_bytes(str(tmp_path / "shard.tfrecord"), [real_bytes(direct_io.BUFFER_BYTES)], read_back=False)
    assert raised.value.errno == errno.ENOSPC
