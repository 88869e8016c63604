"""`bertcorpus` as a Unix process: standard output that is closed, full or read by no one, streams and locales that
cannot encode what is written, signals that stop it (also where SIGINT came ignored), and an installation without
the `train` extra. Each runs the real command (`python -m bertcorpus`, the installed entry point's code) in a process
of its own."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLE_TEXT, TESTS, VOCAB, run_cli, wait_until

ROOT = TESTS.parent
TRAIN_EXTRA_LINE = "training needs TensorFlow and Keras, from the train extra: pip install 'bertcorpus[train]'"


def _environment(**changes: str) -> dict[str, str]:
    """The environment of a user's shell: without the TensorFlow log level that the test session sets itself."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONIOENCODING")}
    env.update(changes)
    return env


def _command(*words) -> list:
    return [sys.executable, "-m", "bertcorpus", *(w if isinstance(w, bytes) else str(w) for w in words)]


def _bertcorpus(*words, shell_prefix: str | None = None, env: dict | None = None, **kwargs):
    """Runs the command; shell_prefix, if given, is shell code run first in the same process (a redirection, a
    trap), which then becomes the command."""
    command = _command(*words)
    if shell_prefix is not None:
        command = ["sh", "-c", f'{shell_prefix}; exec "$@"', "sh", *command]
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    return subprocess.run(command, cwd=ROOT, env=env or _environment(), timeout=600, **kwargs)


def _create_words(out: Path, source: Path = SAMPLE_TEXT) -> list:
    return ["create", "--input", source, "--vocab", VOCAB, "--output", out, "--runner", "DirectRunner"]


def _shard(records_dir: Path) -> Path:
    return sorted((records_dir / "seq128").glob("train-*.tfrecord"))[0]


# Standard output that is closed, full or read by no one.


def test_a_closed_stdout_is_one_line_naming_it_after_a_complete_run(tmp_path):
    out = tmp_path / "out"
    done = _bertcorpus(*_create_words(out), shell_prefix="exec >&-", stdout=None)
    assert (done.returncode, done.stderr.decode()) == (
        2,
        "bertcorpus create: error: cannot write to standard output: Bad file descriptor\n",
    )
    assert json.loads((out / "manifest.json").read_text())["outputs"]["seq128"]["train"]["instances"] > 0


def test_a_full_stdout_is_named_not_taken_for_the_output_disk(tmp_path):
    out = tmp_path / "out"
    with open("/dev/full", "wb") as full:
        done = _bertcorpus(*_create_words(out), stdout=full)
    assert (done.returncode, done.stderr.decode()) == (
        2,
        "bertcorpus create: error: cannot write to standard output: No space left on device\n",
    )
    assert (out / "manifest.json").exists()


def test_a_reader_that_stopped_reading_ends_the_command_quietly(records_dir):
    """`bertcorpus inspect ... | head -1`, where head has gone before inspect writes: every write meets EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = _bertcorpus("inspect", _shard(records_dir), "--vocab", VOCAB, "-n", "50", stdout=write_end)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr.decode()) == (0, "")


# Text that the streams or the locale cannot encode.


def test_inspect_escapes_what_a_latin1_stdout_cannot_encode(records_dir):
    done = _bertcorpus(
        "inspect", _shard(records_dir), "--vocab", VOCAB, "-n", "2", env=_environment(PYTHONIOENCODING="latin-1")
    )
    assert (done.returncode, done.stderr.decode()) == (0, "")
    printed = done.stdout.decode("latin-1")
    assert printed.startswith("record 0:\n") and "record 1:\n" in printed
    assert "\\u2192" in printed  # the arrow between a [MASK] and its original token, escaped


def test_a_non_ascii_path_under_the_c_locale_is_one_line_before_anything_is_written(tmp_path):
    source = tmp_path / "café.txt"
    shutil.copy(SAMPLE_TEXT, source)
    out = tmp_path / "out-é"
    done = _bertcorpus(*_create_words(out, source), env=_environment(LC_ALL="C", PYTHONUTF8="0"))
    assert done.returncode == 2
    assert done.stderr.decode("ascii") == (
        f"bertcorpus create: error: '{tmp_path}/caf\\xe9.txt' cannot be read as text here: Python decodes names as "
        "ASCII under this locale (C or POSIX, with PYTHONUTF8=0); set a UTF-8 locale (LC_ALL=C.UTF-8) or "
        "PYTHONUTF8=1\n"
    )
    assert not out.exists()


@pytest.fixture
def latin1_named_text(tmp_path) -> Path:
    """The sample text under a name whose é is the Latin-1 byte 0xe9, which is not UTF-8."""
    folder = tmp_path / "input"
    folder.mkdir()
    path = os.fsencode(folder) + b"/caf\xe9.txt"
    shutil.copy(SAMPLE_TEXT, path)
    return Path(os.fsdecode(path))


def test_a_file_name_that_is_not_utf8_is_one_line(tmp_path, capsys, latin1_named_text):
    out = tmp_path / "out"
    expected = (
        f"bertcorpus create: error: '{latin1_named_text.parent}/caf\\xe9.txt' is not UTF-8 text (it has the "
        "byte 0xe9); bertcorpus writes the names it reads into its outputs as UTF-8: rename the file"
    )
    assert run_cli(*_create_words(out, latin1_named_text)) == 2
    assert capsys.readouterr().err == expected + "\n"
    assert not out.exists()
    # Found in a folder rather than named: the job meets the name as it records it.
    assert run_cli(*_create_words(out, latin1_named_text.parent)) == 2
    assert capsys.readouterr().err == expected + "\n"
    assert not (out / "manifest.json").exists()


# Signals.


def test_train_started_with_sigint_ignored_still_stops_on_sigint(tmp_path, records_dir):
    """A shell script's background job inherits SIGINT ignored; `kill -INT` must still stop it, as it does the
    other commands."""
    out = tmp_path / "train"
    words = [
        "train",
        "--data",
        f"{records_dir}/seq128/train-*",
        "--output",
        out,
        "--config",
        "tiny",
        "--batch-size",
        "8",
        "--steps",
        "100000",
        "--log-every",
        "1",
        "--checkpoint-every",
        "100000",
    ]
    run = subprocess.Popen(
        ["sh", "-c", "trap '' INT; exec \"$@\"", "sh", *_command(*words)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_environment(),
    )
    try:
        wait_until((out / "train_log.jsonl").exists, run, "training step")
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert (run.returncode, err) == (
        130,
        "bertcorpus train: interrupted; run the same command again to resume from the last checkpoint\n",
    )


# train: one line with the command's name, without TensorFlow's start-up log; and without the train extra.


def test_a_train_error_is_one_line_with_the_command_name(tmp_path):
    done = _bertcorpus("train", "--data", tmp_path / "none-*", "--output", tmp_path / "run")
    assert (done.returncode, done.stderr.decode()) == (
        2,
        f"bertcorpus train: error: no files match '{tmp_path / 'none-*'}'\n",
    )


@pytest.fixture
def without_train_extra(tmp_path) -> dict[str, str]:
    """The environment of an installation without the train extra, as far as importing goes: keras and tensorflow
    packages ahead on the path that raise ImportError."""
    folder = tmp_path / "no-train-extra"
    for name in ("keras", "tensorflow"):
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed here')\n")
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p)
    return _environment(PYTHONPATH=path)


def test_train_help_needs_no_tensorflow(without_train_extra):
    done = _bertcorpus("train", "--help", env=without_train_extra)
    assert (done.returncode, done.stderr.decode()) == (0, "")
    assert done.stdout.decode().startswith("usage: bertcorpus train")
    assert "--config {tiny,mini,small,medium,base,large}" in done.stdout.decode()


def test_train_without_the_train_extra_is_one_line_naming_it(tmp_path, without_train_extra):
    done = _bertcorpus("train", "--data", tmp_path / "none-*", "--output", tmp_path / "run", env=without_train_extra)
    assert (done.returncode, done.stderr.decode()) == (
        2,
        f"bertcorpus train: error: {TRAIN_EXTRA_LINE} (keras is not installed here)\n",
    )


def test_the_demo_without_the_train_extra_skips_training_and_prints_its_table(tmp_path, without_train_extra):
    done = _bertcorpus("demo", "--output", tmp_path / "demo", "--runner", "DirectRunner", env=without_train_extra)
    assert done.returncode == 0 and "Traceback" not in done.stderr.decode()
    printed = done.stdout.decode()
    assert f"\n=== train: skipped: {TRAIN_EXTRA_LINE} (keras is not installed here)\n" in printed
    table = printed[printed.index("bertcorpus demo summary") :].splitlines()
    rows = [row for row in table[2:] if row.startswith("  ") and row[2] != " "]  # not the counts wrapped below
    assert [row.split()[0] for row in rows] == [
        "extract-wiki",
        "extract-books",
        "vocab",
        "create",
        "stats",
        "train",
    ]
    assert rows[-1].split(None, 1)[1].strip() == "skipped: pip install 'bertcorpus[train]' to train"


# Flags and help.


def test_verbose_goes_before_or_after_the_command(records_dir):
    shard = _shard(records_dir)
    assert run_cli("-v", "inspect", shard, "--vocab", VOCAB, "-n", "1") == 0
    assert run_cli("inspect", shard, "--vocab", VOCAB, "-n", "1", "--verbose") == 0


def test_demo_help_suggests_local_runner_options_only(capsys):
    with pytest.raises(SystemExit) as done:
        run_cli("demo", "--help")
    assert done.value.code == 0
    printed = capsys.readouterr().out
    assert "DataflowRunner" not in printed and "--direct_running_mode multi_processing" in printed


# Progress where standard error is no terminal: no redraws.


def test_stats_draws_no_progress_bar_into_a_log(tmp_path, records_dir):
    with open(tmp_path / "log", "wb") as log:
        done = _bertcorpus("stats", records_dir, "--output", tmp_path / "card", stdout=log, stderr=log)
    assert done.returncode == 0
    assert b"\r" not in (tmp_path / "log").read_bytes()


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_stdout_and_stderr_lines_keep_their_order_in_one_pipe(tmp_path, unbuffered):
    """`2>&1 | tee log`: each stream is written a line at a time (also under PYTHONUNBUFFERED, which leaves Python's
    standard error unbuffered but not the stream bertcorpus puts over it)."""
    env = {**_environment(), "PYTHONUNBUFFERED": unbuffered}
    done = _bertcorpus(
        "vocab",
        "--input",
        SAMPLE_TEXT,
        "--output",
        tmp_path / "vocab.txt",
        "--vocab-size",
        "1200",
        env=env,
        stderr=subprocess.STDOUT,
    )
    assert done.returncode == 0
    lines = done.stdout.decode().splitlines()
    order = [
        next(i for i, line in enumerate(lines) if line.startswith(start))
        for start in ("counting words: ", "training a 1,200-token vocab", "vocab summary")
    ]
    assert order == sorted(order), lines
