"""The whole `extract-wiki` job on the real samples: exact counts, the dead letter, multistream ranges read by two
worker processes, byte-identical reruns, exit codes, the Dataflow dry run, and documents that `create` reads."""

from __future__ import annotations

import bz2
import hashlib
import json
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bertcorpus.transforms.seeding import stable_hash

from conftest import DATAFLOW_OFFLINE, VOCAB, assert_same_extraction, file_digests, run_cli
from wiki_fixtures import (
    BGWIKI_UTF16,
    ENWIKI_2014,
    ENWIKI_SMALL,
    ENWIKI_TABLES,
    VIWIKI,
    build_multistream,
    flip_bytes,
    read_xml,
)

LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
TWO_PROCESSES = ["--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2"]
RESIDUE = ("{{", "}}", "[[", "]]", "<ref", "{|", "|}", "==", "'''", "&nbsp;")


def extract(out: Path, *inputs, options=LOCAL, expect: int = 0, extra=()) -> dict:
    code = run_cli("extract-wiki", "--input", *inputs, "--output", out, *extra, *options)
    assert code == expect
    return json.loads((out / "manifest.json").read_text())


def documents(out: Path) -> list[dict]:
    return [row for f in sorted(out.glob("documents-*.parquet")) for row in pq.read_table(f).to_pylist()]


def errors(out: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(out.glob("errors-*.jsonl")) for line in f.read_text().splitlines()]


def assert_accounted(manifest: dict, out: Path) -> None:
    docs = manifest["documents"]
    assert docs["read"] == docs["kept"] + sum(docs["skipped"].values()) + docs["errors"]
    files = manifest["outputs"]["documents"]
    assert [f["path"] for f in files] == [f.name for f in sorted(out.glob("documents-*.parquet"))]
    assert sum(f["records"] for f in files) == docs["kept"] == len(documents(out))
    for f in files + manifest["outputs"]["errors"]:
        assert f["sha256"] == hashlib.sha256((out / f["path"]).read_bytes()).hexdigest()
    assert len(errors(out)) == docs["errors"]
    assert not (out / ".staging").exists()


@pytest.fixture(scope="module")
def enwiki(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("enwiki")
    extract(out, ENWIKI_2014, extra=["--num-shards", "3"])
    return out


def test_enwiki_2014_counts_reconcile_exactly(enwiki):
    manifest = json.loads((enwiki / "manifest.json").read_text())
    assert manifest["documents"] == {
        "read": 362,
        "kept": 198,
        "errors": 1,
        "errors_by_reason": {"truncated": 1},
        # with the text of the templates that carry words of a sentence ({{convert}}, {{lang}}, ...): 4,560,446 without
        "characters": 4_570_849,
        "languages": {"en": {"documents": 198, "characters": 4_570_849}},  # from the dump's own header
        "skipped": {
            "non_article_namespace": 1,
            "redirect": 145,
            "disambiguation": 12,
            "too_short": 5,
            "deleted_text": 0,
            "duplicate_id": 0,
        },
    }
    assert_accounted(manifest, enwiki)
    for shard, entry in enumerate(manifest["outputs"]["documents"]):  # a document's shard is a hash of its id
        ids = [row["id"] for row in pq.read_table(enwiki / entry["path"], columns=["id"]).to_pylist()]
        assert len(ids) == entry["records"] > 50 and {stable_hash(i) % 3 for i in ids} == {shard}
    assert manifest["inputs"] == [
        {
            "path": str(ENWIKI_2014),
            "size": ENWIKI_2014.stat().st_size,
            "sha256": hashlib.sha256(ENWIKI_2014.read_bytes()).hexdigest(),
            "wiki": "enwiki",  # from the dump's header, as the language is
            "language": "en",
        }
    ]
    assert manifest["job"] == "extract-wiki" and manifest["config"]["min_chars"] == 100


def test_the_truncation_is_in_the_dead_letter(enwiki):
    assert errors(enwiki) == [
        {
            "input": str(ENWIKI_2014),
            "where": f"byte {len(read_xml(ENWIKI_2014))}",
            "reason": "truncated",
            "detail": "input ends before </mediawiki> (after page 1010)",
        }
    ]


def test_documents_schema_ids_order_and_urls(enwiki):
    table = pq.read_table(enwiki / "documents-00000-of-00003.parquet")
    assert [(f.name, str(f.type), f.nullable) for f in table.schema] == [
        ("id", "string", False),
        ("source", "string", False),
        ("title", "string", True),
        ("text", "string", False),
        ("url", "string", True),
        ("language", "string", False),
        ("language_confidence", "float", True),
    ]
    rows = table.to_pylist()
    assert {(r["language"], r["language_confidence"]) for r in rows} == {("en", None)}  # the dump's, not detected
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows)
    docs = {d["id"]: d for d in documents(enwiki)}
    anarchism = docs["enwiki:12"]
    assert (anarchism["title"], anarchism["source"]) == ("Anarchism", "wikipedia")
    assert anarchism["url"] == "http://en.wikipedia.org/wiki/Anarchism"
    assert anarchism["text"].startswith("Anarchism is a political philosophy")
    assert "\n\n" in anarchism["text"] and "\n\n\n" not in anarchism["text"]
    assert "enwiki:10" not in docs  # a redirect


def test_table_heavy_and_small_samples_with_a_duplicated_file(tmp_path):
    copy = tmp_path / "in" / "enwiki-copy.xml.bz2"
    copy.parent.mkdir()
    shutil.copy(ENWIKI_SMALL, copy)
    out = tmp_path / "out"
    manifest = extract(out, ENWIKI_TABLES, ENWIKI_SMALL, copy)
    assert manifest["documents"]["read"] == 11 and manifest["documents"]["kept"] == 7
    assert manifest["documents"]["skipped"]["redirect"] == 2
    assert manifest["documents"]["skipped"]["duplicate_id"] == 2
    assert_accounted(manifest, out)
    docs = {d["id"]: d for d in documents(out)}
    # The table sample has no <siteinfo>: its wiki comes from the file name, and there is no URL.
    assert docs["enwiki:9391"]["title"] == "Economy of Estonia" and docs["enwiki:9391"]["url"] is None
    assert docs["enwiki:302109"]["url"] == "http://en.wikipedia.org/wiki/Accessibility"
    assert len(manifest["inputs"]) == 3 and all("sha256" in i for i in manifest["inputs"])


def test_utf16_bulgarian_sample(tmp_path):
    manifest = extract(tmp_path, BGWIKI_UTF16)
    assert manifest["documents"]["kept"] == 1 and manifest["documents"]["skipped"]["non_article_namespace"] == 2
    [doc] = documents(tmp_path)
    assert doc["id"] == "bgwiki:558" and doc["title"] == "Григориански календар"
    assert (
        doc["url"] == "https://bg.wikipedia.org/wiki/%D0%93%D1%80%D0%B8%D0%B3%D0%BE%D1%80%D0%B8%D0%B0%D0%BD"
        "%D1%81%D0%BA%D0%B8_%D0%BA%D0%B0%D0%BB%D0%B5%D0%BD%D0%B4%D0%B0%D1%80"
    )
    assert "календар" in doc["text"]


def test_truncated_vietnamese_sample_and_the_exit_codes(tmp_path, capsys):
    # 1 error in 11 read is over the default --max-error-rate (1%): exit 1, but the output is written and complete.
    manifest = extract(tmp_path / "default", VIWIKI, expect=1)
    err = capsys.readouterr().err
    assert "over --max-error-rate" in err and "Traceback" not in err
    docs = manifest["documents"]
    assert (docs["read"], docs["kept"], docs["errors"]) == (11, 5, 1)
    assert docs["skipped"]["redirect"] == 3 and docs["skipped"]["too_short"] == 1
    assert_accounted(manifest, tmp_path / "default")
    assert {d["id"] for d in documents(tmp_path / "default")} == {f"viwiki:{i}" for i in (4, 13, 24, 26, 33)}
    assert errors(tmp_path / "default")[0]["reason"] == "truncated"
    extract(tmp_path / "tolerant", VIWIKI, extra=["--max-error-rate", "0.1"])
    extract(tmp_path / "strict", VIWIKI, extra=["--max-error-rate", "0.1", "--strict"], expect=1)
    assert "with --strict" in capsys.readouterr().err


def test_no_markup_residue_in_any_document(enwiki, tmp_path):
    texts = [d["text"] for d in documents(enwiki)]
    extract(tmp_path / "more", ENWIKI_TABLES, ENWIKI_SMALL, BGWIKI_UTF16, VIWIKI, extra=["--max-error-rate", "1"])
    texts += [d["text"] for d in documents(tmp_path / "more")]
    assert len(texts) == 198 + 7 + 1 + 5
    for text in texts:
        assert not [token for token in RESIDUE if token in text]
        assert not re.search(r"^[*#]", text, re.M)


@pytest.fixture(scope="module")
def multistream(tmp_path_factory) -> tuple[Path, Path]:
    return build_multistream(ENWIKI_2014, tmp_path_factory.mktemp("multistream"), pages_per_stream=100)


def test_multistream_ranges_on_two_workers_give_the_same_documents(enwiki, multistream, tmp_path):
    dump, index = multistream
    manifest = extract(
        tmp_path, dump, extra=["--index", index, "--range-mb", "0.5", "--num-shards", "3"], options=TWO_PROCESSES
    )
    assert file_digests(tmp_path, "documents-*") == file_digests(enwiki, "documents-*")
    # The multistream file is complete, so the only difference is the truncation error of the original.
    assert manifest["documents"]["read"] == 361 and manifest["documents"]["errors"] == 0
    [entry] = manifest["inputs"]
    assert entry["byte_ranges"] == 3 and entry["size"] == dump.stat().st_size
    assert entry["index"]["sha256"] == hashlib.sha256(index.read_bytes()).hexdigest()
    data = dump.read_bytes()
    assert entry["sha256_first_and_last_mib"] == hashlib.sha256(data[: 2**20] + data[-(2**20) :]).hexdigest()


def test_byte_identical_in_memory_and_with_two_worker_processes(enwiki, tmp_path):
    manifest = extract(tmp_path, ENWIKI_2014, extra=["--num-shards", "3"], options=TWO_PROCESSES)
    assert_same_extraction(manifest, tmp_path, enwiki)


def test_byte_ranges_are_planned_by_size_and_dealt_in_a_stable_shuffled_order(multistream):
    from bertcorpus.pipeline.extract.wiki_job import MIB, PlanByteRanges, auto_range_bytes

    assert [auto_range_bytes(mb * MIB) // MIB for mb in (10, 64, 200, 3000)] == [1, 1, 3, 32]
    dump, index = multistream
    planned = [out for out in PlanByteRanges(1).process((str(dump), str(index))) if not hasattr(out, "tag")]
    ranges = [(start, end) for _, start, end, _ in planned]
    # each range carries the index's page count of every stream that starts in it
    assert [sum(listed.values()) for _, _, _, listed in sorted(planned, key=lambda r: r[1])] == [0, 100, 100, 100, 61]
    assert len(ranges) == 5 and ranges != sorted(ranges)  # one per stream, not in file order: workers draw a mix
    starts, ends = zip(*sorted(ranges))
    assert starts[0] == 0 and list(starts[1:]) == list(ends[:-1]) and ends[-1] == dump.stat().st_size  # the file
    again = [
        (start, end)
        for _, start, end, _ in (
            out for out in PlanByteRanges(1).process((str(dump), str(index))) if not hasattr(out, "tag")
        )
    ]
    assert again == ranges


def test_a_corrupt_stream_costs_that_stream_only(multistream, tmp_path):
    dump, index = multistream
    starts = sorted({int(line.split(b":")[0]) for line in bz2.decompress(index.read_bytes()).splitlines()})
    damaged = tmp_path / "enwiki-damaged-multistream.xml.bz2"
    damaged.write_bytes(flip_bytes(dump.read_bytes(), (starts[1] + starts[2]) // 2))  # inside the second stream
    # the pages of the stream after the damage are lost: the index counts them, and they are over 1% of the dump
    manifest = extract(tmp_path / "out", damaged, extra=["--index", index, "--range-mb", "0.5"], expect=1)
    [error] = errors(tmp_path / "out")
    assert error["input"] == str(damaged) and error["where"].startswith("bytes 0-")
    assert error["reason"] == "read_error"
    assert f"bad bz2 data in the stream that starts at byte {starts[1]}" in error["detail"]
    docs = manifest["documents"]
    # The second stream keeps the pages of its bz2 blocks before the damage; the other three streams are whole.
    assert docs["errors"] == 1 and 100 + 161 + 1 < docs["read"] < 362
    pages_read = docs["read"] - docs["errors"]
    assert manifest["inputs"][0]["pages_lost"] == {"counted": 361 - pages_read}
    assert f"the index lists 100 pages in it, {pages_read - 261} of them read" in error["detail"]
    assert f"; {361 - pages_read} pages lost (after page " in error["detail"]
    assert_accounted(manifest, tmp_path / "out")


def test_a_malformed_page_in_a_single_stream_dump_costs_that_page_only(enwiki, tmp_path):
    xml = read_xml(ENWIKI_2014)
    page = xml.index(b"<page>", len(xml) // 2)
    title_end = xml.index(b"</title>", page)
    damaged = tmp_path / "enwiki-damaged.xml.bz2"
    damaged.write_bytes(bz2.compress(xml[:title_end] + b"</titel>" + xml[title_end + len(b"</title>") :]))
    manifest = extract(tmp_path / "out", damaged)
    whole = json.loads((enwiki / "manifest.json").read_text())["documents"]
    docs = manifest["documents"]
    assert docs["read"] == whole["read"] and docs["errors"] == 2  # the page, and the sample's missing end tag
    assert docs["kept"] + sum(docs["skipped"].values()) == whole["kept"] + sum(whole["skipped"].values()) - 1
    assert {
        "input": str(damaged),
        "where": f"byte {page}",
        "reason": "xml_error",
        "detail": "page 'Art': mismatched tag (after page 751)",
    } in errors(tmp_path / "out")
    assert_accounted(manifest, tmp_path / "out")


def test_a_corrupt_block_of_a_single_stream_dump_costs_that_block_only(enwiki, tmp_path):
    data = ENWIKI_2014.read_bytes()
    damaged = tmp_path / "enwiki-damaged.xml.bz2"
    damaged.write_bytes(flip_bytes(data, len(data) // 2))
    manifest = extract(tmp_path / "out", damaged, expect=1)  # the pages of the lost block are over 1% of the dump
    docs = manifest["documents"]
    assert docs["errors_by_reason"] == {"read_error": 1, "truncated": 1}
    # one 900 kB block of the sample's 12 holds about 30 of its 361 pages; a plain bz2 reader stopped there (at 186)
    assert 361 - 40 < docs["read"] - docs["errors"] < 361
    lost = manifest["inputs"][0]["pages_lost"]["at_most"]
    assert 361 - (docs["read"] - docs["errors"]) - 1 <= lost <= 60  # the cut page is an error record
    kept = {row["id"] for row in documents(tmp_path / "out")}
    assert kept < {row["id"] for row in documents(enwiki)} and len(kept) > 198 - 20
    assert_accounted(manifest, tmp_path / "out")


def test_a_cut_bz2_keeps_its_complete_pages_and_exits_1_as_the_error_rate_says(tmp_path):
    cut = tmp_path / "enwiki-cut.xml.bz2"
    cut.write_bytes(ENWIKI_2014.read_bytes()[:400_000])
    manifest = extract(tmp_path / "out", cut, expect=1)
    assert manifest["documents"]["read"] == 71 + 1 and manifest["documents"]["kept"] == 8
    [error] = errors(tmp_path / "out")
    assert error["reason"] == "truncated" and "the file ends at byte 400000, inside a bz2 stream" in error["detail"]
    assert error["detail"].endswith(", and what followed the cut is not known (after page 308)")
    assert_accounted(manifest, tmp_path / "out")
    # the rate counts the pages that the part of the cut block that is there can hold (155 kB of bz2, ~530 kB of
    # XML), at the size of the smallest page before it: no page after the cut bounds them by its id
    lost = manifest["inputs"][0]["pages_lost"]["estimated"]
    assert 40 < lost < 1200
    extract(tmp_path / "tolerant", cut, extra=["--max-error-rate", str((1.01 + lost) / (72 + lost))])


def test_an_index_without_the_first_page_stream_loses_nothing(enwiki, multistream, tmp_path):
    dump, index = multistream
    lines = bz2.decompress(index.read_bytes()).splitlines(keepends=True)
    first_stream = lines[0].split(b":")[0] + b":"
    partial = tmp_path / "partial-index.txt"
    partial.write_bytes(b"".join(line for line in lines if not line.startswith(first_stream)))
    manifest = extract(tmp_path / "out", dump, extra=["--index", partial, "--num-shards", "3"])
    assert file_digests(tmp_path / "out", "documents-*") == file_digests(enwiki, "documents-*")
    assert manifest["documents"]["read"] == 361 and manifest["documents"]["errors"] == 0


def test_a_dump_shorter_than_its_index_keeps_its_pages_and_says_so(multistream, tmp_path):
    dump, index = multistream
    lines = bz2.decompress(index.read_bytes()).splitlines()
    starts = sorted({int(line.split(b":")[0]) for line in lines})
    page_200 = lines[199].split(b":")[1].decode()
    cut = tmp_path / "enwiki-cut-multistream.xml.bz2"
    cut.write_bytes(dump.read_bytes()[: starts[2]])  # the first two page streams, whole
    # 2 errors in 202 is under 1%, but the 161 pages of the streams the index lists beyond the end count too
    manifest = extract(tmp_path / "out", cut, extra=["--index", index], expect=1)
    assert manifest["documents"]["read"] == 200 + 2 and manifest["documents"]["errors_by_reason"] == {"truncated": 2}
    assert manifest["inputs"][0]["pages_lost"] == {"counted": 161}
    assert sorted(e["detail"] for e in errors(tmp_path / "out")) == [
        f"{index} lists 2 bz2 streams at byte {starts[2]} or later, beyond the end of the file: the dump is cut, "
        "or the index is not its own; 161 pages lost",
        f"the dump ends at byte {starts[2]} without </mediawiki>: it is cut; the pages the index lists beyond it are "
        f"counted with the index (after page {page_200})",
    ]
    assert_accounted(manifest, tmp_path / "out")


def test_output_feeds_create(enwiki, tmp_path):
    out = tmp_path / "records"
    assert (
        run_cli(
            "create",
            "--input",
            enwiki / "documents-*.parquet",
            "--vocab",
            VOCAB,
            "--output",
            out,
            "--dupe-factor",
            "1",
            *LOCAL,
        )
        == 0
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["documents"]["read"] == 198
    assert manifest["outputs"]["seq128"]["train"]["instances"] > 1000


def test_dataflow_dry_run_reads_nothing_and_validates_offline(capsys, network_attempts):
    code = run_cli(
        "extract-wiki",
        "--input",
        "gs://bertcorpus-test/enwiki-pages-articles-multistream.xml.bz2",
        "--index",
        "gs://bertcorpus-test/enwiki-pages-articles-multistream-index.txt.bz2",
        "--output",
        "gs://bertcorpus-test/documents",
        *DATAFLOW_OFFLINE,
        "--dry_run=True",
    )
    assert code == 0 and "dry run" in capsys.readouterr().out
    assert network_attempts == []  # no gs:// file was listed or read, and no service asked


def expect_error(capsys, *argv, match: str) -> None:
    assert run_cli("extract-wiki", *argv, *LOCAL) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


def test_bad_input_gives_one_line_errors(multistream, tmp_path, capsys):
    dump, index = multistream
    expect_error(
        capsys, "--input", tmp_path / "none-*.xml.bz2", "--output", tmp_path / "o", match="no input files match"
    )
    expect_error(
        capsys,
        "--input",
        dump,
        ENWIKI_2014,
        "--index",
        index,
        "--output",
        tmp_path / "o",
        match="one index per --input dump",
    )
    not_an_index = tmp_path / "index.txt"
    not_an_index.write_text("this is not an index\n")
    expect_error(
        capsys,
        "--input",
        dump,
        "--index",
        not_an_index,
        "--output",
        tmp_path / "o",
        match="is not a multistream index: line 1",
    )
    cut_index = tmp_path / "cut-index.txt.bz2"
    cut_index.write_bytes(index.read_bytes()[:1000])
    expect_error(
        capsys,
        "--input",
        dump,
        "--index",
        cut_index,
        "--output",
        tmp_path / "o",
        match="is not a multistream index: the file is damaged (OSError: the file ends at byte 1000",
    )
    assert not (tmp_path / "o" / "manifest.json").exists()


def test_a_finished_run_is_not_overwritten_silently(enwiki, tmp_path, capsys):
    out = tmp_path / "out"
    extract(out, ENWIKI_SMALL)
    assert run_cli("extract-wiki", "--input", ENWIKI_SMALL, "--output", out, *LOCAL) == 2
    assert "--overwrite" in capsys.readouterr().err
    (out / "documents-00007-of-00009.parquet").write_bytes(b"stale")
    extract(out, ENWIKI_SMALL, extra=["--overwrite"])
    assert sorted(p.name for p in out.iterdir()) == [
        "documents-00000-of-00001.parquet",
        "errors-00000-of-00001.jsonl",
        "manifest.json",
    ]
