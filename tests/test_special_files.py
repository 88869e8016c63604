"""A FIFO or a device named where a file is expected, in every file argument of every command (and of the loader and
a benchmark): one line, exit 2, at once. Reading a FIFO that has no writer waits forever, and /dev/zero never ends.

The commands run in a process of their own, each under an alarm, so that one that would hang fails the test instead
of holding it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BOOKS, SAMPLE_TEXT, TESTS, VOCAB

ROOT = TESTS.parent
WIKI = TESTS / "data" / "wiki" / "enwiki-small-sample.xml.bz2"

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")

_DRIVER = """
import contextlib, io, json, signal, sys
from bertcorpus.pipeline.cli.commands import main

def timed_out(*_):
    raise TimeoutError("still reading after 60 s")

signal.signal(signal.SIGALRM, timed_out)
results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    signal.alarm(60)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = main(argv)
    except SystemExit as e:
        rc = e.code
    except TimeoutError as e:
        rc = str(e)
    signal.alarm(0)
    results.append([rc, err.getvalue()])
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def fifo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("special") / "pipe"
    os.mkfifo(path)
    return path


def run_commands(*argvs: list[str]) -> list[tuple[object, str]]:
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps([[str(a) for a in argv] for argv in argvs])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# Every file argument of every command (and a Beam option that names a file), FILE standing for the special file:
# (command, argument) → the command line. Refused before the command reads anything, so the other files need not
# exist.
FILE_ARGUMENTS = {
    ("extract-wiki", "--input"): ["extract-wiki", "--input", "FILE", "--output", "OUT"],
    ("extract-wiki", "--index"): ["extract-wiki", "--input", WIKI, "--index", "FILE", "--output", "OUT"],
    ("extract-books", "--input"): ["extract-books", "--input", "FILE", "--output", "OUT"],
    ("extract-books", "--metadata"): ["extract-books", "--input", BOOKS[0], "--metadata", "FILE", "--output", "OUT"],
    ("dedup", "--input"): ["dedup", "--input", "FILE", "--output", "OUT"],
    ("dedup", "--decontaminate"): ["dedup", "--input", "docs.jsonl", "--decontaminate", "FILE", "--output", "OUT"],
    ("vocab", "--input"): ["vocab", "--input", "FILE", "--output", "OUT/vocab.txt"],
    ("vocab", "--output"): ["vocab", "--input", SAMPLE_TEXT, "--output", "FILE"],
    ("vocab", "--counts-dir"): ["vocab", "--input", SAMPLE_TEXT, "--output", "OUT/v.txt", "--counts-dir", "FILE"],
    ("create", "--input"): ["create", "--input", "FILE", "--vocab", VOCAB, "--output", "OUT"],
    ("create", "--vocab"): ["create", "--input", SAMPLE_TEXT, "--vocab", "FILE", "--output", "OUT"],
    ("create", "--output"): ["create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", "FILE"],
    ("create", "--tokenizer"): ["create", "--input", SAMPLE_TEXT, "--tokenizer", "FILE", "--output", "OUT"],
    ("create", "--setup_file"): [
        "create",
        *("--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", "OUT", "--setup_file", "FILE"),
    ],
    ("inspect", "FILE"): ["inspect", "FILE", "--vocab", VOCAB],
    ("inspect", "--vocab"): ["inspect", "shard.tfrecord", "--vocab", "FILE"],
    ("stats", "DIR"): ["stats", "FILE"],
    ("stats", "--vocab"): ["stats", "OUT", "--vocab", "FILE", "--output", "OUT/card"],
    ("stats", "--output"): ["stats", "OUT", "--output", "FILE"],
    ("run", "--jobs-file"): ["run", "--jobs-file", "FILE", "--list"],
    ("run", "a job's flag"): ["run", "pretraining-128", "--set", "vocab=FILE"],
    ("graph", "--jobs-file"): ["graph", "pretraining-128", "--jobs-file", "FILE"],
    ("graph", "--output"): ["graph", "pretraining-128", "--output", "FILE"],
    ("train", "--data"): ["train", "--data", "FILE", "--output", "OUT"],
    ("train", "--eval-data"): ["train", "--data", "OUT", "--eval-data", "FILE", "--output", "OUT/run"],
    ("train", "--init-checkpoint"): ["train", "--data", "OUT", "--init-checkpoint", "FILE", "--output", "OUT/run"],
    ("train", "--output"): ["train", "--data", "OUT", "--output", "FILE"],
    ("demo", "--output"): ["demo", "--output", "FILE"],
    ("plan", "--input"): ["plan", "create", "--input", "FILE", "--vocab", VOCAB, "--output", "OUT"],
    ("cluster", "--state-dir"): ["cluster", "flink", "--state-dir", "FILE"],
    ("order", "--input"): ["order", "--input", "FILE", "--output", "OUT/order.parquet", "--batch-size", "8"],
    ("order", "--output"): ["order", "--input", "OUT", "--output", "FILE", "--batch-size", "8"],
}


def test_every_file_argument_of_every_command_refuses_a_fifo_and_a_device(fifo, tmp_path):
    out = tmp_path / "out"
    cases = {
        (command, what, kind): [str(word).replace("FILE", str(special)).replace("OUT", str(out)) for word in argv]
        for (command, what), argv in FILE_ARGUMENTS.items()
        for special, kind in ((fifo, "named pipe (FIFO)"), ("/dev/zero", "character device"))
    }
    for (command, what, kind), (rc, err) in zip(cases, run_commands(*cases.values())):
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1, (command, what, kind, rc, err)
        assert f"is a {kind}, not a regular file" in lines[0], (command, what, lines)
    assert not out.exists()


def test_every_command_is_covered():
    """A command added later gets its file arguments into the table above."""
    from bertcorpus.pipeline.cli.commands import _commands

    assert {command for command, _ in FILE_ARGUMENTS} == set(_commands())


def test_the_loader_refuses_a_special_vocab_and_manifest(fifo, sample_dynamic_copy, tmp_path):
    script = f"""
from bertcorpus.trainer.loader import LoaderError, PretrainingLoader
for vocab in ({str(fifo)!r}, "/dev/zero"):
    try:
        PretrainingLoader({str(sample_dynamic_copy)!r}, seq_length=128, batch_size=8, vocab=vocab)
    except LoaderError as e:
        print(e)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        f"the vocab {fifo} is a named pipe (FIFO), not a regular file: it cannot be read to its end; name a regular "
        "file",
        "the vocab /dev/zero is a character device, not a regular file: it cannot be read to its end; name a regular "
        "file",
    ]


def test_a_benchmark_refuses_a_special_dump(fifo):
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_wikitext.py", "--dump", str(fifo)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and f"--dump {fifo} is a named pipe (FIFO), not a regular file" in done.stderr
