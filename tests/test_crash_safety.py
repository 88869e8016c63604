"""Crash-safe reruns of `create`: killed runs leave nothing that looks like output, and a rerun gives the
same bytes as a clean run; side-effecting steps give the same result when a bundle is retried."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import SAMPLE_TEXT, VOCAB, run_cli

ROOT = Path(__file__).resolve().parent.parent


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def create_args(books_jsonl: Path, out: Path) -> list[str]:
    return [
        "create",
        "--input",
        str(books_jsonl),
        str(SAMPLE_TEXT),
        "--vocab",
        str(VOCAB),
        "--output",
        str(out),
        "--seq-configs",
        "128:20,512:80",
        "--dupe-factor",
        "4",
        "--num-shards",
        "6",
        "--num-buckets",
        "4",
    ]


def kill_when(args: list[str], ready, timeout: float = 240) -> None:
    """Start `bertcorpus` with args and SIGKILL its whole process group as soon as ready() is true. The run's
    temporary directory is this process's."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bertcorpus", *args],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": tempfile.gettempdir()},
    )
    deadline = time.time() + timeout
    try:
        while not ready():
            if proc.poll() is not None:
                pytest.fail("the run finished before the kill point was reached")
            if time.time() > deadline:
                pytest.fail("kill point never reached")
            time.sleep(0.002)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory, books_jsonl) -> dict[str, str]:
    out = tmp_path_factory.mktemp("clean") / "out"
    assert run_cli(*create_args(books_jsonl, out)) == 0
    return digest(out)


def looks_complete(out: Path) -> bool:
    return (out / "manifest.json").exists() or any(out.glob("seq*/*.tfrecord"))


@pytest.mark.parametrize("point", ["while writing shards", "before the manifest"])
def test_killed_run_then_rerun_is_byte_identical(tmp_path, books_jsonl, clean_run, point, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = tmp_path / "out"
    staged = out / ".staging"

    def reached() -> bool:
        files = list(staged.rglob("*.tfrecord")) if staged.exists() else []
        return len(files) >= 1 if point == "while writing shards" else len(files) >= 14  # 2 × (6 + 1)

    kill_when(create_args(books_jsonl, out), reached)
    # Nothing outside the staging area, and no manifest: the directory cannot be mistaken for output.
    assert not looks_complete(out)
    [abandoned] = tmp_path.glob("bertcorpus-shuffle-*")  # the killed run's spill files, which it could not remove
    assert any(abandoned.glob("*.spill"))
    assert run_cli(*create_args(books_jsonl, out)) == 0
    assert digest(out) == clean_run
    assert not list(tmp_path.glob("bertcorpus-shuffle-*"))  # the rerun removed them


def test_killed_rerun_over_finished_output_never_leaves_a_stale_manifest(tmp_path, books_jsonl, clean_run, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = tmp_path / "out"
    assert run_cli(*create_args(books_jsonl, out)) == 0
    args = create_args(books_jsonl, out) + ["--overwrite", "--seed", "7"]
    kill_when(args, lambda: (out / ".staging").exists() and any((out / ".staging").rglob("*.tfrecord")))
    # The old manifest went first, so the old shards no longer claim to be a finished run.
    assert not (out / "manifest.json").exists()
    assert run_cli(*create_args(books_jsonl, out), "--overwrite") == 0
    assert digest(out) == clean_run


def test_write_shards_and_publish_are_idempotent_under_retries(tmp_path):
    import numpy as np

    from bertcorpus.pipeline.create.config import CreateConfig
    from bertcorpus.pipeline.create.job_vocab import JobVocab
    from bertcorpus.pipeline.create.publish import Publish
    from bertcorpus.pipeline.create.shard_writing import WriteShards
    from bertcorpus.pipeline.create.values import InstancePiece
    from bertcorpus.transforms.instance_columns import InstanceColumns
    from bertcorpus.transforms.instances import SeqConfig
    from bertcorpus.transforms.tfrecord import iter_tfrecords, parse_example

    out = tmp_path / "out"
    config = CreateConfig(
        inputs=[str(SAMPLE_TEXT)],
        output=str(out),
        vocab=str(VOCAB),
        seq_configs=[SeqConfig(8, 2)],
        num_shards=1,
        num_buckets=1,
        eval_fraction=0.0,
    )
    # Three instances [CLS] x [SEP] y [SEP] whose x tells them apart, with sort keys 3, 1 and 2.
    ids = np.array([[101, x, 102, 2000, 102, 0, 0, 0] for x in (1996, 1997, 1998)])
    instances = InstanceColumns(
        ids,
        np.full(3, 5),
        np.ones(3, int),
        np.array([[1, 0]] * 3),
        ids[:, 1:2].repeat(2, 1),
        np.ones(3, int),
        np.zeros(3, int),
    )
    piece = InstancePiece(5, np.array([3, 1, 2]), np.arange(3), instances)
    staged = out / ".staging" / "seq8" / "train-00000-of-00001.tfrecord"
    element = (("seq8", "train", 0), [piece])
    vocab = JobVocab(str(VOCAB))

    def writer():  # a fresh DoFn each try, as a retried bundle gets, set up as the runner sets it up
        step = WriteShards(config, vocab)
        step.setup()
        return step

    first = list(writer().process(element))
    bytes_once = staged.read_bytes()
    # Sorted by key: the second instance, the third, then the first.
    with open(staged, "rb") as f:
        assert [parse_example(r)["input_ids"][1] for r in iter_tfrecords(f)] == [1997, 1998, 1996]
    assert list(writer().process(element)) == first and staged.read_bytes() == bytes_once

    counts = {"documents_read": 1, "documents_kept": 1, "seq8:train:instances": 3}
    publish = Publish(config, vocab, "sha", {})
    outcome = {"shards": first, "counts": counts, "files": [], "errors": []}
    manifest = list(publish.process(outcome))
    again = list(publish.process(outcome))  # a retried bundle finds the files already moved
    assert manifest == again
    assert (out / "seq8" / "train-00000-of-00001.tfrecord").read_bytes() == bytes_once
    assert json.loads((out / "manifest.json").read_text()) == manifest[0]
