"""Inputs made to exhaust a reader: a line of a gigabyte and a half in a 46 kB .jsonl.zst, a sparse file of NUL
bytes, a long line shared between span readers, a Parquet page of one huge value. Each is read in a process of its
own, whose peak RSS must stay under 1.5 GB, and each gives its documents as pieces, or one counted dead letter.
The inputs are made here, in tmp_path: nothing large is committed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from process_memory import run_command_measured

from conftest import SAMPLE_TEXT, VOCAB, file_digests, run_cli

RSS_BOUND_MB = 1500
CAP = 4_000_000  # --max-document-mb 4, the default, in characters
# A child that reads every document of a file as create plans its reads, then prints what it read and how much
# it read from its files.
READER = """
import json, sys
from bertcorpus.pipeline.inputs.formats import ReadStats, SourceDocument
from bertcorpus.pipeline.inputs.reads import merge_file_stats, plan_reads, read_documents
from dataclasses import asdict
import os
path, fmt = sys.argv[1], sys.argv[2]
found = {"documents": 0, "characters": 0, "dead_letters": []}
parts = []
for _, start, stop in plan_reads(path, os.path.getsize(path), fmt):
    stats = ReadStats(path)
    for doc in read_documents(path, fmt, stats, start, stop):
        if isinstance(doc, SourceDocument):
            found["documents"] += 1
            found["characters"] += len(doc.text or "") + sum(map(len, doc.sentences or ()))
        else:
            found["dead_letters"].append(doc.record())
    parts.append(asdict(stats))
found["stats"] = merge_file_stats(parts)[0]
found["split"], found["pieces"] = (sum(p.get(key, 0) for p in parts) for key in ("split", "pieces"))
io = dict(line.split(": ") for line in open("/proc/self/io").read().splitlines())
found["bytes_read"] = int(io["rchar"])
print(json.dumps(found))
"""


def in_own_process(argv: list, tmp_path: Path) -> tuple[int, int, str, str]:
    """(exit status, peak RSS in MB, stdout, stderr) of a command run in a process of its own."""
    done = run_command_measured(argv, tmp_path)
    return done.returncode, done.peak_rss_bytes // 2**20, done.stdout, done.stderr


def read_in_own_process(path: Path, fmt: str, tmp_path: Path) -> tuple[dict, int]:
    code, rss, out, err = in_own_process([sys.executable, "-c", READER, path, fmt], tmp_path)
    assert code == 0, err[-3000:]
    return json.loads(out), rss


def test_a_line_of_a_gigabyte_and_a_half_in_46_kb_of_zstd_is_read_in_pieces(tmp_path):
    import zstandard

    bomb = tmp_path / "bomb.jsonl.zst"
    text = 90 * (1 << 24)  # characters of its one long text
    with open(bomb, "wb") as f, zstandard.ZstdCompressor(level=19).stream_writer(f) as z:
        z.write(b'{"id": "bomb", "text": "')
        for _ in range(90):
            z.write(b"a" * (1 << 24))
        z.write(b'"}\n' + json.dumps({"id": "after", "text": "A document after it."}).encode() + b"\n")
    assert bomb.stat().st_size < 100_000
    found, rss = read_in_own_process(bomb, "auto", tmp_path)
    assert rss < RSS_BOUND_MB, f"{rss} MB"
    assert found["stats"]["documents"] == 2 and found["dead_letters"] == []
    assert (found["split"], found["pieces"]) == (1, -(-text // CAP))  # cut at the cap: no space to cut after
    assert found["documents"] == found["pieces"] + 1 and found["characters"] == text + len("A document after it.")


def test_a_sparse_file_of_nul_bytes_is_refused_as_binary_in_one_dead_letter(tmp_path):
    zeros = tmp_path / "zeros.txt"
    with open(zeros, "wb") as f:
        f.truncate(4 << 30)
    out = tmp_path / "out"
    argv = ["create", "--input", zeros, SAMPLE_TEXT, "--input-format", "text", "--vocab", VOCAB, "--output", out]
    bertcorpus = Path(sys.executable).with_name("bertcorpus")
    code, rss, _, err = in_own_process([bertcorpus, *argv, "--runner=DirectRunner"], tmp_path)
    assert rss < RSS_BOUND_MB, f"{rss} MB"
    assert code == 1 and "1 errors in" in err and "Traceback" not in err  # the output is complete, an error is in it
    [dead_letter] = [json.loads(line) for line in (out / "errors-00000-of-00001.jsonl").read_text().splitlines()]
    assert (dead_letter["input"], dead_letter["where"], dead_letter["reason"]) == (str(zeros), "file", "binary_file")
    assert dead_letter["detail"].startswith("NUL bytes in its first 65,536 bytes: binary data, or text in UTF-16")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["documents"]["errors_by_reason"] == {"binary_file": 1}
    [entry] = [i for i in manifest["inputs"] if i["path"] == str(zeros)]
    assert entry["size"] == 4 << 30 and entry["sha256"]  # fingerprinted all the same


def test_a_long_line_shared_between_span_readers_is_read_about_once(tmp_path):
    """64 MB of real words without a newline, read in 64 spans: a reader of a span inside the line finds that no
    line starts in it and stops, instead of reading back to the line's start and on to its end (97 times the file
    was read); the reader of the first span reads the line in two passes, and the file is fingerprinted once."""
    words = " ".join(SAMPLE_TEXT.read_text(encoding="utf-8").split()).encode()
    line = tmp_path / "one-line.txt"
    with open(line, "wb") as f:
        for _ in range(64):
            f.write((words * (-(-(1 << 20) // len(words))))[: 1 << 20])
    size = line.stat().st_size
    found, rss = read_in_own_process(line, "text", tmp_path)
    assert rss < RSS_BOUND_MB
    assert found["bytes_read"] < 6 * size, found["bytes_read"]
    assert found["stats"]["documents"] == 1 and found["split"] == 1 and found["pieces"] == found["documents"] >= 17
    assert found["characters"] == len(line.read_bytes().decode().strip())


def test_a_parquet_page_too_large_to_hold_is_refused_before_it_is_read(tmp_path):
    """One row group of real documents, and one whose single text is 600 MB (a page as large): pyarrow would hold
    it four times over (2.5 GB). Its row group is one dead letter, its row counted; the others are read."""
    path = tmp_path / "documents.parquet"
    writer = f"""
import pyarrow as pa, pyarrow.parquet as pq
texts = open({str(SAMPLE_TEXT)!r}, encoding="utf-8").read().split("\\n\\n")
with pq.ParquetWriter({str(path)!r}, pa.schema([("id", pa.string()), ("text", pa.string())]), compression="zstd") as w:
    w.write_table(pa.table({{"id": [f"sample:{{i}}" for i in range(len(texts))], "text": texts}}))
    w.write_table(pa.table({{"id": ["huge"], "text": ["word " * (120 << 20)]}}))
"""
    subprocess.run([sys.executable, "-c", writer], check=True)
    found, rss = read_in_own_process(path, "documents", tmp_path)
    assert rss < RSS_BOUND_MB, f"{rss} MB"
    [dead_letter] = found["dead_letters"]
    assert (dead_letter["where"], dead_letter["reason"]) == ("row group 1", "oversized_parquet_row_group")
    assert (
        "a page of 629,14" in dead_letter["detail"]
        and "more than the 134,217,728 a reader holds" in dead_letter["detail"]
    )
    paragraphs = len(SAMPLE_TEXT.read_text(encoding="utf-8").split("\n\n"))
    assert found["stats"]["skipped"] == {"oversized_parquet_row": 1} and found["stats"]["documents"] == paragraphs


@pytest.mark.parametrize(
    "name, data",
    [
        ("utf16.txt", "Le texte en UTF-16.\n\nUn autre document.\n".encode("utf-16")),
        ("image.jsonl.gz", None),
        ("zeros.jsonl", bytes(100_000)),
    ],
)
def test_binary_input_is_one_dead_letter_in_every_line_format(tmp_path, name, data):
    import gzip

    from bertcorpus.pipeline.inputs.formats import ReadStats
    from bertcorpus.pipeline.inputs.reads import read_documents

    if data is None:  # a PNG's bytes, compressed as its name says
        data = gzip.compress(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8)
    path = tmp_path / name
    path.write_bytes(data)
    readers = [[(0, -1)]] + [[(0, len(data) // 3), (len(data) // 3, len(data))]] * (not name.endswith(".gz"))
    for spans in readers:
        stats = ReadStats(str(path))
        found = [doc for start, stop in spans for doc in read_documents(str(path), "auto", stats, start, stop)]
        assert [(d.where, d.reason) for d in found] == [("file", "binary_file")], spans
        assert stats.errors == {"binary_file": 1} and stats.documents == 0
        assert stats.size == len(data) and stats.sha256  # the file is fingerprinted all the same


def test_create_reads_long_lines_in_two_passes_into_the_same_records(tmp_path, monkeypatch, books_jsonl):
    """Every line of the real books longer than 2 kB read in two passes, with a cap that cuts their documents
    (5,000 characters): the records are the bytes of a run that holds each line whole."""
    from bertcorpus.pipeline.inputs import long_lines

    flags = ["--vocab", VOCAB, "--dupe-factor", "1", "--max-document-mb", "0.005", "--runner=DirectRunner"]
    flags += ["--direct_running_mode=in_memory"]
    assert run_cli("create", "--input", books_jsonl, SAMPLE_TEXT, "--output", tmp_path / "held", *flags) == 0
    monkeypatch.setattr(long_lines, "LINE_LIMIT", 2048)
    assert run_cli("create", "--input", books_jsonl, SAMPLE_TEXT, "--output", tmp_path / "streamed", *flags) == 0
    held, streamed = (file_digests(tmp_path / d / "seq128", "*.tfrecord") for d in ("held", "streamed"))
    assert held == streamed and len(held) >= 4
    documents = json.loads((tmp_path / "streamed" / "manifest.json").read_text())["documents"]
    assert documents["split"]["documents"] > 10 and documents["split"]["pieces"] > documents["split"]["documents"]
