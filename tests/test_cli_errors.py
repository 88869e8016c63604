"""The command line on mistakes: misspelled flags, unreadable vocab files and records, filesystem errors. Each ends
with one clear line and a non-zero exit, never a traceback, and a flag is never silently ignored."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLE_TEXT, TESTS, VOCAB, exit_status, mounted_tmpfs, run_cli


def _create(out: Path, *extra) -> int:
    return run_cli("create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", out, *extra)


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return err.strip()


# Commands and flags: ours, or Beam's, or an error naming the closest valid one.


def test_a_misspelled_command_is_refused_naming_the_closest(capsys):
    assert exit_status("craete", "--input", SAMPLE_TEXT) == 2
    assert _error_line(capsys) == "bertcorpus: error: unknown command 'craete'; did you mean create?"
    assert exit_status("-v", "xyzzy") == 2
    assert _error_line(capsys) == "bertcorpus: error: unknown command 'xyzzy'; bertcorpus --help lists the commands"


def test_a_misspelled_flag_is_refused_naming_the_closest(tmp_path, capsys):
    assert _create(tmp_path / "out", "--dupe-factr", "1") == 2
    assert _error_line(capsys) == "bertcorpus create: error: unknown flag --dupe-factr; did you mean --dupe-factor?"
    assert not (tmp_path / "out").exists()


def test_a_beam_option_spelled_in_kebab_case_is_refused_naming_beams_spelling(tmp_path, capsys):
    assert _create(tmp_path / "out", "--direct-num-workers=2") == 2
    assert _error_line(capsys) == (
        "bertcorpus create: error: unknown flag --direct-num-workers; did you mean --direct_num_workers?"
    )


def test_a_stray_word_is_refused(tmp_path, capsys):
    assert _create(tmp_path / "out", "seq128") == 2
    assert _error_line(capsys) == "bertcorpus create: error: unexpected argument 'seq128'"


def test_a_command_without_beam_options_names_its_own_closest_flag(tmp_path, capsys):
    assert run_cli("inspect", tmp_path / "x.tfrecord", "--vocab", VOCAB, "--nmu", "2") == 2
    assert _error_line(capsys) == "bertcorpus inspect: error: unknown flag --nmu; did you mean --num?"
    assert run_cli("stats", tmp_path, "--runner", "DirectRunner") == 2
    assert _error_line(capsys) == (
        "bertcorpus stats: error: unknown flag --runner; this command takes no Beam pipeline options"
    )


def test_a_bad_beam_option_value_is_one_line(tmp_path, capsys):
    assert _create(tmp_path / "out", "--direct_running_mode", "many") == 2
    assert _error_line(capsys) == (
        "bertcorpus create: error: argument --direct_running_mode: invalid choice: "
        "'many' (choose from 'in_memory', 'multi_threading', 'multi_processing')"
    )


def test_options_of_the_named_runner_are_known(tmp_path, capsys):
    """RenderRunner's --render_output is registered only once that runner's module is loaded."""
    graph = tmp_path / "create.dot"
    assert (
        _create(tmp_path / "out", "--runner", "apache_beam.runners.render.RenderRunner", "--render_output", graph) == 0
    )
    assert graph.read_text().startswith("digraph")


def test_set_replaces_a_job_flag_in_either_spelling(capsys):
    for spelling in ("dupe_factor", "dupe-factor"):
        assert run_cli("run", "sample", "--print-command", "--set", f"{spelling}=1") == 0
        command = capsys.readouterr().out.split()
        assert [w for w in command if "dupe" in w] == ["--dupe-factor"]
        assert command[command.index("--dupe-factor") + 1] == "1"


def test_a_job_run_with_set_uses_the_value_set(tmp_path, capsys):
    out = tmp_path / "sample"
    assert (
        run_cli(
            "run",
            "sample",
            "--profile",
            "local-in-memory",
            "--set",
            "dupe_factor=1",
            "--set",
            f"input={SAMPLE_TEXT}",
            "--set",
            f"vocab={VOCAB}",
            "--set",
            f"output={out}",
        )
        == 0
    )
    assert json.loads((out / "manifest.json").read_text())["config"]["dupe_factor"] == 1


def test_set_with_a_misspelled_flag_is_refused(tmp_path, capsys):
    assert run_cli("run", "sample", "--set", "dupe_factr=1", "--set", f"output={tmp_path / 'out'}") == 2
    assert _error_line(capsys) == "bertcorpus create: error: unknown flag --dupe_factr; did you mean --dupe-factor?"


# Vocab files and records.


@pytest.fixture
def latin1_vocab(tmp_path) -> Path:
    """The real vocab with one token on line 2,001 written in Latin-1, as an editor might save it."""
    lines = VOCAB.read_bytes().split(b"\n")
    lines[2000] = "café".encode("latin-1")
    path = tmp_path / "vocab-latin1.txt"
    path.write_bytes(b"\n".join(lines))
    return path


def test_a_vocab_that_is_not_utf8_is_refused_with_its_line(tmp_path, capsys, latin1_vocab):
    out = tmp_path / "out"
    assert run_cli("create", "--input", SAMPLE_TEXT, "--vocab", latin1_vocab, "--output", out) == 2
    assert _error_line(capsys) == (
        f"bertcorpus create: error: vocab file {latin1_vocab} is not UTF-8: line 2,001 "
        "has the byte 0xe9 (invalid continuation byte); a vocab file must be UTF-8 text"
    )
    assert not out.exists()


def test_inspect_on_a_directory_is_one_line(tmp_path, capsys):
    assert run_cli("inspect", tmp_path, "--vocab", VOCAB) == 2
    assert _error_line(capsys) == f"bertcorpus inspect: error: {tmp_path}: Is a directory"


def test_inspect_with_the_wrong_vocab_is_one_line(tmp_path, capsys, records_dir):
    small = tmp_path / "vocab-small.txt"
    small.write_text("\n".join(VOCAB.read_text(encoding="utf-8").splitlines()[:110]) + "\n", encoding="utf-8")
    shard = sorted((records_dir / "seq128").glob("train-*.tfrecord"))[0]
    assert run_cli("inspect", shard, "--vocab", small, "-n", "1") == 2
    line = _error_line(capsys)
    assert line.startswith("bertcorpus inspect: error: record 0 has token id ")
    assert line.endswith(", beyond the 110 tokens of --vocab; give the vocab the records were made with")


def test_inspect_on_a_file_that_is_no_shard_says_so_before_it_asks_for_a_vocab(capsys):
    readme = TESTS.parent / "README.md"
    for argv in ([readme], [SAMPLE_TEXT, "--vocab", VOCAB]):
        assert run_cli("inspect", *argv) == 2
        assert _error_line(capsys) == (
            f"bertcorpus inspect: error: {argv[0]} is not a shard: inspect reads the .tfrecord, .parquet and .mds "
            "shards that create writes (and TFRecords of the reference under any name)"
        )


def test_inspect_reads_a_tfrecord_under_any_name(tmp_path, capsys, records_dir):
    """The reference names its records tf_examples.tfrecord-00000-of-00010: known by the first frame's CRC."""
    named = tmp_path / "tf_examples.tfrecord-00000-of-00001"
    shutil.copy(sorted((records_dir / "seq128").glob("train-*.tfrecord"))[0], named)
    assert run_cli("inspect", named, "--vocab", VOCAB, "-n", "1") == 0
    assert capsys.readouterr().out.startswith("record 0:\n  tokens (")


def test_inspect_on_a_damaged_tfrecord_names_the_damage(tmp_path, capsys):
    damaged = tmp_path / "x.tfrecord"
    damaged.write_bytes(SAMPLE_TEXT.read_bytes()[:100])
    assert run_cli("inspect", damaged, "--vocab", VOCAB) == 2
    assert _error_line(capsys) == f"bertcorpus inspect: error: {damaged}: TFRecord length CRC mismatch"


# Filesystem errors: one line naming the path and the cause, and the run's staging removed.

WIKI_DUMP = TESTS / "data" / "wiki" / "enwiki-2014-sample-truncated.xml.bz2"
EXTRACTIONS = {
    "create": ["--input", TESTS / "data" / "create" / "11-0.txt", "--vocab", VOCAB],
    "extract-wiki": ["--input", WIKI_DUMP],
    "extract-books": ["--input", TESTS / "data" / "books_more"],
}


@pytest.fixture
def full_disk(tmp_path):
    """A real 256 kB filesystem, which every job's output overflows."""
    with mounted_tmpfs(tmp_path / "disk", "size=256k") as disk:
        yield disk


@pytest.fixture
def read_only_disk(tmp_path):
    with mounted_tmpfs(tmp_path / "ro", "size=64k,ro") as disk:
        yield disk


@pytest.mark.parametrize("command", EXTRACTIONS)
def test_a_full_disk_is_one_line_and_the_staging_goes(full_disk, capsys, command):
    out = full_disk / "out"
    assert run_cli(command, *EXTRACTIONS[command], "--output", out) == 2
    line = _error_line(capsys)
    assert line.startswith(f"bertcorpus {command}: error: cannot write {out}/.staging/")
    assert ": No space left on device" in line
    assert list(out.iterdir()) == []


def test_a_full_disk_with_worker_processes_is_one_line(full_disk):
    """The workers' own tracebacks of the failed bundle stay off the terminal."""
    out = full_disk / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bertcorpus",
            "create",
            *map(str, EXTRACTIONS["create"]),
            "--output",
            str(out),
            "--runner",
            "DirectRunner",
            "--direct_running_mode",
            "multi_processing",
            "--direct_num_workers",
            "2",
        ],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"bertcorpus create: error: cannot write {out}/.staging/seq128/")
    assert list(out.iterdir()) == []


def test_vocab_on_a_full_disk_names_the_file_and_leaves_no_temporary_file(tmp_path, capsys):
    with mounted_tmpfs(tmp_path / "disk", "size=64k") as disk:
        vocab = disk / "vocab" / "vocab.txt"
        args = ["--input", TESTS / "data" / "create" / "11-0.txt", "--output", vocab, "--vocab-size", "3000"]
        assert run_cli("vocab", *args) == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"bertcorpus vocab: error: cannot write {vocab.parent}/tokenizer.json: No space left on device"
        )
        assert list(vocab.parent.iterdir()) == []


def test_stats_on_a_full_disk_names_the_file_and_leaves_no_plots(records_dir, tmp_path, capsys):
    with mounted_tmpfs(tmp_path / "disk", "size=64k") as disk:
        card = disk / "card"
        assert run_cli("stats", records_dir, "--output", card) == 2
        line = _error_line(capsys)
        assert line.startswith(f"bertcorpus stats: error: cannot write {card}/report_files/")
        assert line.endswith(".png: No space left on device")
        assert list(card.iterdir()) == []


@pytest.mark.parametrize("mode", ["in_memory", "multi_processing"])
def test_a_full_tmpdir_names_the_folder_and_what_to_do(tmp_path, mode):
    """The spill files of create's shuffles go under $TMPDIR: a full one is one line that names the folder and says
    to point TMPDIR elsewhere, also where a worker process's traceback holds the error twice; the files go."""
    with mounted_tmpfs(tmp_path / "tmp", "size=256k") as tmp:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "bertcorpus",
                "create",
                *map(str, EXTRACTIONS["create"]),
                "--output",
                str(tmp_path / "out"),
                f"--direct_running_mode={mode}",
            ],
            cwd=TESTS.parent,
            env={**os.environ, "TMPDIR": str(tmp)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 2
        assert len(done.stderr.splitlines()) == 1, done.stderr
        assert done.stderr.startswith(f"bertcorpus create: error: {tmp}/bertcorpus-shuffle-")
        assert (
            ".spill: No space left on device (a run on this machine keeps what it shuffles in spill files under "
            f"{tmp}, its TMPDIR; point TMPDIR at a disk with room)"
        ) in done.stderr
        assert list(tmp.iterdir()) == []


@pytest.mark.parametrize("command", EXTRACTIONS)
def test_a_read_only_output_is_one_line(read_only_disk, capsys, command):
    out = read_only_disk / "out"
    assert run_cli(command, *EXTRACTIONS[command], "--output", out) == 2
    assert _error_line(capsys) == f"bertcorpus {command}: error: cannot write to {out}: Read-only file system"


@pytest.mark.parametrize("command", EXTRACTIONS)
def test_an_output_that_is_a_file_is_one_line(tmp_path, capsys, command):
    out = tmp_path / "out"
    out.write_text("not a directory\n")
    assert run_cli(command, *EXTRACTIONS[command], "--output", out) == 2
    assert _error_line(capsys) == f"bertcorpus {command}: error: cannot write to {out}: it is a file, not a directory"
    assert out.read_text() == "not a directory\n"


def test_an_os_error_raised_in_a_worker_is_one_line_naming_its_path():
    """Beam brings a worker's OSError back as text inside a RuntimeError."""
    from bertcorpus.pipeline.errors import user_message

    wrapped = RuntimeError(
        "Traceback (most recent call last):\n  ...\nOSError: [Errno 28] No space left on device: "
        "'/data/out/.staging/x.parquet' [while running 'extract books/write documents']\n"
    )
    assert user_message(wrapped) == (
        "/data/out/.staging/x.parquet: No space left on device (in step 'extract books/write documents')"
    )
    assert user_message(PermissionError(13, "Permission denied", "/data/in.txt")) == "/data/in.txt: Permission denied"


@pytest.mark.parametrize(
    "text, message",
    [
        ("jobs: [\n  a: b\n", "is not valid YAML, line 3: expected ',' or ']', but got '<stream end>'"),
        ("- 1\n- 2\n", "needs top-level 'jobs' and 'profiles' mappings"),
        (
            "jobs:\n  sample: 3\nprofiles:\n  local: {}\n",
            "job 'sample' in the jobs file needs a 'command', one of extract-wiki, extract-books, dedup, vocab, "
            "create, inspect, order, stats, demo, train",
        ),
        (
            "jobs:\n  sample:\n    command: create\n    args: [1]\nprofiles:\n  local: {}\n",
            "job 'sample' in the jobs file: 'args' must be a mapping of flag: value",
        ),
    ],
)
def test_a_damaged_jobs_file_is_one_line(tmp_path, capsys, text, message):
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(text)
    assert run_cli("run", "sample", "--jobs-file", jobs) == 2
    line = _error_line(capsys)
    assert line == f"bertcorpus run: error: {message}" or line == f"bertcorpus run: error: {jobs} {message}"


def test_a_vocab_that_is_a_directory_is_one_line(tmp_path, capsys):
    assert run_cli("create", "--input", SAMPLE_TEXT, "--vocab", tmp_path, "--output", tmp_path / "out") == 2
    assert _error_line(capsys) == f"bertcorpus create: error: cannot read vocab file {tmp_path}: Is a directory"


def test_a_runner_that_cannot_be_loaded_is_one_line(tmp_path, capsys):
    assert _create(tmp_path / "out", "--runner", "apache_beam.runners.NoSuchRunner") == 2
    assert _error_line(capsys) == (
        "bertcorpus create: error: --runner apache_beam.runners.NoSuchRunner cannot be "
        "loaded here: module 'apache_beam.runners' has no attribute 'NoSuchRunner'"
    )


def test_ctrl_c_pressed_again_during_the_clean_up_does_not_break_it_off(tmp_path, monkeypatch, capsys):
    import os
    import signal

    from bertcorpus.pipeline.create import command
    from bertcorpus.pipeline.sinks import output

    out = tmp_path / "out"
    staged = out / ".staging" / "seq128" / "train-00000-of-00004.tfrecord"

    def interrupted_run(args, beam_args):
        staged.parent.mkdir(parents=True)
        staged.write_bytes(b"part of a shard")
        raise KeyboardInterrupt

    discard = output.discard_staging

    def discard_after_a_second_ctrl_c(path):
        os.kill(os.getpid(), signal.SIGINT)  # delivered at once: the clean-up must go on
        discard(path)

    monkeypatch.setattr(command, "run", interrupted_run)
    monkeypatch.setattr(output, "discard_staging", discard_after_a_second_ctrl_c)
    handler = signal.getsignal(signal.SIGINT)
    assert run_cli("create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", out) == 130
    assert _error_line(capsys) == "bertcorpus create: interrupted"
    assert not (out / ".staging").exists() and signal.getsignal(signal.SIGINT) is handler


def test_dead_letters_are_sorted_by_the_numbers_in_where(tmp_path):
    """Within an input, errors go by position: byte 20 before byte 100, as a reader of the file expects."""
    from bertcorpus.pipeline.sinks import documents

    wheres = ["byte 100", "byte 20", "page 9", "byte 3", "page 12", "file"]
    errors = [{"input": "enwiki.xml.bz2", "where": where, "reason": "truncated", "detail": ""} for where in wheres]
    writer = documents.WriteErrors(str(tmp_path)).writer
    written = [
        out
        for out in writer.process((0, [documents._keyed(e, documents._error_row, 1)[1] for e in errors]))
        if isinstance(out, dict)
    ]
    lines = (tmp_path / ".staging" / written[0]["path"]).read_text().splitlines()
    assert [json.loads(line)["where"] for line in lines] == [
        "byte 3",
        "byte 20",
        "byte 100",
        "file",
        "page 9",
        "page 12",
    ]


# A Flink job that lost a TaskManager with no restarts left, as Beam's portable runner reports it: the job service's
# last error message, a Java stack trace with its causes.
FLINK_JOB_FAILED = """Pipeline BeamApp-root-1127-b1f2 failed in state FAILED: java.lang.RuntimeException: Pipeline \
execution failed
\tat org.apache.beam.runners.flink.FlinkPipelineRunner.run(FlinkPipelineRunner.java:90)
Caused by: org.apache.flink.runtime.JobException: Recovery is suppressed by \
FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=3, backoffTimeMS=10000)
\tat org.apache.flink.runtime.executiongraph.failover.ExecutionFailureHandler.handleFailure(...)
Caused by: org.apache.flink.runtime.jobmaster.JobMasterException: TaskManager with id 127.0.0.1:33371-c40902 is \
no longer reachable.
\tat org.apache.flink.runtime.jobmaster.JobMaster$TaskManagerHeartbeatListener.notifyTargetUnreachable(...)
"""


def test_a_runners_failed_job_is_one_line_naming_its_innermost_cause_and_the_restarts():
    from bertcorpus.pipeline.errors import RunnerJobFailed, runner_job_failure, user_message

    failed = runner_job_failure(RuntimeError(FLINK_JOB_FAILED))
    assert isinstance(failed, RunnerJobFailed)
    assert user_message(failed) == (
        "the runner's job BeamApp-root-1127-b1f2 ended FAILED before it finished: JobMasterException: TaskManager "
        "with id 127.0.0.1:33371-c40902 is no longer reachable. (after 3 restarts); nothing was published, and a "
        "rerun of the same command starts afresh"
    )
    no_restarts = FLINK_JOB_FAILED.replace(
        "FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=3, backoffTimeMS=10000)",
        "NoRestartBackoffTimeStrategy",
    )
    assert "(no restarts configured)" in str(runner_job_failure(RuntimeError(no_restarts)))
    cancelled = runner_job_failure(RuntimeError("Pipeline BeamApp-x failed in state CANCELLED: unknown error"))
    assert str(cancelled).startswith("the runner's job BeamApp-x ended CANCELLED before it finished: unknown error;")
    assert runner_job_failure(RuntimeError("something else broke")) is None
