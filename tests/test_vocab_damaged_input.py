"""`bertcorpus vocab` on damaged and hostile input: what precedes damage is kept and the rest counted, a file that is
not what its name says is one line, and nothing ends in a traceback or an abort."""

from __future__ import annotations

import bz2
import gzip
import json
import re
import subprocess
import sys
import tracemalloc
import zlib
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from bertcorpus.pipeline.inputs.formats import ReadStats, Rejected
from bertcorpus.pipeline.inputs.reads import read_documents
from bertcorpus.pipeline.vocab.command import MAX_VOCAB_SIZE
from bertcorpus.pipeline.vocab.counting import VocabConfig, count_in_process, text_pieces
from bertcorpus.wordpiece.training import TrainingConfig
from bertcorpus.wordpiece.word_counting import ChunkBatch

from conftest import DATA, TESTS, run_cli

ALICE = DATA / "create" / "11-0.txt"
# A cut stream's longest prefix that the decompressor can give, found without the reader under test.
DECOMPRESS_PREFIX = {
    ".gz": lambda data: zlib.decompressobj(wbits=31).decompress(data),
    ".bz2": lambda data: bz2.BZ2Decompressor().decompress(data),
    ".zst": lambda data: zstandard.ZstdDecompressor().decompressobj().decompress(data),
}
# Small bz2 blocks (100 kB), so that a cut file still holds whole blocks.
COMPRESS = {
    ".gz": gzip.compress,
    ".bz2": lambda data: bz2.compress(data, 1),
    ".zst": zstandard.ZstdCompressor().compress,
}


@pytest.fixture(scope="module")
def docs() -> list[dict]:
    """Alice in Wonderland as 40 documents of 20 paragraphs (160 kB of JSONL)."""
    paragraphs = [p for p in ALICE.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    return [
        {"id": f"alice:{i}", "text": "\n\n".join(paragraphs[i * 20 : (i + 1) * 20])}
        for i in range(len(paragraphs) // 20)
    ]


@pytest.fixture(scope="module")
def jsonl(docs) -> bytes:
    return b"".join(json.dumps(d).encode() + b"\n" for d in docs)


def vocab(out: Path, *inputs, extra=()) -> int:
    return run_cli("vocab", "--input", *inputs, "--output", out, "--vocab-size", "1200", *extra)


def summary(stdout: str) -> dict[str, str]:
    rows = stdout.split("vocab summary\n", 1)[1].splitlines()
    return dict(re.split(r"\s{2,}", row.strip(), maxsplit=1) for row in rows if row.strip())


def error_line(stderr: str) -> str:
    """The command's last line on stderr, after its progress bar; no traceback before it."""
    assert "Traceback" not in stderr
    return stderr.splitlines()[-1]


def write_parquet(path: Path, rows: list[dict], **options) -> Path:
    pq.write_table(pa.table({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows]}), path, **options)
    return path


# ---------------------------------------------------------------------------------------- compressed files


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".zst"])
def test_a_cut_compressed_file_keeps_every_line_before_the_cut(tmp_path, capsys, jsonl, suffix):
    packed = COMPRESS[suffix](jsonl)
    cut = tmp_path / f"cut.jsonl{suffix}"
    cut.write_bytes(packed[: len(packed) * 9 // 10])
    prefix = DECOMPRESS_PREFIX[suffix](cut.read_bytes())
    before = tmp_path / "before.jsonl"  # the complete lines the cut left
    before.write_bytes(prefix[: prefix.rfind(b"\n") + 1])
    kept = before.read_bytes().count(b"\n")
    assert 10 < kept < 40

    stats = ReadStats(str(cut))
    *documents, dead_letter = read_documents(str(cut), "auto", stats)
    assert documents == list(read_documents(str(before), "auto", ReadStats("")))
    # The line the cut ends inside is part of the damage, not a bad line of its own.
    assert stats.errors == {"damaged_compressed_file": 1} and dead_letter.reason == "damaged_compressed_file"
    assert not stats.skipped and stats.documents == kept
    assert stats.size == cut.stat().st_size

    assert vocab(tmp_path / "from-cut" / "vocab.txt", cut) == 0
    rows = summary(capsys.readouterr().out)
    assert rows["documents read"] == str(kept)
    assert rows["unreadable records (damaged_compressed_file)"] == "1"
    assert vocab(tmp_path / "from-before" / "vocab.txt", before) == 0
    assert (tmp_path / "from-cut" / "vocab.txt").read_bytes() == (tmp_path / "from-before" / "vocab.txt").read_bytes()


def test_compressed_jsonl_of_every_suffix_is_read_as_jsonl(tmp_path, jsonl):
    plain, packed = [], []
    for name, suffix in [("a.jsonl", ".bz2"), ("b.json", ".gz"), ("c.json", ".zst"), ("d.json", ".bz2")]:
        plain.append(tmp_path / name)
        plain[-1].write_bytes(jsonl)
        packed.append(tmp_path / f"{name}{suffix}")
        packed[-1].write_bytes(COMPRESS[suffix](jsonl))
    for path in packed:
        assert [d.id for d in read_documents(str(path), "auto", ReadStats(""))][:2] == ["alice:0", "alice:1"]
    assert vocab(tmp_path / "plain" / "vocab.txt", *plain) == 0
    assert vocab(tmp_path / "packed" / "vocab.txt", *packed) == 0
    assert (tmp_path / "plain" / "vocab.txt").read_bytes() == (tmp_path / "packed" / "vocab.txt").read_bytes()


# ---------------------------------------------------------------------------------------------------- JSONL


def test_a_byte_order_mark_before_the_first_jsonl_line_costs_nothing(tmp_path, capsys, jsonl):
    (tmp_path / "plain.jsonl").write_bytes(jsonl)
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + jsonl)
    assert vocab(tmp_path / "plain" / "vocab.txt", tmp_path / "plain.jsonl") == 0
    capsys.readouterr()
    assert vocab(tmp_path / "bom" / "vocab.txt", tmp_path / "bom.jsonl") == 0
    rows = summary(capsys.readouterr().out)
    assert rows["documents read"] == "40" and not any(k.startswith("unreadable") for k in rows)
    assert (tmp_path / "plain" / "vocab.txt").read_bytes() == (tmp_path / "bom" / "vocab.txt").read_bytes()


def test_a_huge_one_line_document_is_counted_in_bounded_memory(tmp_path):
    sentence = "alice was beginning to get very tired of sitting by her sister "
    path = tmp_path / "one-line.jsonl"
    path.write_text(json.dumps({"id": "long", "text": sentence * 100_000}) + "\n")  # 6.4 MB, 1.3 M words
    cfg = VocabConfig(inputs=[str(path)], output="", training=TrainingConfig(), holdout_fraction=0)
    tracemalloc.start()
    try:
        counts = count_in_process([(str(path), path.stat().st_size)], cfg)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert counts.train.counts == {word: 100_000 for word in sentence.split()}
    # The line, its text and their copies; not a list of every word in it (~20 times the text).
    assert peak < 8 * path.stat().st_size


@pytest.mark.parametrize("lowercase", [True, False])
def test_text_in_pieces_gives_the_words_of_the_whole(lowercase):
    def words(parts: list[str]) -> Counter:
        batch = ChunkBatch(lowercase)
        for part in parts:
            batch.add(part)
        return batch.drain()

    # Final sigma, characters that cleaning removes beside a space, a word longer than a piece, no space at the end.
    edge = "ΟΔΟΣ ΟΔΟΣ\nΣ ΑΣ' x\u200b y \x1cz\u00ad w \x1c ΆΣ. " + "x" * 30 + " end\n" + "y" * 50
    for size in range(1, len(edge) + 1):
        parts = list(text_pieces(edge, size))
        assert "".join(parts) == edge and words(parts) == words([edge]), size
    book = ALICE.read_text(encoding="utf-8")[:60_000]
    parts = list(text_pieces(book, 1000))
    assert len(parts) > 60 and max(map(len, parts)) <= 1000
    assert "".join(parts) == book and words(parts) == words([book])


# -------------------------------------------------------------------------------------------------- Parquet


@pytest.mark.parametrize(
    "column, shown", [(pa.array([1, 2], pa.int64()), "int64"), (pa.array([b"a b", b"c"], pa.binary()), "binary")]
)
def test_a_parquet_file_that_is_not_a_documents_file_costs_that_file_only(tmp_path, capsys, docs, column, shown):
    path = tmp_path / "documents.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "text": column}), path)
    stats = ReadStats(str(path))
    [dead_letter] = read_documents(str(path), "auto", stats)
    assert (dead_letter.where, dead_letter.reason) == ("file", "not_a_documents_file")
    assert dead_letter.detail == f"its text column holds {shown}, not strings"
    out = tmp_path / "alone" / "vocab.txt"
    assert vocab(out, path) == 2  # with nothing else to read, there is nothing to train on
    assert error_line(capsys.readouterr().err) == (
        f"bertcorpus vocab: error: no words to train on: 0 documents read from {path} (0 for training; "
        "1 unreadable: not_a_documents_file); nothing was written"
    )
    assert not out.exists()
    good = write_parquet(tmp_path / "good.parquet", docs)
    assert vocab(tmp_path / "with-good" / "vocab.txt", path, good) == 0  # the run goes on past a bad file
    rows = summary(capsys.readouterr().out)
    assert rows["documents read"] == str(len(docs)) and rows["unreadable records (not_a_documents_file)"] == "1"


def test_a_damaged_parquet_row_group_costs_its_own_rows(tmp_path, capsys, docs):
    path = write_parquet(tmp_path / "documents.parquet", docs, row_group_size=10)
    chunk = pq.ParquetFile(path).metadata.row_group(1).column(1)  # the second group's text
    data = bytearray(path.read_bytes())
    for i in range(chunk.data_page_offset, chunk.data_page_offset + 32):
        data[i] ^= 0xFF  # the page header
    path.write_bytes(bytes(data))
    rest = write_parquet(tmp_path / "rest.parquet", docs[:10] + docs[20:])

    stats = ReadStats(str(path))
    read = list(read_documents(str(path), "auto", stats))
    assert [d.id for d in read if not isinstance(d, Rejected)] == [d["id"] for d in docs[:10] + docs[20:]]
    [dead_letter] = [d for d in read if isinstance(d, Rejected)]
    assert dead_letter.where == "row group 1" and dead_letter.detail.startswith("rows 10 to 19 lost")
    assert stats.skipped == {"damaged_parquet_row": 10} and stats.errors == {"damaged_parquet_row_group": 1}
    assert vocab(tmp_path / "damaged" / "vocab.txt", path) == 0
    rows = summary(capsys.readouterr().out)
    assert rows["documents read"] == "30" and rows["skipped (damaged_parquet_row)"] == "10"
    assert rows["unreadable records (damaged_parquet_row_group)"] == "1"
    assert vocab(tmp_path / "rest" / "vocab.txt", rest) == 0
    assert (tmp_path / "damaged" / "vocab.txt").read_bytes() == (tmp_path / "rest" / "vocab.txt").read_bytes()


def test_a_parquet_string_that_is_not_utf8_is_replaced_and_counted(tmp_path, capsys, docs):
    # Arrow checks nothing when it reads: a writer that did not check its strings leaves bytes that are not UTF-8.
    texts = [d["text"].encode() for d in docs[:5]] + [b"caf\xe9 au lait, \xff\xfe twice"]
    path = tmp_path / "documents.parquet"
    pq.write_table(
        pa.table({"id": [f"d{i}" for i in range(6)], "text": pa.array(texts, pa.binary()).view(pa.string())}), path
    )
    stats = ReadStats(str(path))
    documents = list(read_documents(str(path), "auto", stats))
    assert documents[-1].text == "caf\ufffd au lait, \ufffd\ufffd twice" and stats.replaced_chars == 3
    assert vocab(tmp_path / "vocab.txt", path) == 0
    rows = summary(capsys.readouterr().out)
    assert rows["documents read"] == "6" and rows["invalid UTF-8"] == "3 characters replaced by U+FFFD"


# ---------------------------------------------------------------------------- both counting paths, all at once


def test_both_counting_paths_treat_damage_alike(tmp_path, capsys, docs, jsonl):
    inputs = tmp_path / "in"
    inputs.mkdir()
    for suffix in COMPRESS:
        packed = COMPRESS[suffix](jsonl)
        (inputs / f"cut.jsonl{suffix}").write_bytes(packed[: len(packed) * 9 // 10])
    (inputs / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + jsonl[:20_000])
    (inputs / "whole.jsonl.bz2").write_bytes(bz2.compress(jsonl))
    path = write_parquet(inputs / "documents.parquet", docs, row_group_size=10)
    chunk = pq.ParquetFile(path).metadata.row_group(3).column(1)
    data = bytearray(path.read_bytes())
    data[chunk.data_page_offset : chunk.data_page_offset + 32] = bytes(32)
    path.write_bytes(bytes(data))

    results = {}
    for name, extra in [("in-process", ()), ("beam", ("--count-with-beam",))]:
        assert vocab(tmp_path / name / "vocab.txt", inputs, extra=extra) == 0
        rows = summary(capsys.readouterr().out)
        results[name] = {
            k: v for k, v in rows.items() if k.startswith(("documents", "unreadable", "skipped", "corpus"))
        }
    assert results["beam"] == results["in-process"]
    assert results["beam"]["unreadable records (damaged_compressed_file)"] == "3"
    assert results["beam"]["skipped (damaged_parquet_row)"] == "10"
    assert (tmp_path / "beam" / "vocab.txt").read_bytes() == (tmp_path / "in-process" / "vocab.txt").read_bytes()


# ----------------------------------------------------------------------------------------- one line, exit 2


def test_input_without_words_names_what_was_skipped(tmp_path, capsys):
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"\x01\x02 binary\n" * 5 + b"not json\n[1, 2]\n" + b'{"id": "x", "text": null}\n')
    zeros = tmp_path / "zeros.jsonl"  # NUL bytes: no text at all, one error for the file
    zeros.write_bytes(bytes(1000))
    nulls = write_parquet(tmp_path / "nulls.parquet", [{"id": "a", "text": None}])
    out = tmp_path / "vocab.txt"
    assert vocab(out, garbage, zeros, nulls) == 2
    assert error_line(capsys.readouterr().err) == (
        f"bertcorpus vocab: error: no words to train on: 0 documents read from {garbage}, {zeros}, {nulls} (0 for "
        "training; 2 skipped as null_text; 7 unreadable: bad_jsonl_line; 1 unreadable: binary_file); nothing was "
        "written"
    )
    assert not out.exists()


def test_an_output_that_is_a_directory_is_named_as_one(tmp_path, capsys, jsonl):
    (tmp_path / "in.jsonl").write_bytes(jsonl)
    out = tmp_path / "out"
    out.mkdir()
    assert vocab(out, tmp_path / "in.jsonl") == 2
    assert capsys.readouterr().err == (
        f"bertcorpus vocab: error: --output {out} is a directory; name the vocab file, e.g. {out}/vocab.txt\n"
    )


def test_a_vocab_size_beyond_the_bound_is_one_line_before_any_reading(tmp_path, jsonl):
    # Before the bound, HF's trainer tried to allocate for every line and aborted the process.
    (tmp_path / "in.jsonl").write_bytes(jsonl)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bertcorpus",
            "vocab",
            "--input",
            str(tmp_path / "in.jsonl"),
            "--output",
            str(tmp_path / "vocab.txt"),
            "--vocab-size",
            "99999999999",
        ],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (run.returncode, run.stderr) == (
        2,
        f"bertcorpus vocab: error: --vocab-size must be at most {MAX_VOCAB_SIZE:,}\n",
    )


def test_reserved_tokens_beyond_the_bound_are_one_line(tmp_path, capsys, jsonl):
    (tmp_path / "in.jsonl").write_bytes(jsonl)
    assert vocab(tmp_path / "vocab.txt", tmp_path / "in.jsonl", extra=("--reserved-tokens", "20000000")) == 2
    assert capsys.readouterr().err == f"bertcorpus vocab: error: --reserved-tokens must be at most {MAX_VOCAB_SIZE:,}\n"


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux's /proc/self/mem")
def test_a_file_that_fails_to_read_is_named(tmp_path, capsys):
    # Reading /proc/self/mem from its start fails with an I/O error, as a bad disk's sector does.
    assert vocab(tmp_path / "vocab.txt", "/proc/self/mem", extra=("--input-format", "jsonl")) == 2
    assert error_line(capsys.readouterr().err) == "bertcorpus vocab: error: /proc/self/mem: Input/output error"
