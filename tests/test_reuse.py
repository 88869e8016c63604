"""Reusing what is up to date: `run` (and `demo`, and a job given --reuse) keeps a finished output whose manifest
records this version, the same config and the same inputs by size and sha256, says so and leaves it untouched; an
input that changed, even at the same size, or any other difference reruns it, naming why; --force reruns it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from bertcorpus.pipeline.sinks import output
from bertcorpus.pipeline.sinks.up_to_date import staleness

from conftest import BOOKS, SAMPLE_TEXT, VOCAB, run_cli


def stamp(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_ino, status.st_mtime_ns


def run_sample(text: Path, out: Path, *extra: str) -> int:
    """The `sample` job of beam_jobs.yaml on `text`, into `out`."""
    return run_cli(
        "run",
        "sample",
        "--profile",
        "local-in-memory",
        "--set",
        f"input={text}",
        "--set",
        f"vocab={VOCAB}",
        "--set",
        f"output={out}",
        "--set",
        "dupe-factor=1",
        *extra,
    )


def test_run_keeps_an_up_to_date_output_and_reruns_it_when_its_input_changes(tmp_path, capsys):
    text, out = tmp_path / "sample.txt", tmp_path / "out"
    shutil.copy(SAMPLE_TEXT, text)
    assert run_sample(text, out) == 0
    first = stamp(out / "manifest.json")
    capsys.readouterr()

    assert run_sample(text, out) == 0
    printed = capsys.readouterr().out
    assert f"create: {out} is up to date (same inputs, config and bertcorpus version); kept\n" in printed
    assert "finished in" not in printed and "\ncreate summary\n" in printed  # the summary of the output kept
    assert stamp(out / "manifest.json") == first

    # The same size, one letter changed: only its sha256 tells.
    changed = text.read_bytes().replace(b"the", b"The", 1)
    assert len(changed) == text.stat().st_size
    text.write_bytes(changed)
    assert run_sample(text, out) == 0
    printed = capsys.readouterr().out
    assert f"create: {out} is out of date ({text} changed); running again\n" in printed and "finished in" in printed
    inputs = json.loads((out / "manifest.json").read_text())["inputs"]
    assert [i["sha256"] for i in inputs] == [hashlib.sha256(changed).hexdigest()]

    second = stamp(out / "manifest.json")
    assert run_sample(text, out, "--force") == 0
    assert "up to date" not in capsys.readouterr().out and stamp(out / "manifest.json") != second


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reuse") / "records"
    assert run_cli("create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", out, "--dupe-factor", "1") == 0
    return out


def what_create_would_record(records: Path) -> tuple[dict, list[tuple[str, int]], dict]:
    manifest = json.loads((records / "manifest.json").read_text())
    inputs = [(i["path"], i["size"]) for i in manifest["inputs"]]
    return manifest["config"], inputs, {"vocab.sha256": manifest["vocab"]["sha256"]}


def test_staleness_names_what_differs(records, tmp_path):
    config, inputs, same = what_create_would_record(records)
    manifest = str(records / "manifest.json")
    assert staleness(manifest, "create", config, inputs, same) is None
    assert staleness(manifest, "create", {**config, "dupe_factor": 2}, inputs, same) == (
        "its config differs in dupe_factor"
    )
    assert staleness(manifest, "create", config, inputs, {"vocab.sha256": "0" * 64}) == "its vocab.sha256 differs"
    assert staleness(manifest, "extract-wiki", config, inputs, same).startswith("it was written by create ")
    assert staleness(manifest, "create", config, [*inputs, (str(VOCAB), 1)], same) == "the input files differ"
    assert staleness(str(tmp_path / "manifest.json"), "create", config, inputs, same) == "it holds no finished run"
    # A shard that is gone, or not the size its manifest says.
    copy = tmp_path / "copy"
    shutil.copytree(records, copy)
    shard = next((copy / "seq128").glob("train-*"))
    shard.write_bytes(shard.read_bytes()[:-1])
    assert staleness(str(copy / "manifest.json"), "create", config, inputs, same) == f"{shard} is missing or changed"


def damaged_in_place(path: Path) -> None:
    """A few bytes in the middle of the file changed, at the same size and the same modification time."""
    status = path.stat()
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8] = bytes(b ^ 0xFF for b in data[middle : middle + 8])
    path.write_bytes(bytes(data))
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert path.stat().st_size == status.st_size and path.stat().st_mtime_ns == status.st_mtime_ns


def test_a_documents_file_damaged_in_place_is_no_longer_up_to_date(tmp_path, capsys):
    """Its extraction's manifest still records the sha256 it had: the file itself is read."""
    documents, out = tmp_path / "documents", tmp_path / "records"
    assert run_cli("extract-books", "--input", *BOOKS, "--output", documents) == 0
    create = ["create", "--input", documents, "--vocab", VOCAB, "--output", out, "--dupe-factor", "1", "--reuse"]
    assert run_cli(*create) == 0
    capsys.readouterr()
    assert run_cli(*create) == 0
    assert "is up to date" in capsys.readouterr().out
    (parquet,) = documents.glob("documents-*.parquet")
    damaged_in_place(parquet)
    run_cli(*create)  # the run that follows may well fail on the damaged file: what matters is that it runs
    assert f"create: {out} is out of date ({parquet} changed); running again\n" in capsys.readouterr().out


def test_a_shard_changed_at_its_size_is_no_longer_up_to_date(tmp_path, capsys):
    """run --reuse checks the output's own files by their sha256, not by their sizes alone."""
    text, out = tmp_path / "sample.txt", tmp_path / "out"
    shutil.copy(SAMPLE_TEXT, text)
    assert run_sample(text, out) == 0
    shard = next((out / "seq128").glob("train-*.tfrecord"))
    damaged_in_place(shard)
    capsys.readouterr()
    assert run_sample(text, out) == 0
    assert f"create: {out} is out of date ({shard} changed since the run wrote it); running again\n" in (
        capsys.readouterr().out
    )
    assert hashlib.sha256(shard.read_bytes()).hexdigest() in (out / "manifest.json").read_text()


def test_reuse_replaces_only_an_output_of_its_own_job(tmp_path, capsys):
    """Another job's finished output is no stale run of this one: only --overwrite replaces it."""
    other = tmp_path / "documents"
    output.write_json_atomically(str(other / "manifest.json"), {"job": "extract-wiki", "version": "0"})
    assert run_cli("create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", other, "--reuse") == 2
    assert capsys.readouterr().err == (
        f"bertcorpus create: error: {other} already holds a finished run (manifest.json exists); choose another "
        "--output or pass --overwrite\n"
    )
    assert json.loads((other / "manifest.json").read_text())["job"] == "extract-wiki"
