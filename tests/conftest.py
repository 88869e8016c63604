"""Shared fixtures: real sample data, and records made once per test session by the real `create` job."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow and triton (which megatron-core imports, from PyPI's PyTorch) each carry LLVM, and a process aborts
# ("LLVM ERROR: inconsistency in registered CommandLine options") where triton loads after TensorFlow: load it
# first. (TensorFlow 2.21 with triton 3.9.)
with contextlib.suppress(ImportError):
    import triton  # noqa: F401
# Progress lines come every 30 s, so how many a run prints depends on how loaded the machine is: tests that read a
# command's whole output get none, and the tests of progress lines set the interval they need.
os.environ["BERTCORPUS_PROGRESS_INTERVAL"] = "86400"
TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
VOCAB = DATA / "reference" / "bert-base-uncased-vocab.txt"
SAMPLE_TEXT = DATA / "reference" / "sample_text.txt"
BOOKS = sorted((DATA / "create").glob("*.txt"))
SHARED = TESTS.parent.parent / "shared"
sys.path.insert(0, str(TESTS))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that share a module-scoped fixture run on one worker (`--dist loadgroup`), which builds it once:
    spread over both, each worker would build it (the trainer's module fixtures train for minutes)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None and any(
            definitions[-1].scope == "module" for definitions in item._fixtureinfo.name2fixturedefs.values()
        ):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def run_cli(*argv: str) -> int:
    from bertcorpus.pipeline.cli.commands import main

    return main([str(a) for a in argv])


def exit_status(*argv: str) -> int:
    """run_cli's exit status, also where argparse refuses the words itself (with SystemExit)."""
    try:
        return run_cli(*argv)
    except SystemExit as refused:
        return refused.code


# A Dataflow job that is validated offline, never launched: its project, region and temp location, and with them
# the worker packaging.
DATAFLOW_JOB = [
    "--runner",
    "DataflowRunner",
    "--project",
    "my-project",
    "--region",
    "us-central1",
    "--temp_location",
    "gs://some-bucket/tmp",
]
DATAFLOW_OFFLINE = [*DATAFLOW_JOB, "--setup_file", "./setup.py"]


def wait_until(condition, run, what: str, timeout: float = 300) -> None:
    """Poll condition() until it holds, failing if the process `run` ends first or `timeout` seconds pass."""
    import time

    deadline = time.time() + timeout
    while not condition():
        assert run.poll() is None, f"the run ended before {what}: {run.communicate()}"
        assert time.time() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.05)


@pytest.fixture
def network_attempts(monkeypatch) -> list[tuple[str, tuple]]:
    """Every name lookup and connection the test makes, refused and recorded: a command that must work offline is
    proved to by an empty list, whatever the machine's load."""
    import socket

    attempts: list[tuple[str, tuple]] = []

    def refused(what: str):
        def call(*args, **kwargs):
            attempts.append((what, args))
            raise OSError(f"no network in this test ({what})")

        return call

    for name in ("connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, refused(name))
    for name in ("getaddrinfo", "create_connection", "gethostbyname"):
        monkeypatch.setattr(socket, name, refused(name))
    return attempts


@contextlib.contextmanager
def mounted_tmpfs(where: Path, options: str):
    """A real small filesystem at `where` (a full disk: "size=256k"; read-only: "size=64k,ro"), or a skip where
    this machine cannot mount one."""
    import shutil
    import subprocess

    where.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def file_digests(out: Path, pattern: str) -> dict[str, str]:
    import hashlib

    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(out.glob(pattern))}


def assert_same_extraction(manifest: dict, out: Path, reference: Path) -> None:
    """An extraction job's run into `out` wrote the same documents, errors and manifest (but for its output
    path) as the one in `reference`."""
    import json

    for pattern in ("documents-*", "errors-*"):
        assert file_digests(out, pattern) == file_digests(reference, pattern)
    first = json.loads((reference / "manifest.json").read_text())
    for m in (manifest, first):
        m["config"].pop("output")
    assert manifest == first


@pytest.fixture(scope="session")
def vocab_path() -> Path:
    return VOCAB


def book_sections(max_chars: int = 8000) -> list[tuple[str, str]]:
    """The real books cut at paragraph boundaries into ~8 KB documents: (id, text)."""
    docs = []
    for book in BOOKS:
        paragraphs = book.read_text(encoding="utf-8").split("\n\n")
        part, size = [], 0
        for paragraph in paragraphs:
            part.append(paragraph)
            size += len(paragraph)
            if size >= max_chars:
                docs.append((f"{book.stem}:{len(docs)}", "\n\n".join(part)))
                part, size = [], 0
        if part:
            docs.append((f"{book.stem}:{len(docs)}", "\n\n".join(part)))
    return docs


@pytest.fixture(scope="session")
def books_jsonl(tmp_path_factory) -> Path:
    """The real books as JSONL documents of ~8 KB each."""
    import json

    path = tmp_path_factory.mktemp("books") / "books.jsonl"
    with open(path, "w") as f:
        for doc_id, text in book_sections():
            f.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    return path


@pytest.fixture(scope="session")
def records_dir(tmp_path_factory, books_jsonl) -> Path:
    """seq128 train/eval records from real text with the original uncased vocab (128/20, dupe 5)."""
    out = tmp_path_factory.mktemp("records")
    assert (
        run_cli(
            "create",
            "--input",
            books_jsonl,
            SAMPLE_TEXT,
            "--vocab",
            VOCAB,
            "--output",
            out,
            "--dupe-factor",
            "5",
            "--eval-fraction",
            "0.1",
            "--num-buckets",
            "2",
            "--overwrite",
        )
        == 0
    )
    return out


@pytest.fixture(scope="session")
def sample_static(tmp_path_factory) -> Path:
    """A static `create` output of the reference sample and the real books at 128/20, for the loader's tests."""
    from loader_data import create_sample

    return create_sample(tmp_path_factory.mktemp("sample-static") / "out", 128, 20)


@pytest.fixture(scope="session")
def sample_dynamic_copy(sample_static, tmp_path_factory) -> Path:
    """sample_static's own instances, unmasked, in the dynamic form (tests/loader_data.py): the loader's masks
    meet the rows that create masked."""
    from loader_data import dynamic_copy

    return dynamic_copy(sample_static, tmp_path_factory.mktemp("sample-dynamic") / "out")


@pytest.fixture(scope="session")
def index_cache(tmp_path_factory) -> Path:
    """The loader's cache of TFRecord offsets, shared by the tests of one process."""
    return tmp_path_factory.mktemp("index-cache")


@pytest.fixture(scope="session")
def gcs(tmp_path_factory):
    """A Cloud Storage JSON API server on the loopback (tests/gcs_server.py), shared by the tests that need one."""
    from gcs_server import running_emulator

    with running_emulator(tmp_path_factory.mktemp("gcs")) as server:
        yield server
