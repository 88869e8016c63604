"""The shuffles that carry a job's bytes (pipeline/engines/local_shuffle.py): a GroupByKey on every runner, and through
spill files on this machine, chosen in one place (runners.local_shuffle) with the same records either way."""

from __future__ import annotations

import contextlib
import errno
import json
import tempfile
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from bertcorpus.pipeline.engines import runners
from bertcorpus.pipeline.engines.local_shuffle import (
    GroupLargeValues,
    SpilledGroupByKey,
    SpillValues,
    read_spilled,
    remove_abandoned,
    spill_directory,
)
from bertcorpus.pipeline.engines.run_and_wait import step_names

from conftest import BOOKS, SAMPLE_TEXT, VOCAB, file_digests, run_cli

LOCAL = ["--runner=DirectRunner"]
# What Beam shuffles (tag, text) values with, and so what their spill files hold.
CODER = beam.coders.registry.get_coder(beam.typehints.Tuple[int, bytes])


def keyed_text() -> list[tuple[str, tuple[int, bytes]]]:
    """Real text in values of every size: paragraphs of the sample, whole books, and an empty value."""
    paragraphs = SAMPLE_TEXT.read_bytes().split(b"\n\n")
    values = [(f"paragraph-{i % 3}", (i, p)) for i, p in enumerate(paragraphs)]
    values += [("book", (i, path.read_bytes())) for i, path in enumerate(BOOKS[:2])]
    return values + [("empty", (0, b""))]


def grouped(values) -> list[tuple[str, list]]:
    groups: dict[str, list] = {}
    for key, value in values:
        groups.setdefault(key, []).append(value)
    return sorted((key, sorted(vs)) for key, vs in groups.items())


def in_order(element):
    key, values = element
    return key, sorted(values)


def test_group_large_values_is_a_group_by_key():
    with TestPipeline(argv=LOCAL) as p:
        out = p | beam.Create(keyed_text()) | GroupLargeValues() | beam.Map(in_order)
        assert_that(out, equal_to(grouped(keyed_text())))


def test_the_spilled_group_gives_what_group_by_key_gives_through_files(tmp_path):
    values = keyed_text()
    with TestPipeline(argv=LOCAL) as p:
        out = p | beam.Create(values) | SpilledGroupByKey(str(tmp_path)) | beam.Map(in_order)
        assert_that(out, equal_to(grouped(values)))
    # The values went through the files, each once, encoded by their coder.
    assert sum(f.stat().st_size for f in tmp_path.glob("*.spill")) == sum(len(CODER.encode(v)) for _, v in values)


def test_spilled_values_are_read_back_by_their_places(tmp_path):
    spill = SpillValues(str(tmp_path), CODER)
    spill.start_bundle()
    places = [place for element in keyed_text()[:6] for place in spill.process(element)]
    spill.finish_bundle()
    assert len({path for _, (path, _, _) in places}) == 1  # one file per bundle
    key, values = read_spilled(("k", [place for _, place in reversed(places)]), CODER)
    assert key == "k" and sorted(values) == sorted(value for _, value in keyed_text()[:6])


def test_a_truncated_spill_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "a.spill"
    path.write_bytes(b"0123456789")
    bytes_coder = beam.coders.BytesCoder()
    assert read_spilled(("k", [(str(path), 2, 5)]), bytes_coder) == ("k", [b"23456"])
    with pytest.raises(OSError, match="ends before byte 14") as raised:
        read_spilled(("k", [(str(path), 4, 10)]), bytes_coder)
    assert raised.value.filename == str(path)


def test_a_spill_directory_that_cannot_be_written_says_what_to_do(tmp_path):
    spill = SpillValues(str(tmp_path / "gone"), CODER)
    spill.start_bundle()
    with pytest.raises(OSError, match=r"point TMPDIR at a disk with room") as raised:
        list(spill.process(("k", (1, b"data"))))
    assert raised.value.errno == errno.ENOENT and str(tmp_path / "gone") in raised.value.filename


def test_a_full_tmpdir_is_one_balanced_line_naming_the_folder(tmp_path):
    """A full disk under the spill files, as the launcher reads it: in process, and as the text of a worker's error
    (which the launcher cuts at the first colon after the cause)."""
    from bertcorpus.pipeline.engines.local_shuffle import _spill_error
    from bertcorpus.pipeline.errors import user_message

    path = str(tmp_path / "bertcorpus-spill-x" / "3.spill")
    full = _spill_error(OSError(errno.ENOSPC, "No space left on device"), path)
    expected = (
        f"{path}: No space left on device (a run on this machine keeps what it shuffles in spill files under "
        f"{tmp_path}, its TMPDIR; point TMPDIR at a disk with room)"
    )
    assert user_message(full) == expected
    in_worker = RuntimeError(f"Traceback ...\nOSError: {full} [while running 'group into buckets/spill']")
    assert user_message(in_worker) == f"{expected} (in step 'group into buckets/spill')"


def step_labels(pipeline) -> set[str]:
    return set(step_names(pipeline))


def create_graph(tmp_path, *beam_args: str):
    from bertcorpus.pipeline.create.config import CreateConfig
    from bertcorpus.pipeline.create.job import CreatePretrainingData
    from bertcorpus.pipeline.create.job_vocab import JobVocab

    cfg = CreateConfig(
        inputs=[str(SAMPLE_TEXT)],
        output=str(tmp_path / "o"),
        vocab=str(VOCAB),
        num_buckets=2,
        num_shards=2,
        eval_fraction=0.0,
    )
    pipeline = beam.Pipeline(options=runners.pipeline_options(list(beam_args)))
    _ = pipeline | CreatePretrainingData(cfg, JobVocab(str(VOCAB)), "sha", [str(SAMPLE_TEXT)])
    return pipeline


def test_only_a_local_run_spills_and_it_spills_the_three_large_shuffles(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    plain = create_graph(tmp_path)
    shuffles = ("group into buckets", "gather negatives", "group into shards")
    assert {f"CreatePretrainingData/{s}/group" for s in shuffles} <= step_labels(plain)
    assert not any("spill" in label for label in step_labels(plain))
    local = create_graph(tmp_path)
    with runners.local_shuffle(local) as directory:
        labels = step_labels(local)
        assert list(tmp_path.glob("bertcorpus-shuffle-*")) == [tmp_path / directory]
    for shuffle in shuffles:
        assert {
            f"CreatePretrainingData/{shuffle}/{step}"
            for step in ("spill values", "group places", "read spilled values")
        } <= labels
    assert not list(tmp_path.glob("bertcorpus-shuffle-*"))  # the directory goes with the run


def test_records_are_the_same_with_and_without_spill_files(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    args = [
        "--input",
        SAMPLE_TEXT,
        *BOOKS[:2],
        "--vocab",
        VOCAB,
        "--dupe-factor",
        "2",
        "--num-buckets",
        "6",
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=2",
    ]
    spilled = tmp_path / "spilled"
    assert run_cli("create", *args, "--output", spilled) == 0
    assert not list(tmp_path.glob("bertcorpus-shuffle-*"))  # nothing left of the spill files
    with monkeypatch.context() as patched:  # the job's GroupByKeys as every other runner runs them
        patched.setattr(runners, "local_shuffle", lambda pipeline: contextlib.nullcontext())
        assert run_cli("create", *args, "--output", tmp_path / "grouped") == 0
    digests = file_digests(spilled, "seq128/*.tfrecord")
    assert len(digests) >= 4 and digests == file_digests(tmp_path / "grouped", "seq128/*.tfrecord")
    manifests = [json.loads((tmp_path / run / "manifest.json").read_text()) for run in ("spilled", "grouped")]
    assert manifests[0] == manifests[1]


def test_a_failed_local_run_leaves_no_spill_files(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    one = tmp_path / "one.txt"
    one.write_text("\n".join(SAMPLE_TEXT.read_text().split("\n\n")[0].splitlines()) + "\n")
    assert run_cli("create", "--input", one, "--vocab", VOCAB, "--output", tmp_path / "o") == 2
    assert not list(tmp_path.glob("bertcorpus-shuffle-*"))


def test_a_later_run_removes_the_spill_directories_of_killed_runs_only(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    killed = tmp_path / "bertcorpus-shuffle-killed"
    killed.mkdir()
    (killed / ".lock").touch()
    (killed / "a.spill").write_bytes(b"spilled")
    unlocked_elsewhere = tmp_path / "bertcorpus-shuffle-other"  # no lock file: not made by a run
    unlocked_elsewhere.mkdir()
    with spill_directory() as running:
        assert not killed.exists()
        with spill_directory() as later:  # a second run while the first goes on
            assert {p.name for p in tmp_path.iterdir()} == {
                Path(running).name,
                Path(later).name,
                unlocked_elsewhere.name,
            }
            assert [p.name for p in Path(later).iterdir()] == [".lock"]
        remove_abandoned(str(tmp_path))
        assert Path(running).is_dir()  # locked by its run
    assert not Path(running).exists() and unlocked_elsewhere.is_dir()
