"""The whole `extract-books` job on the real book samples: exact counts, no licence text or mojibake, PG-19 titles,
copies dropped, bad files in the dead letter, compressed and HF bookcorpus inputs, byte-identical output with two
worker processes, the Dataflow dry run, and documents that `create` reads."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import random
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from bertcorpus.pipeline.extract.book_files import book_id, list_inputs, read_metadata
from bertcorpus.transforms.book_cleaning import clean_book
from bertcorpus.transforms.book_decoding import decode_book
from bertcorpus.transforms.book_duplicates import band_keys, lsh_rows, minhash_signature, near_copies
from bertcorpus.transforms.book_lines import read_hf_bookcorpus_lines

from conftest import DATA, DATAFLOW_OFFLINE, VOCAB, assert_same_extraction, run_cli

BOOKS = DATA / "books"
LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
TWO_PROCESSES = ["--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2"]
LICENCE = ("Project Gutenberg", "*** START", "*** END", "Produced by", "gutenberg.org")
MOJIBAKE = ("â€", "Ã", "\ufffd")
ALICE = BOOKS / "gutenberg_utf8" / "11-0.txt"
HOLMES = BOOKS / "gutenberg_utf8" / "1661-0.txt"
FRANKENSTEIN = BOOKS / "gutenberg_utf8" / "84-0.txt"
FRANKENSTEIN_PG = BOOKS / "gutenberg_cp1252_with_header" / "pg84.txt"
GATSBY = BOOKS / "gutenberg_cp1252_with_header" / "pg64317.txt"


def extract(out: Path, *inputs, options=LOCAL, expect: int = 0, extra=()) -> dict:
    assert run_cli("extract-books", "--input", *inputs, "--output", out, *extra, *options) == expect
    return json.loads((out / "manifest.json").read_text())


def documents(out: Path) -> dict[str, dict]:
    return {row["id"]: row for f in sorted(out.glob("documents-*.parquet")) for row in pq.read_table(f).to_pylist()}


def errors(out: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(out.glob("errors-*.jsonl")) for line in f.read_text().splitlines()]


def assert_accounted(manifest: dict, out: Path) -> None:
    docs = manifest["documents"]
    assert docs["read"] == docs["kept"] + sum(docs["skipped"].values()) + docs["errors"]
    assert docs["read"] == len(manifest["inputs"])
    assert sum(f["records"] for f in manifest["outputs"]["documents"]) == docs["kept"] == len(documents(out))
    assert len(errors(out)) == docs["errors"] == sum(docs["errors_by_reason"].values())
    assert not (out / ".staging").exists()


def sentences(text: str) -> list[str]:
    """HF bookcorpus style: one lower-cased sentence per line."""
    return [s.lower() for p in text.split("\n\n") for s in re.split(r"(?<=[.!?])\s+(?=[“A-Z])", p.replace("\n", " "))]


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("books")
    extract(out, BOOKS, extra=["--num-shards", "2"])
    return out


def test_every_sample_is_kept_or_counted(samples):
    manifest = json.loads((samples / "manifest.json").read_text())
    assert manifest["documents"] == {
        "read": 8,
        "kept": 7,
        "errors": 0,
        "errors_by_reason": {},
        "characters": 1_533_690,
        "languages": {"en": {"documents": 7, "characters": 1_533_690}},  # no --language: detected
        "skipped": {"too_short": 0, "duplicate": 0, "near_duplicate": 1, "duplicate_id": 0},
    }
    assert_accounted(manifest, samples)
    assert sorted(documents(samples)) == [
        "books:10006",
        "books:11-0",
        "books:12204",
        "books:1661-0",
        "books:28213",
        "books:84-0",
        "books:pg64317",
    ]
    # DATA.md is not a book; metadata.csv is read for titles, not as a book.
    assert sorted(Path(i["path"]).name for i in manifest["inputs"]) == [
        "10006.txt",
        "11-0.txt",
        "12204.txt",
        "1661-0.txt",
        "28213.txt",
        "84-0.txt",
        "pg64317.txt",
        "pg84.txt",
    ]
    gatsby = next(i for i in manifest["inputs"] if i["path"] == str(GATSBY))
    assert gatsby["sha256"] == hashlib.sha256(GATSBY.read_bytes()).hexdigest()
    assert gatsby["size"] == GATSBY.stat().st_size and gatsby["removed"]["licence_lines"] > 300


def test_every_book_has_a_title_and_a_language_saying_how_it_was_had(samples):
    # The metadata's title, else the PG header's, else the file's name: none is left without one.
    docs = documents(samples)
    assert {i: d["title"] for i, d in docs.items()} == {
        "books:10006": "La Fiammetta by Giovanni Boccaccio",
        "books:11-0": "11-0",
        "books:12204": "Odd Craft Part 4: Bill's Lapse by W.W. Jacobs",
        "books:1661-0": "1661-0",
        "books:28213": "Harper's Young People November 25 1879 by Various",
        "books:84-0": "84-0",
        "books:pg64317": "The Great Gatsby",
    }
    # Without --language, lingua's light models of all its languages find each book's language.
    assert {d["language"] for d in docs.values()} == {"en"} and min(
        d["language_confidence"] for d in docs.values()
    ) > 0.9
    manifest = json.loads((samples / "manifest.json").read_text())
    assert manifest["config"]["language"]["language"] == "detect"
    assert [i["languages"] for i in manifest["inputs"]] == [{"en": "lingua-light"}] * 8


def test_more_shards_than_books_still_writes_every_shard(tmp_path):
    manifest = extract(tmp_path, ALICE, HOLMES, extra=["--num-shards", "6"])
    files = sorted(f.name for f in tmp_path.glob("documents-*.parquet"))
    assert files == [f"documents-{i:05d}-of-00006.parquet" for i in range(6)]
    assert [f["path"] for f in manifest["outputs"]["documents"]] == files
    rows = [pq.read_table(tmp_path / f).num_rows for f in files]
    assert sum(rows) == 2 and rows.count(0) >= 4  # the empty shards are real, readable Parquet files
    assert [f.name for f in tmp_path.glob("errors-*.jsonl")] == ["errors-00000-of-00001.jsonl"]
    assert_accounted(manifest, tmp_path)


def test_no_licence_text_mojibake_or_carriage_returns(samples):
    for doc in documents(samples).values():
        assert doc["source"] == "books" and len(doc["text"]) > 20_000
        assert not [marker for marker in LICENCE + MOJIBAKE if marker in doc["text"]], doc["id"]
        assert "\r" not in doc["text"] and "\n\n\n" not in doc["text"]


def test_cp1252_book_is_decoded(samples):
    gatsby = documents(samples)["books:pg64317"]
    assert gatsby["title"] == "The Great Gatsby"
    assert {"“", "”", "’"} <= set(gatsby["text"])
    manifest = json.loads((samples / "manifest.json").read_text())
    assert {i["path"]: i["encoding"] for i in manifest["inputs"]}[str(GATSBY)] == "cp1252"


def test_pg19_titles_and_urls_come_from_metadata_csv(samples):
    docs = documents(samples)
    assert docs["books:10006"]["title"] == "La Fiammetta by Giovanni Boccaccio"
    assert docs["books:12204"]["title"] == "Odd Craft Part 4: Bill's Lapse by W.W. Jacobs"
    assert docs["books:28213"]["url"] == "http://www.gutenberg.org/ebooks/28213"
    assert docs["books:10006"]["text"].startswith("Youth, beauty, and love")


def test_the_other_edition_of_frankenstein_is_a_near_duplicate(samples):
    docs = documents(samples)
    assert "books:84-0" in docs and "books:pg84" not in docs  # the smaller id survives


def test_copies_and_bad_files(tmp_path, capsys):
    books = tmp_path / "in"
    books.mkdir()
    for path in (ALICE, FRANKENSTEIN, FRANKENSTEIN_PG):
        shutil.copy(path, books / path.name)
    text = ALICE.read_text(encoding="utf-8").replace("\n", "\r\n")
    (books / "alice-copy.txt").write_bytes(b"\xff\xfe" + text.encode("utf-16-le"))
    (books / "empty.txt").write_bytes(b"")
    (books / "cover.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200))
    noise = random.Random(11)  # high bytes that no encoding makes text of
    (books / "high-bytes.txt").write_bytes(bytes(noise.randrange(0x80, 0x100) for _ in range(12_000)))
    (books / "note.txt").write_text("A short note, not a book.\n")
    (books / "cut.txt.gz").write_bytes(gzip.compress(ALICE.read_bytes())[:5000])
    out = tmp_path / "out"
    manifest = extract(out, books, extra=["--near-dup-threshold", "0", "--max-error-rate", "0.5"])
    assert manifest["documents"] == {
        "read": 9,
        "kept": 3,
        "errors": 4,
        "characters": manifest["documents"]["characters"],
        "languages": {"en": {"documents": 3, "characters": manifest["documents"]["characters"]}},
        "errors_by_reason": {"binary": 1, "empty": 1, "read_error": 1, "undecodable": 1},
        "skipped": {"too_short": 1, "duplicate": 1, "near_duplicate": 0, "duplicate_id": 0},
    }
    assert_accounted(manifest, out)
    # Both editions of Frankenstein stay without near-duplicate detection; the UTF-16 copy of Alice goes.
    assert sorted(documents(out)) == ["books:11-0", "books:84-0", "books:pg84"]
    dead = {Path(e["input"]).name: e for e in errors(out)}
    assert {name: e["reason"] for name, e in dead.items()} == {
        "empty.txt": "empty",
        "cover.txt": "binary",
        "high-bytes.txt": "undecodable",
        "cut.txt.gz": "read_error",
    }
    assert "png" in dead["cover.txt"]["detail"] and dead["cut.txt.gz"]["where"] == "file"
    assert "Traceback" not in capsys.readouterr().err
    # Without dedup the copy is written too; --strict fails on any error, the output complete all the same.
    manifest = extract(tmp_path / "strict", books, extra=["--strict", "--no-dedup"], expect=1)
    assert "4 errors with --strict" in capsys.readouterr().err
    assert manifest["documents"]["kept"] == 4 and manifest["config"]["near_dup_threshold"] == 0
    assert_accounted(manifest, tmp_path / "strict")


def test_compressed_and_hf_bookcorpus_inputs(samples, tmp_path):
    books = tmp_path / "in"
    books.mkdir()
    (books / "alice.txt.gz").write_bytes(gzip.compress(ALICE.read_bytes()))
    (books / "holmes.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(HOLMES.read_bytes()))
    (books / "gatsby.txt.bz2").write_bytes(bz2.compress(GATSBY.read_bytes()))
    expected = documents(samples)
    lines = "\n".join(sentences(expected["books:84-0"]["text"])) + "\n"
    (books / "frankenstein-lines.txt").write_text(lines, encoding="utf-8")
    rows = sentences(expected["books:10006"]["text"])
    pq.write_table(pa.table({"text": rows}), books / "fiammetta-lines.parquet")
    out = tmp_path / "out"
    manifest = extract(out, books)
    assert manifest["documents"]["kept"] == 5
    docs = documents(out)
    for name, original in (("alice", "11-0"), ("holmes", "1661-0"), ("gatsby", "pg64317")):
        assert docs[f"books:{name}"]["text"] == expected[f"books:{original}"]["text"]
    assert docs["books:gatsby"]["title"] == "The Great Gatsby"
    # One sentence per line, the file one book: lines regrouped into paragraphs, every sentence kept in order.
    assert docs["books:frankenstein-lines"]["text"] == read_hf_bookcorpus_lines(lines)
    fiammetta = docs["books:fiammetta-lines"]["text"]
    assert fiammetta == read_hf_bookcorpus_lines("\n".join(rows)) and fiammetta.count("\n\n") > 50
    assert " ".join(fiammetta.split("\n\n")) == " ".join(rows)


def test_byte_identical_in_memory_and_with_two_worker_processes(samples, tmp_path):
    manifest = extract(tmp_path, BOOKS, extra=["--num-shards", "2"], options=TWO_PROCESSES)
    assert_same_extraction(manifest, tmp_path, samples)


def test_dataflow_dry_run_reads_nothing_and_validates_offline(capsys, network_attempts):
    code = run_cli(
        "extract-books",
        "--input",
        "gs://bertcorpus-test/books/",
        "gs://bertcorpus-test/pg19/train",
        "--metadata",
        "gs://bertcorpus-test/pg19/metadata.csv",
        "--output",
        "gs://bertcorpus-test/docs",
        *DATAFLOW_OFFLINE,
        "--dry_run=True",
    )
    assert code == 0 and "dry run" in capsys.readouterr().out
    assert network_attempts == []  # no gs:// file was listed or read, and no service asked


def test_output_feeds_create(samples, tmp_path):
    out = tmp_path / "records"
    assert run_cli("create", "--input", samples, "--vocab", VOCAB, "--output", out, "--dupe-factor", "1", *LOCAL) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["documents"]["read"] == manifest["documents"]["kept"] == 7  # not the manifest or errors file
    assert [Path(f["path"]).name for f in manifest["inputs"]] == [
        "documents-00000-of-00002.parquet",
        "documents-00001-of-00002.parquet",
    ]
    assert manifest["outputs"]["seq128"]["train"]["instances"] > 1000


def test_an_output_folder_as_input_stands_for_the_documents_its_manifest_lists(samples, tmp_path):
    from bertcorpus.pipeline.inputs.discovery import find_inputs
    from bertcorpus.pipeline.inputs.formats import InputError

    listed = json.loads((samples / "manifest.json").read_text())["outputs"]["documents"]
    assert find_inputs([str(samples)]).files == [(str(samples / f["path"]), f["bytes"]) for f in listed]
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    for f in samples.glob("*-*"):
        shutil.copy(f, unfinished)
    with pytest.raises(InputError, match="holds documents files but no manifest\\.json"):
        find_inputs([str(unfinished)])
    assert len(find_inputs([str(unfinished / "documents-*")]).files) == 2  # named files are read as they are
    shutil.copy(samples / "manifest.json", unfinished)
    with open(unfinished / "documents-00001-of-00002.parquet", "ab") as f:
        f.write(b"more")
    with pytest.raises(InputError, match="changed after the extraction wrote it"):
        find_inputs([str(unfinished)])
    (unfinished / "documents-00001-of-00002.parquet").unlink()
    with pytest.raises(InputError, match=r"lists documents-00001-of-00002\.parquet, which is not in"):
        find_inputs([str(unfinished)])


def test_bad_arguments_give_one_line_errors(tmp_path, capsys):
    for argv, message in (
        (["--input", tmp_path / "none-*.txt"], "no book files match"),
        (["--input", ALICE, "--metadata", tmp_path / "metadata.csv"], "is not a file"),
        (["--input", ALICE, "--near-dup-threshold", "2"], "between 0 and 1"),
    ):
        assert run_cli("extract-books", *argv, "--output", tmp_path / "o", *LOCAL) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_damaged_input_of_every_kind(tmp_path, capsys):
    books = tmp_path / "in"
    books.mkdir()
    holmes, alice = HOLMES.read_bytes(), ALICE.read_bytes()
    zst = zstandard.ZstdCompressor().compress(holmes)
    damaged = {
        "cut-after-a-block.txt.zst": zst[: len(zst) * 9 // 10],  # the first blocks decompress, the end is gone
        "cut.txt.gz": gzip.compress(holmes)[:20_000],
        "cut.txt.bz2": bz2.compress(holmes)[:20_000],
        "no-bytes.txt.bz2": b"",
        "no-bytes.txt.gz": b"",
        "no-bytes.txt.zst": b"",
        "not-gzip.txt.gz": b"plain text, not gzip " * 50,
        "zip-archive.txt": b"PK\x03\x04" + bytes(26) + alice[:3000],
        "noise.txt": random.Random(7).randbytes(100_000),
        "koi8.txt": ("Война и мир. " * 2000).encode("koi8-r"),  # a legacy encoding: decoded, not rejected
        "high-bytes.txt": bytes(b | 0x80 for b in random.Random(13).randbytes(30_000)),
        "cut.parquet": b"PAR1" + bytes(1000),
        "utf16-without-bom.txt": ALICE.read_text(encoding="utf-8").encode("utf-16-le"),
        "one-line.txt": FRANKENSTEIN.read_text(encoding="utf-8").replace("\n", " ").encode("utf-8") * 4,
        "holmes.txt": holmes,
    }
    for name, data in damaged.items():
        (books / name).write_bytes(data)
    # Old Mac line endings: one CR between rows.
    (books / "metadata.csv").write_bytes(b"_id,title,year,url\rholmes,The Adventures of Sherlock Holmes,1892,\r")
    out = tmp_path / "out"
    manifest = extract(out, books, extra=["--max-error-rate", "1"])
    assert_accounted(manifest, out)
    reasons = {Path(e["input"]).name: (e["reason"], e["detail"]) for e in errors(out)}
    assert {name: reason for name, (reason, _) in reasons.items()} == {
        "cut-after-a-block.txt.zst": "read_error",
        "cut.txt.gz": "read_error",
        "cut.txt.bz2": "read_error",
        "not-gzip.txt.gz": "read_error",
        "no-bytes.txt.bz2": "empty",
        "no-bytes.txt.gz": "empty",
        "no-bytes.txt.zst": "empty",
        "zip-archive.txt": "binary",
        "noise.txt": "binary",
        "high-bytes.txt": "undecodable",
        "cut.parquet": "bad_parquet",
    }
    assert reasons["cut-after-a-block.txt.zst"][1] == "cannot decompress: EOFError: the zstd stream ends inside a frame"
    docs = documents(out)
    assert sorted(docs) == ["books:holmes", "books:koi8", "books:one-line", "books:utf16-without-bom"]
    assert docs["books:koi8"]["text"].startswith("Война и мир. Война и мир.")
    assert docs["books:holmes"]["title"] == "The Adventures of Sherlock Holmes"
    assert docs["books:utf16-without-bom"]["text"] == clean_book(decode_book(alice).text).text
    assert docs["books:one-line"]["text"].count("\n") == 0 and len(docs["books:one-line"]["text"]) > 1_500_000
    assert "Traceback" not in capsys.readouterr().err
    # A metadata.csv the csv module cannot split stops the run before any output is touched, naming the line.
    (books / "metadata.csv").write_bytes(b'_id,title\nholmes,"A title that never ends\n' + b"x" * 200_000)
    assert run_cli("extract-books", "--input", books, "--output", tmp_path / "never", *LOCAL) == 2
    err = capsys.readouterr().err
    assert f"{books / 'metadata.csv'} is not a metadata CSV: line 3: field larger than field limit" in err
    assert "Traceback" not in err and not (tmp_path / "never").exists()


def test_outputs_of_a_run_among_the_books_are_never_read_as_books(tmp_path, capsys):
    books = tmp_path / "books"
    books.mkdir()
    for path in (ALICE, HOLMES, FRANKENSTEIN):
        shutil.copy(path, books / path.name)
    first = extract(tmp_path / "first", books)
    assert first["documents"]["read"] == 3
    # An earlier run's output among the books: documents-*.parquet would read as an HF bookcorpus Parquet book.
    for f in (tmp_path / "first").iterdir():
        shutil.copy(f, books / f.name)
    (books / "stats.json").write_text("{}")
    capsys.readouterr()
    assert extract(tmp_path / "second", books)["documents"] == first["documents"]
    assert "left out 1 file that an earlier run wrote" in capsys.readouterr().err
    # A glob matches manifest.json, errors-*.jsonl and stats.json too.
    assert extract(tmp_path / "third", str(books / "*"))["documents"] == first["documents"]
    # The output may not be the books' directory, nor lie inside it.
    for out in (books, books / "out"):
        assert run_cli("extract-books", "--input", books, "--output", out, *LOCAL) == 2
        assert "write it apart from the inputs" in capsys.readouterr().err
    # Named on its own, an output is refused with one line.
    assert run_cli("extract-books", "--input", books / "manifest.json", "--output", tmp_path / "o", *LOCAL) == 2
    assert "manifest.json is an output of a bertcorpus run, not a book" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- the pure functions


def test_book_ids_and_directory_listing():
    assert [book_id(p) for p in ("a/84-0.txt", "b/pg84.txt.gz", "c/the-name.epub.txt", "d/lines.parquet")] == [
        "books:84-0",
        "books:pg84",
        "books:the-name.epub",
        "books:lines",
    ]
    found, metadata, earlier = list_inputs(str(BOOKS))
    assert len(found) == 8 and not any(p.endswith("DATA.md") for p, _ in found)
    assert metadata == [str(BOOKS / "pg19_format" / "metadata.csv")] and earlier == []
    assert list_inputs(str(BOOKS / "DATA.md"))[0] == [(str(BOOKS / "DATA.md"), (BOOKS / "DATA.md").stat().st_size)]


def test_metadata_with_and_without_a_header():
    rows = read_metadata((BOOKS / "pg19_format" / "metadata.csv").read_bytes())
    assert rows["12204"] == ("Odd Craft Part 4: Bill's Lapse by W.W. Jacobs", "http://www.gutenberg.org/ebooks/12204")
    assert read_metadata(b'_id,short_book_title,publication_date,url\n7,"A, B",1900,\n') == {"7": ("A, B", None)}


def test_lsh_finds_the_edition_and_not_other_books():
    rows = lsh_rows(0.9)
    assert 64 % rows == 0 and 1 - (1 - 0.9**rows) ** (64 // rows) >= 0.99
    signatures = {
        p.name: minhash_signature(clean_book(decode_book(p.read_bytes()).text).text)
        for p in (ALICE, HOLMES, FRANKENSTEIN, FRANKENSTEIN_PG)
    }
    buckets: dict[str, list] = {}
    for name, signature in signatures.items():
        for key in band_keys(signature, rows):
            buckets.setdefault(key, []).append((f"books:{name}", name, signature))
    dropped = {path for members in buckets.values() for path in near_copies(members, 0.9)}
    assert dropped == {"pg84.txt"}
