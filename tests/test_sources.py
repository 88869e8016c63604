"""Input readers: a large text or JSONL file read in byte spans yields exactly the documents of the whole file."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from bertcorpus.pipeline.inputs import reads
from bertcorpus.pipeline.inputs.formats import ReadStats, SourceDocument
from bertcorpus.pipeline.inputs.reads import merge_file_stats, plan_reads, read_documents
from bertcorpus.transforms.document_pieces import sentence_pieces, text_pieces

from conftest import BOOKS, SAMPLE_TEXT, VOCAB, book_sections, run_cli


def text_corpus(path: Path) -> Path:
    """Reference-format text from the real samples, with the awkward cases a span boundary can fall into: runs of
    blank and whitespace-only lines (Unicode whitespace too), invalid UTF-8, CRLF endings, a 10,000-word line, and
    no blank line at the end."""
    books = [" ".join(p.split()) for book in BOOKS for p in book.read_text(encoding="utf-8").split("\n\n")]
    parts = [SAMPLE_TEXT.read_bytes(), b"\n\n\n   \n\t\n"]
    for i in range(0, 400, 4):
        parts.append("\n".join(s for s in books[i : i + 4] if s).encode() + b"\n\n")
    parts += [
        b"Bad bytes \xff\xfe here.\r\nAnd \xc3\x28 there.\r\n\r\n",
        "\u3000\n\x85\n".encode(),
        b"\n",
        " ".join(["word"] * 10_000).encode() + b"\nAfter the long one.\n",
        b"\n\n\nLast document, no blank line after it.",
    ]
    path.write_bytes(b"".join(parts))
    return path


def jsonl_corpus(path: Path) -> Path:
    lines = [json.dumps({"id": doc_id, "text": text}).encode() for doc_id, text in book_sections(2000)]
    lines[3] = json.dumps({"text": "No id: the file stem and the line's offset stand in."}).encode()
    lines[5] = b"{not json"
    lines[7] = b'{"id": "bad", "text": "bytes \xff here"}'
    lines[9] = b"   "
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def read_all(path: Path, tasks, **options) -> tuple[list[tuple], list[dict]]:
    """(id, text, sentences) of every document, and a dead letter (where, reason) for every rejected record, in
    file order; the per-span stats. `options` go to read_documents (cap)."""
    docs, stats = [], []
    for _, start, stop in tasks:
        part = ReadStats(str(path))
        docs += [
            (d.id, d.text, d.sentences) if isinstance(d, SourceDocument) else (d.where, d.reason)
            for d in read_documents(str(path), "auto", part, start, stop, **options)
        ]
        stats.append(
            {
                "path": part.path,
                "size": part.size,
                "sha256": part.sha256,
                "documents": part.documents,
                "split": part.split,
                "pieces": part.pieces,
                "replaced_chars": part.replaced_chars,
                "skipped": dict(part.skipped),
            }
        )
    return docs, stats


def random_spans(path: Path, count: int, seed: int) -> list[tuple[str, int, int]]:
    size = path.stat().st_size
    cuts = sorted(random.Random(seed).sample(range(1, size), count - 1))
    bounds = [0, *cuts, size]
    return [(str(path), a, b) for a, b in zip(bounds, bounds[1:])]


@pytest.fixture(scope="module", params=["text", "jsonl"])
def corpus(request, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("spans")
    return text_corpus(folder / "corpus.txt") if request.param == "text" else jsonl_corpus(folder / "corpus.jsonl")


def test_spans_yield_the_documents_and_counts_of_the_whole_file(corpus):
    whole, whole_stats = read_all(corpus, [(str(corpus), 0, -1)])
    assert len(whole) > 50 and whole_stats[0]["replaced_chars"] >= 1
    assert whole_stats[0]["sha256"] == hashlib.sha256(corpus.read_bytes()).hexdigest()
    size = corpus.stat().st_size
    # Spans cut anywhere: inside lines, on newlines, inside blank runs and inside a multi-byte character.
    for seed, count in ((1, 2), (2, 7), (3, 40), (4, 300)):
        docs, stats = read_all(corpus, random_spans(corpus, count, seed))
        assert docs == whole, (seed, count)
        assert merge_file_stats(stats) == merge_file_stats(whole_stats)
    # And on every byte of the first line, and around invalid UTF-8, runs of blank and whitespace-only lines and bad
    # JSON lines.
    data = corpus.read_bytes()
    marks = [1] + [data.find(m) for m in (b"\xff", b"\n\n\n", b"{not json")]
    for mark in filter(lambda m: m > 0, marks):
        for cut in range(max(1, mark - 60), mark + 60):
            docs, _ = read_all(corpus, [(str(corpus), 0, cut), (str(corpus), cut, size)])
            assert docs == whole, cut


def cut_as_a_whole_document_is(docs: list[tuple], cap: int) -> list[tuple]:
    """The documents of a read with no cap, each cut as transforms/document_pieces.py cuts a document held whole."""
    out = []
    for doc in docs:
        if len(doc) == 2:  # a dead letter
            out.append(doc)
            continue
        doc_id, text, sentences = doc
        pieces = list(text_pieces(text, cap)) if sentences is None else list(sentence_pieces(sentences, cap))
        if len(pieces) == 1:
            out.append(doc)
            continue
        for number, piece in enumerate(pieces, 1):
            out.append(
                (f"{doc_id}#part-{number}", None, piece)
                if sentences is not None
                else (f"{doc_id}#part-{number}", piece, None)
            )
    return out


def test_lines_too_long_to_hold_give_the_documents_of_a_whole_read(corpus, monkeypatch, tmp_path):
    """Read with a line limit of 50 bytes, every line of the real corpus but the shortest is read in two passes
    (long_lines.py), and its documents are cut into pieces as they come: the documents, pieces, dead letters and
    counts are those of the corpus read whole and cut as whole documents are, in spans too, and compressed."""
    import zstandard

    from bertcorpus.pipeline.inputs import long_lines

    tasks = [(str(corpus), 0, -1)]
    whole, _ = read_all(corpus, tasks, cap=10**9)
    cap = 300
    expected = cut_as_a_whole_document_is(whole, cap)
    held, held_stats = read_all(corpus, tasks, cap=cap)
    assert held == expected and held_stats[0]["split"] > 10
    assert held_stats[0]["pieces"] == sum(1 for d in expected if "#part-" in d[0])
    compressed = tmp_path / f"{corpus.name}.zst"
    compressed.write_bytes(zstandard.ZstdCompressor().compress(corpus.read_bytes()))
    monkeypatch.setattr(long_lines, "LINE_LIMIT", 50)
    monkeypatch.setattr(long_lines, "SMALL_VALUE", 64)
    streamed, streamed_stats = read_all(corpus, tasks, cap=cap)
    assert streamed == expected
    for key in ("documents", "split", "pieces", "replaced_chars", "skipped", "sha256"):
        assert streamed_stats[0][key] == held_stats[0][key], key
    spans, span_stats = read_all(corpus, random_spans(corpus, 40, 5), cap=cap)
    assert spans == expected and merge_file_stats(span_stats) == merge_file_stats(held_stats)
    assert read_all(compressed, [(str(compressed), 0, -1)], cap=cap)[0] == expected


def test_ids_do_not_depend_on_the_split(corpus):
    whole, _ = read_all(corpus, [(str(corpus), 0, -1)])
    ids = [doc[0] for doc in whole if len(doc) == 3]
    assert len(set(ids)) == len(ids)
    if corpus.suffix == ".txt":
        data = corpus.read_bytes()
        # A text document's id is the stem and the offset of its first line.
        assert ids[0] == "corpus:0"
        offset = int(ids[1].split(":")[1])
        assert data[offset - 1 : offset] == b"\n" and data[offset : offset + 1].strip()
    else:
        assert "corpus:" + str(corpus.read_bytes().index(b'{"text": "No id')) in ids


def test_plan_reads_splits_only_large_uncompressed_text_and_jsonl(monkeypatch):
    monkeypatch.setattr(reads, "auto_range_bytes", lambda size: 1000)
    spans = plan_reads("big.jsonl", 10_500, "auto")
    assert [s[1:] for s in spans][:2] == [(0, 954), (954, 1909)] and spans[-1][2] == 10_500
    assert all(a[2] == b[1] for a, b in zip(spans, spans[1:]))  # contiguous, no byte lost or read twice
    assert len(plan_reads("big.txt", 10_500, "text")) == 11
    for path, fmt in (
        ("big.jsonl.zst", "auto"),
        ("big.txt.gz", "auto"),
        ("docs.parquet", "auto"),
        ("small.txt", "auto"),
    ):
        size = 500 if path == "small.txt" else 10_500
        assert plan_reads(path, size, fmt) == [(path, 0, -1)]


@pytest.mark.parametrize("fmt", ["text", "jsonl"])
def test_create_reads_a_file_in_spans_with_the_same_result(tmp_path, monkeypatch, fmt):
    corpus = text_corpus(tmp_path / "c.txt") if fmt == "text" else jsonl_corpus(tmp_path / "c.jsonl")
    common = [
        "--input",
        corpus,
        "--vocab",
        VOCAB,
        "--dupe-factor",
        "2",
        "--num-buckets",
        "3",
        "--num-shards",
        "2",
        "--direct_running_mode=in_memory",
    ]
    assert run_cli("create", *common, "--output", tmp_path / "whole") == 0
    monkeypatch.setattr(reads, "auto_range_bytes", lambda size: size // 25 + 1)
    assert len(plan_reads(str(corpus), corpus.stat().st_size, "auto")) == 25
    assert run_cli("create", *common, "--output", tmp_path / "spans") == 0
    files = {p.relative_to(tmp_path / "whole"): p.read_bytes() for p in (tmp_path / "whole").rglob("*.tfrecord")}
    assert files and all((tmp_path / "spans" / rel).read_bytes() == data for rel, data in files.items())
    whole, spans = (json.loads((tmp_path / d / "manifest.json").read_text()) for d in ("whole", "spans"))
    assert whole == spans
    assert whole["inputs"][0]["sha256"] == hashlib.sha256(corpus.read_bytes()).hexdigest()


def test_a_damaged_compressed_file_keeps_what_came_before_the_damage_and_is_counted(tmp_path, books_jsonl):
    import bz2
    import gzip

    import zstandard

    lines = books_jsonl.read_bytes().splitlines(keepends=True)
    first, second = b"".join(lines[:20]), b"".join(lines[20:40])
    whole_frame = zstandard.ZstdCompressor().compress(first)
    cut_frame = zstandard.ZstdCompressor().compress(second)
    damaged = {
        "frame-then-cut.jsonl.zst": whole_frame + cut_frame[: len(cut_frame) // 2],
        "cut.jsonl.gz": gzip.compress(first)[:300],
        "not-gzip.jsonl.gz": first,
        "cut.jsonl.bz2": bz2.compress(first)[:300],
    }
    for name, data in damaged.items():
        (tmp_path / name).write_bytes(data)
        stats = ReadStats(name)
        *documents, dead_letter = read_documents(str(tmp_path / name), "auto", stats)
        assert stats.errors == {"damaged_compressed_file": 1} and not stats.skipped, name
        assert (dead_letter.reason, dead_letter.where) == ("damaged_compressed_file", "file")
        assert stats.size == len(data) and stats.sha256  # the whole file is still fingerprinted
        assert all(isinstance(doc, SourceDocument) for doc in documents) and stats.documents == len(documents)
        if name.endswith(".zst"):
            assert len(documents) == 20  # the frame before the cut
    whole = tmp_path / "two-frames.jsonl.zst"
    whole.write_bytes(whole_frame + zstandard.ZstdCompressor().compress(second))
    stats = ReadStats(str(whole))
    assert len(list(read_documents(str(whole), "auto", stats))) == 40 and not stats.errors

    out = tmp_path / "o"
    assert (
        run_cli(
            "create",
            "--input",
            books_jsonl,
            *(tmp_path / n for n in damaged),
            "--vocab",
            VOCAB,
            "--output",
            out,
            "--dupe-factor",
            "1",
            "--max-error-rate",
            "0.5",
        )
        == 0
    )
    documents = json.loads((out / "manifest.json").read_text())["documents"]
    assert documents["errors_by_reason"] == {"damaged_compressed_file": 4}
    assert documents["read"] == documents["kept"] + sum(documents["skipped"].values()) + documents["errors"]
    dead_letters = [json.loads(line) for line in (out / "errors-00000-of-00001.jsonl").read_text().splitlines()]
    assert sorted(d["input"] for d in dead_letters) == sorted(str(tmp_path / n) for n in damaged)


@pytest.mark.parametrize("name", ["empty.jsonl.bz2", "empty.txt.gz", "empty.jsonl.zst", "empty.txt"])
def test_a_file_of_no_bytes_is_empty_whatever_its_suffix(tmp_path, name):
    (tmp_path / name).write_bytes(b"")
    stats = ReadStats(name)
    assert list(read_documents(str(tmp_path / name), "auto", stats)) == []
    assert stats.skipped == {} and stats.size == 0 and stats.sha256 == hashlib.sha256(b"").hexdigest()


def test_a_null_parquet_id_falls_back_to_the_file_and_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "docs.parquet"
    table = pa.table({"id": [None, "kept", None, None], "text": ["first.", "second.", None, "fourth."]})
    pq.write_table(table, path, row_group_size=2)
    stats = ReadStats(str(path))
    ids = [doc.id for doc in read_documents(str(path), "documents", stats)]
    assert ids == ["docs:row0", "kept", "docs:row3"]
    assert stats.skipped == {"null_text": 1}


def test_parquet_language_columns_are_read_by_name(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"id": ["a"], "text": ["first."], "language_confidence": [0.9]}), path)
    stats = ReadStats(str(path))
    (doc,) = read_documents(str(path), "documents", stats)
    assert (doc.language, doc.language_confidence) == (None, 0.9)
    assert stats.unknown_language_tags == 0


def xor_bytes(path: Path, at: int, count: int = 32) -> None:
    """Damage in place: `count` bytes from `at` changed, the file's size kept."""
    data = bytearray(path.read_bytes())
    assert at + count <= len(data)
    data[at : at + count] = bytes(b ^ 0x5A for b in data[at : at + count])
    path.write_bytes(bytes(data))


def test_a_documents_file_damaged_at_its_size_is_never_read_as_other_text(tmp_path, capsys):
    import pyarrow.parquet as pq

    from wiki_fixtures import ENWIKI_2014

    docs = tmp_path / "docs"
    assert run_cli("extract-wiki", "--input", ENWIKI_2014, "--output", docs, "--num-shards", "2") == 0
    listed = {f["path"]: f for f in json.loads((docs / "manifest.json").read_text())["outputs"]["documents"]}
    intact, damaged = (docs / name for name in sorted(listed))
    # In the middle of a page of the text column: pyarrow would decode it as other text.
    text = pq.ParquetFile(damaged).metadata.row_group(0).column(3)
    assert text.path_in_schema == "text"
    start = text.dictionary_page_offset if text.has_dictionary_page else text.data_page_offset
    xor_bytes(damaged, start + text.total_compressed_size // 2)

    # The manifest beside the file lists its sha256: the whole file is one dead letter, its rows counted as lost.
    out = tmp_path / "records"
    argv = ["create", "--input", docs, "--vocab", VOCAB, "--output", out, "--dupe-factor", "1"]
    assert run_cli(*argv, "--max-error-rate", "1") == 0
    documents = json.loads((out / "manifest.json").read_text())["documents"]
    assert documents["errors_by_reason"] == {"changed_documents_file": 1}
    assert documents["skipped"]["damaged_parquet_row"] == listed[damaged.name]["records"]
    assert documents["read"] - documents["errors"] - sum(documents["skipped"].values()) == documents["kept"]
    assert documents["kept"] == listed[intact.name]["records"]
    [dead_letter] = [json.loads(line) for line in (out / "errors-00000-of-00001.jsonl").read_text().splitlines()]
    assert dead_letter["input"] == str(damaged) and dead_letter["where"] == "file"
    assert dead_letter["detail"].startswith(f"its sha256 is not the one {docs / 'manifest.json'} lists for it")

    # Without a manifest, the page's checksum: its row group is the dead letter, never other text.
    alone = tmp_path / "alone" / damaged.name
    alone.parent.mkdir()
    alone.write_bytes(damaged.read_bytes())
    stats = ReadStats(str(alone))
    [dead_letter] = read_documents(str(alone), "auto", stats)
    assert (dead_letter.where, dead_letter.reason) == ("row group 0", "damaged_parquet_row_group")
    assert "CRC checksum verification failed" in dead_letter.detail
    assert stats.skipped == {"damaged_parquet_row": listed[damaged.name]["records"]}

    # stats reads the documents through the same checksums.
    capsys.readouterr()
    assert run_cli("stats", docs) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{damaged} cannot be read: " in err[0] and "CRC checksum verification failed" in err[0]
