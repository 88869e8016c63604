"""Every job with gs:// inputs and outputs, through Beam's own GcsFileSystem against a real GCS JSON API server on
the loopback (tests/gcs_server.py): the same bytes as from local paths, sizes from the objects' metadata, staging
cleared by prefix, and one-line errors for outputs that cannot be written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA, SAMPLE_TEXT, VOCAB, file_digests, run_cli
from gcs_server import assert_same_output
from wiki_fixtures import ENWIKI_TABLES, build_multistream

ROOT = Path(__file__).resolve().parent.parent
LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
BOOKS = DATA / "books"


# ------------------------------------------------------------------------------------------------ create


def create_args(inputs: list, out, *extra) -> list:
    return ["create", "--input", *inputs, "--vocab", VOCAB, "--output", out, "--dupe-factor", "5", *extra, *LOCAL]


@pytest.fixture(scope="module")
def corpus(gcs, books_jsonl, tmp_path_factory) -> dict:
    """The real books and the reference sample, in one local directory and under one gs:// prefix."""
    local = tmp_path_factory.mktemp("corpus")
    for source in (books_jsonl, SAMPLE_TEXT):
        (local / source.name).write_bytes(source.read_bytes())
    remote = gcs.url("corpus")
    for f in sorted(local.iterdir()):
        gcs.upload(f, f"{remote}/{f.name}")
    return {"local": local, "remote": remote}


@pytest.fixture(scope="module")
def local_create(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("create") / "out"
    assert run_cli(*create_args([corpus["local"]], out)) == 0
    return out


def test_create_from_gcs_sizes_from_metadata_and_writes_the_local_runs_bytes(gcs, corpus, local_create):
    url = gcs.url("create", "out")
    assert run_cli(*create_args([corpus["remote"]], url)) == 0
    assert_same_output(gcs, url, local_create, corpus["remote"], corpus["local"])
    # The manifests' configs are the same too: buckets and shards sized from the objects' metadata as from the
    # local files'. Sized as an empty input (256 buckets of a few KB), the random-next share came out near 0.12.
    manifest = json.loads((local_create / "manifest.json").read_text())
    assert manifest["outputs"]["seq128"]["train"]["random_next_share"] == pytest.approx(0.5, abs=0.01)


def kill_when(args: list, ready, timeout: float = 120) -> None:
    """Run `bertcorpus` with args in its own process group and SIGKILL the group as soon as ready() is true."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bertcorpus", *map(str, args)],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + timeout
    try:
        while not ready():
            assert proc.poll() is None, "the run finished before the kill point was reached"
            assert time.time() < deadline, "kill point never reached"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_killed_run_on_gcs_then_a_rerun_leaves_no_stale_object(gcs, corpus):
    url, clean = gcs.url("killed", "out"), gcs.url("killed", "clean")
    inputs = [corpus["remote"]]
    # A finished run with 6 train shards; a rerun over it, killed while it writes two configs' shards into the
    # staging area...
    assert run_cli(*create_args(inputs, url, "--num-shards", "6")) == 0
    kill_when(
        create_args(inputs, url, "--overwrite", "--num-shards", "6", "--seq-configs", "128:20,512:80"),
        lambda: any(name.endswith(".tfrecord") for name in gcs.objects(f"{url}/.staging")),
    )
    assert "manifest.json" not in gcs.objects(url)  # the old shards no longer claim to be a finished run
    # ... then a run with one config and 4 shards: nothing of the earlier runs may stay, staged or published.
    assert run_cli(*create_args(inputs, url, "--overwrite", "--num-shards", "4")) == 0
    assert run_cli(*create_args(inputs, clean, "--num-shards", "4")) == 0
    rerun, fresh = gcs.objects(url), gcs.objects(clean)
    assert not [name for name in rerun if name.startswith(".staging/")]
    assert {k: v for k, v in rerun.items() if k != "manifest.json"} == {
        k: v for k, v in fresh.items() if k != "manifest.json"
    }


def test_clearing_the_staging_area_keeps_to_the_outputs_prefix(gcs):
    from bertcorpus.pipeline.sinks import output

    base = gcs.url("prefixes")
    for name in (
        "out/.staging/a/piece.bin",
        "out/.staging/b.bin",
        "out/.staging-other/keep.bin",
        "out2/.staging/keep.bin",
        "out/seq128/keep.tfrecord",
    ):
        with output.FileSystems.create(f"{base}/{name}") as f:
            f.write(b"x")
    output.discard_staging(f"{base}/out")
    assert sorted(gcs.objects(base)) == [
        "out/.staging-other/keep.bin",
        "out/seq128/keep.tfrecord",
        "out2/.staging/keep.bin",
    ]


def test_remote_directories_and_duplicate_names_are_matched_once(gcs, corpus):
    from bertcorpus.pipeline.inputs.discovery import find_inputs
    from bertcorpus.pipeline.inputs.formats import InputError

    remote = corpus["remote"]
    sizes = {f.name: f.stat().st_size for f in corpus["local"].iterdir()}
    expected = sorted((f"{remote}/{name}", size) for name, size in sizes.items())
    for patterns in ([remote], [remote + "/"], [remote + "/*"], [remote, remote + "/*.jsonl"]):
        assert find_inputs(patterns).files == expected
    with pytest.raises(InputError, match="no input files match"):
        find_inputs([gcs.url("nothing-here")])


# ------------------------------------------------------------------------------------------------ errors


def test_output_that_cannot_be_written_is_one_line(gcs, corpus, tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    cases = [
        (a_file, f"cannot write to {a_file}: it is a file, not a directory"),
        (a_file / "out", f"cannot write to {a_file / 'out'}: Not a directory"),
        ("gs://no-such-bucket-here/out", "cannot write to gs://no-such-bucket-here/out: HTTP 404 Not Found"),
    ]
    for out, message in cases:
        assert run_cli(*create_args([corpus["local"]], out)) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"bertcorpus create: error: {message}") and "\n" not in err
    # vocab finds out before it counts a word
    for out, message in [
        (a_file / "vocab.txt", f"cannot write to {a_file / 'vocab.txt'}: Not a directory"),
        (
            "gs://no-such-bucket-here/vocab.txt",
            "cannot write to gs://no-such-bucket-here/vocab.txt: HTTP 404 Not Found",
        ),
    ]:
        assert run_cli("vocab", "--input", corpus["local"], "--output", out) == 2
        captured = capsys.readouterr()
        assert captured.err.strip().startswith(f"bertcorpus vocab: error: {message}") and "counting" not in captured.err


def test_storage_that_cannot_be_reached_is_one_line_before_the_clients_retries(tmp_path):
    from gcs_server import client_environment, free_port, write_credentials

    # Nothing listens on the port: the client would retry its connection for two minutes, then say it timed out.
    port = free_port()
    env = {**os.environ, **client_environment(port, write_credentials(tmp_path / "credentials.json"))}
    bertcorpus = Path(sys.executable).with_name("bertcorpus")
    for words in (
        create_args(["gs://bertcorpus-test/corpus/*.txt"], tmp_path / "out"),
        ["vocab", "--input", "gs://bertcorpus-test/corpus/", "--output", tmp_path / "vocab.txt"],
    ):
        done = subprocess.run([bertcorpus, *map(str, words)], env=env, capture_output=True, text=True)
        pattern = words[2]
        assert done.returncode == 2 and done.stderr.strip().splitlines() == [
            f"bertcorpus {words[0]}: error: cannot list {pattern}: 127.0.0.1:{port} cannot be reached "
            "(Connection refused)"
        ], done.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "vocab.txt").exists()


# ------------------------------------------------------------------------------------------------ extraction


def test_extract_wiki_byte_ranges_on_gcs_match_the_local_run(gcs, tmp_path):
    dump, index = build_multistream(ENWIKI_TABLES, tmp_path, pages_per_stream=1)
    remote = gcs.url("wiki")
    args = ["--range-mb", "0.02", "--num-shards", "2", *LOCAL]
    local = tmp_path / "local"
    assert run_cli("extract-wiki", "--input", dump, "--index", index, "--output", local, *args) == 0
    assert (
        run_cli(
            "extract-wiki",
            "--input",
            gcs.upload(dump, f"{remote}/in/{dump.name}"),
            "--index",
            gcs.upload(index, f"{remote}/in/{index.name}"),
            "--output",
            f"{remote}/out",
            *args,
        )
        == 0
    )
    assert json.loads((local / "manifest.json").read_text())["inputs"][0]["byte_ranges"] > 1
    assert_same_output(gcs, f"{remote}/out", local, f"{remote}/in", tmp_path)


def test_extract_books_from_a_gcs_directory_matches_the_local_run(gcs, tmp_path):
    remote = gcs.url("books")
    for f in sorted(BOOKS.rglob("*")):
        if f.is_file():
            gcs.upload(f, f"{remote}/in/{f.relative_to(BOOKS)}")
    local = tmp_path / "local"
    assert run_cli("extract-books", "--input", BOOKS, "--output", local, "--num-shards", "2", *LOCAL) == 0
    assert (
        run_cli("extract-books", "--input", f"{remote}/in", "--output", f"{remote}/out", "--num-shards", "2", *LOCAL)
        == 0
    )
    assert_same_output(gcs, f"{remote}/out", local, f"{remote}/in", BOOKS)
    assert len(file_digests(local, "documents-*")) == 2
    # The output folder, named as input, stands for its documents files, as a local one does.
    from bertcorpus.pipeline.inputs.discovery import find_inputs

    listed = json.loads((local / "manifest.json").read_text())["outputs"]["documents"]
    assert find_inputs([f"{remote}/out"]).files == [(f"{remote}/out/{f['path']}", f["bytes"]) for f in listed]


# ------------------------------------------------------------------------------------------------ vocab


@pytest.fixture(scope="module")
def local_vocab(corpus, tmp_path_factory) -> bytes:
    out = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    assert run_cli("vocab", "--input", corpus["local"], "--output", out, "--vocab-size", "3000") == 0
    return out.read_bytes()


@pytest.mark.parametrize("counting", ["in process", "beam"])
def test_vocab_from_and_to_gcs_is_the_local_vocab(gcs, corpus, local_vocab, counting, tmp_path):
    url = gcs.url("vocab", counting.replace(" ", "-"))
    extra = ["--count-with-beam", "--counts-dir", f"{url}/counts", *LOCAL] if counting == "beam" else []
    assert (
        run_cli("vocab", "--input", corpus["remote"], "--output", f"{url}/vocab.txt", "--vocab-size", "3000", *extra)
        == 0
    )
    assert gcs.download(f"{url}/vocab.txt", tmp_path / "vocab.txt").read_bytes() == local_vocab
    assert not [name for name in gcs.objects(url) if name.endswith(".tmp") or "beam-temp" in name]
