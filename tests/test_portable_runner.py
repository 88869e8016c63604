"""Every job through Beam's portable Job API (tests/portable_services.py), the path of Flink, Spark and Dataflow's
runner v2, with gs:// outputs on the GCS emulator (tests/gcs_server.py): the bytes of the in-memory run.

The SDK workers are processes the worker pool starts, sharing nothing with the launching process: they read the
vocab and the inputs only as the job carries or names them, and write only through Beam's filesystems.
Beam's own job service runs every job on one SDK worker per environment: it gives --sdk_worker_parallelism and
--direct_num_workers no effect, so one worker process per job is what this path exercises.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import DATA, SAMPLE_TEXT, VOCAB, run_cli
from gcs_server import assert_same_output, comparable, local_files
from portable_services import running_services
from wiki_fixtures import ENWIKI_TABLES, build_multistream

LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
BOOKS = DATA / "books"


@pytest.fixture(scope="module")
def portable(gcs, tmp_path_factory):
    with running_services(tmp_path_factory.mktemp("services"), gcs.environment) as services:
        yield services


def run_both(command: str, args: list, local_out: Path, remote_out: str, portable) -> None:
    """The job in memory into local_out, then through the job service into remote_out; each must succeed."""
    started = portable.workers_started()
    assert run_cli(command, *args, "--output", local_out, *LOCAL) == 0
    assert run_cli(command, *args, "--output", remote_out, *portable.options()) == 0
    assert portable.workers_started() > started  # the job ran in the pool's worker processes


def test_create_from_gcs_through_the_job_service(gcs, portable, books_jsonl, tmp_path):
    remote = gcs.url("portable-create")
    inputs = [gcs.upload(books_jsonl, f"{remote}/in/{books_jsonl.name}"), SAMPLE_TEXT]
    args = ["create", "--input", *inputs, "--vocab", VOCAB, "--seq-configs", "128:20,512:80", "--dupe-factor", "3"]
    run_both(args[0], args[1:], tmp_path / "local", f"{remote}/out", portable)
    assert_same_output(gcs, f"{remote}/out", tmp_path / "local")
    manifest = json.loads((tmp_path / "local" / "manifest.json").read_text())
    assert manifest["outputs"]["seq512"]["train"]["instances"] > 0


def test_extract_wiki_byte_ranges_through_the_job_service(gcs, portable, tmp_path):
    dump, index = build_multistream(ENWIKI_TABLES, tmp_path, pages_per_stream=1)
    remote = gcs.url("portable-wiki")
    run_both(
        "extract-wiki",
        ["--input", dump, "--index", index, "--range-mb", "0.02", "--num-shards", "2"],
        tmp_path / "local",
        f"{remote}/out",
        portable,
    )
    assert_same_output(gcs, f"{remote}/out", tmp_path / "local")


def test_extract_books_through_the_job_service(gcs, portable, tmp_path):
    remote = gcs.url("portable-books")
    run_both("extract-books", ["--input", BOOKS, "--num-shards", "2"], tmp_path / "local", f"{remote}/out", portable)
    assert_same_output(gcs, f"{remote}/out", tmp_path / "local")


def test_vocab_counted_through_the_job_service(gcs, portable, books_jsonl, tmp_path):
    remote = gcs.url("portable-vocab")
    local = tmp_path / "local.txt"
    assert run_cli("vocab", "--input", books_jsonl, "--output", local, "--vocab-size", "3000") == 0
    started = portable.workers_started()
    assert (
        run_cli(
            "vocab",
            "--input",
            books_jsonl,
            "--output",
            tmp_path / "portable" / "vocab.txt",
            "--vocab-size",
            "3000",
            "--count-with-beam",
            "--counts-dir",
            f"{remote}/counts",
            *portable.options(),
        )
        == 0
    )
    assert portable.workers_started() > started
    assert (tmp_path / "portable" / "vocab.txt").read_bytes() == local.read_bytes()


def test_dedup_from_gcs_through_the_job_service(gcs, portable, books_jsonl, tmp_path):
    """Two sources (the books, and a revision of them with case, spacing and word edits) and a SQuAD file holding one
    of their paragraphs, all on GCS: the workers read them again for the candidate pairs and the n-gram index."""
    remote = gcs.url("portable-dedup")
    books = [json.loads(line) for line in books_jsonl.open()]
    revision = tmp_path / "revision.jsonl"
    with revision.open("w") as f:
        for i, doc in enumerate(books):
            paragraphs = doc["text"].split("\n\n")
            if i % 3 == 1:
                paragraphs[0] = paragraphs[0].swapcase() + "  "
            elif i % 3 == 2:
                paragraphs = [
                    " ".join(["also", *p.split(" ")[1:]]) if n % 6 == 0 else p for n, p in enumerate(paragraphs)
                ]
            f.write(json.dumps({"id": doc["id"], "text": "\n\n".join(paragraphs)}) + "\n")
    context = next(p for p in books[5]["text"].split("\n\n") if len(p.split()) > 40)
    squad = tmp_path / "dev-v2.0.json"
    squad.write_text(
        json.dumps({"data": [{"paragraphs": [{"context": context, "qas": [{"id": "q", "question": "?"}]}]}]})
    )
    inputs = [gcs.upload(p, f"{remote}/in/{p.name}") for p in (books_jsonl, revision, squad)]
    args = ["--input", *inputs[:2], "--decontaminate", inputs[2], "--num-shards", "2"]
    run_both("dedup", args, tmp_path / "local", f"{remote}/out", portable)
    local, out = tmp_path / "local", f"{remote}/out"
    manifests = [m for m in local_files(local) if m.endswith("manifest.json")]
    assert {k: v for k, v in gcs.objects(out).items() if k not in manifests} == {
        k: v for k, v in local_files(local).items() if k not in manifests
    }
    for name in manifests:
        remote_manifest = json.loads(gcs.download(f"{out}/{name}", tmp_path / "remote" / name).read_text())
        assert comparable(remote_manifest, out) == comparable(json.loads((local / name).read_text()), local)
    manifest = json.loads((local / "manifest.json").read_text())
    late = manifest["sources"][1]
    assert late["removed"]["exact"] >= len(books) // 3 and late["removed"]["near"] >= len(books) // 4
    assert manifest["benchmarks"][0]["contaminated_examples"] == 1
