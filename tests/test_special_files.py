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


def test_every_file_argument_refuses_a_special_file(fifo, records_dir, tmp_path):
    out = tmp_path / "out"
    shard = next(Path(records_dir).glob("seq128/train-*.tfrecord"))
    cases = {
        ("create --vocab", "named pipe (FIFO)"): ["create", "--input", SAMPLE_TEXT, "--vocab", fifo, "--output", out],
        ("create --vocab", "character device"): [
            "create",
            "--input",
            SAMPLE_TEXT,
            "--vocab",
            "/dev/zero",
            "--output",
            out,
        ],
        ("extract-wiki --index", "named pipe (FIFO)"): [
            "extract-wiki",
            "--input",
            WIKI,
            "--index",
            fifo,
            "--output",
            out,
        ],
        ("extract-books --metadata", "character device"): [
            "extract-books",
            "--input",
            BOOKS[0],
            "--metadata",
            "/dev/zero",
            "--output",
            out,
        ],
        ("stats --vocab", "named pipe (FIFO)"): ["stats", records_dir, "--vocab", fifo, "--output", tmp_path / "card"],
        ("inspect FILE", "named pipe (FIFO)"): ["inspect", fifo, "--vocab", VOCAB],
        ("inspect --vocab", "character device"): ["inspect", shard, "--vocab", "/dev/zero"],
        ("run --jobs-file", "named pipe (FIFO)"): ["run", "--jobs-file", fifo, "--list"],
        ("train --data", "named pipe (FIFO)"): ["train", "--data", fifo, "--output", tmp_path / "run"],
        ("train --eval-data", "named pipe (FIFO)"): [
            "train",
            "--data",
            records_dir,
            "--eval-data",
            fifo,
            "--output",
            tmp_path / "run",
            "--config",
            "tiny",
        ],
    }
    for (what, kind), (rc, err) in zip(cases, run_commands(*cases.values())):
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1, (what, rc, err)
        assert f"is a {kind}, not a regular file" in lines[0], (what, lines)
    assert not out.exists() and not (tmp_path / "run").exists()


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
