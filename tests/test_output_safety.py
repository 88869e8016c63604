"""Where a run may write: never into its own inputs, and one run at a time into an output. Real commands on the bundled
samples; two real runs at once for the race, and a real killed process for a claim that outlived its run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bertcorpus.pipeline.errors import UserError
from bertcorpus.pipeline.sinks import output

from conftest import DATA, SAMPLE_TEXT, VOCAB, run_cli
from wiki_fixtures import ENWIKI_SMALL

ROOT = Path(__file__).resolve().parent.parent
LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
ALICE = DATA / "books" / "gutenberg_utf8" / "11-0.txt"


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return err.strip()


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------------------------------------- outputs and inputs


@pytest.fixture
def inputs(tmp_path) -> dict[str, Path]:
    """A folder for each kind of input: a Wikipedia dump, a book, reference-format text."""
    folders = {"wiki": ENWIKI_SMALL, "books": ALICE, "text": SAMPLE_TEXT}
    for name, source in folders.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / source.name).write_bytes(source.read_bytes())
    return {name: tmp_path / name for name in folders}


def _cases(inputs: dict[str, Path]) -> list[tuple[list, str]]:
    """(command line, what the one line says after 'the output ...')."""
    wiki, books, text = inputs["wiki"], inputs["books"], inputs["text"]
    sample = text / SAMPLE_TEXT.name
    return [
        (["extract-wiki", "--input", wiki, "--output", wiki], f"{wiki} is the input {wiki}"),
        (
            ["extract-wiki", "--input", wiki / ENWIKI_SMALL.name, "--output", wiki],
            f"{wiki} contains the input {wiki / ENWIKI_SMALL.name}",
        ),
        (
            ["extract-books", "--input", books, "--output", books / "out"],
            f"{books / 'out'} lies inside the input {books}",
        ),
        (
            ["vocab", "--input", text, "--output", text / "vocab.txt"],
            f"{text / 'vocab.txt'} lies inside the input {text}",
        ),
        (
            [
                "vocab",
                "--input",
                sample,
                "--output",
                text.parent / "vocab.txt",
                "--count-with-beam",
                "--counts-dir",
                text,
            ],
            f"{text} contains the input {sample}",
        ),
        (
            ["create", "--input", f"{text}/*", "--vocab", VOCAB, "--output", text / "out"],
            f"{text / 'out'} lies inside {text}, the folder of the input {text}/*",
        ),
        (["create", "--input", sample, "--vocab", VOCAB, "--output", text], f"{text} contains the input {sample}"),
    ]


@pytest.mark.parametrize("case", range(7))
def test_an_output_that_is_holds_or_lies_in_an_input_is_refused_in_one_line(inputs, capsys, case):
    command, relation = _cases(inputs)[case]
    before = {name: _tree(folder) for name, folder in inputs.items()}
    assert run_cli(*command) == 2
    assert _error_line(capsys) == (
        f"bertcorpus {command[0]}: error: the output {relation}; write it apart from the inputs"
    )
    assert {name: _tree(folder) for name, folder in inputs.items()} == before
    assert not any(folder.joinpath("out").exists() for folder in inputs.values())


def test_a_rerun_of_extract_wiki_into_its_input_folder_cannot_read_its_documents_as_a_dump(inputs, tmp_path, capsys):
    """The case that lost every document: a run whose --output was its --input folder read, on its --overwrite rerun,
    its own documents Parquet as XML, and never the dump."""
    wiki = inputs["wiki"]
    assert run_cli("extract-wiki", "--input", wiki, "--output", tmp_path / "elsewhere", *LOCAL) == 0
    kept = json.loads((tmp_path / "elsewhere" / "manifest.json").read_text())["documents"]["kept"]
    assert kept > 0
    capsys.readouterr()
    for _ in range(2):
        assert run_cli("extract-wiki", "--input", wiki, "--output", wiki, "--overwrite", *LOCAL) == 2
        assert _error_line(capsys).endswith(f"the output {wiki} is the input {wiki}; write it apart from the inputs")
    assert sorted(p.name for p in wiki.iterdir()) == [ENWIKI_SMALL.name]


def test_paths_are_compared_resolved_and_remote_ones_by_prefix(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "data")
    cases = [
        ([tmp_path / "link" / "out"], [tmp_path / "data"], f"lies inside the input {tmp_path / 'data'}"),
        ([tmp_path / "data" / ".." / "data"], [tmp_path / "link"], f"is the input {tmp_path / 'link'}"),
        (["gs://b/docs/"], ["gs://b/docs"], "is the input gs://b/docs"),
        (["gs://b/docs/out"], ["gs://b/docs/*"], "lies inside gs://b/docs, the folder of the input gs://b/docs/*"),
        (
            ["gs://b/docs/2024"],
            ["gs://b/docs/20*/*.parquet"],
            "lies inside gs://b/docs, the folder of the input gs://b/docs/20*/*.parquet",
        ),
        (["gs://b/docs/x/y"], ["gs://b/docs/**"], "lies inside gs://b/docs, the folder of the input gs://b/docs/**"),
        (["gs://b"], ["gs://b/docs/a.jsonl"], "contains the input gs://b/docs/a.jsonl"),
    ]
    for outputs, given, relation in cases:
        message = f"the output {outputs[0]} {relation}; write it apart from the inputs"
        with pytest.raises(UserError, match=f"^{re.escape(message)}$"):
            output.check_apart(map(str, outputs), map(str, given))
    # Neighbours that only share a prefix of their names are apart, and local never meets remote.
    output.check_apart(["gs://b/docs2", str(tmp_path / "data2"), None], ["gs://b/docs", str(tmp_path / "data")])
    output.check_apart([str(tmp_path / "gs:" / "b")], ["gs://b"])
    # A pattern's folder may hold an output that the pattern does not match.
    output.check_apart(
        ["gs://b/docs/records", str(tmp_path / "data" / "records"), "gs://b/docs/2024/out"],
        ["gs://b/docs/documents-*.parquet", str(tmp_path / "data" / "*.jsonl"), "gs://b/docs/20*/*.parquet"],
    )


# ---------------------------------------------------------------------------------------------- one run at a time


def test_two_runs_into_one_new_output_at_once_one_publishes_and_the_other_refuses(tmp_path, books_jsonl):
    out = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "bertcorpus",
        "create",
        "--input",
        str(books_jsonl),
        str(SAMPLE_TEXT),
        "--vocab",
        str(VOCAB),
        "--output",
        str(out),
        "--eval-fraction",
        "0.1",
        "--num-buckets",
        "2",
        *LOCAL,
    ]
    runs = [
        subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "TMPDIR": str(tmp_path)},
        )
        for _ in range(2)
    ]
    try:
        ended = [run.communicate(timeout=300) for run in runs]
    finally:
        for run in runs:
            run.kill()
            run.wait()
    assert sorted(run.returncode for run in runs) == [0, 2], ended
    by_status = {run.returncode: streams for run, streams in zip(runs, ended)}
    won, refused = by_status[0][0], by_status[2][1]
    assert refused == (
        f"bertcorpus create: error: another run is writing into {out}; wait for it to end or choose another --output\n"
    )
    assert "create summary" in won
    # The refused run left the other's staging alone: every shard its manifest lists is there, whole.
    manifest = json.loads((out / "manifest.json").read_text())
    shards = [
        s for config in manifest["outputs"].values() for split in ("train", "eval") for s in config[split]["shards"]
    ]
    assert shards and all((out / s["path"]).stat().st_size == s["bytes"] for s in shards)
    assert not (out / ".staging").exists()


def _probe_held(path: Path) -> bool:
    """Whether another process holds the output, as a second run would find it."""
    try:
        output.claim_output(str(path))
    except output.OutputExistsError:
        return True
    output.release_output(str(path))
    return False


def test_a_claim_lasts_as_long_as_its_process_even_one_that_is_killed(tmp_path, capsys):
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom bertcorpus.pipeline.sinks import output\n"
            "output.prepare_output_dir(sys.argv[1], overwrite=False)\nprint('held', flush=True)\n"
            "time.sleep(600)",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "held\n"
        assert run_cli("extract-books", "--input", ALICE, "--output", out, *LOCAL) == 2
        assert _error_line(capsys) == (
            f"bertcorpus extract-books: error: another run is writing into {out}; wait "
            "for it to end or choose another --output"
        )
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # Killed outright, the holder left nothing that the next run must clear or wait for.
    deadline = time.time() + 10
    while _probe_held(out):
        assert time.time() < deadline, "the lock of a killed process was not dropped"
        time.sleep(0.05)
    assert run_cli("extract-books", "--input", ALICE, "--output", out, *LOCAL) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "documents-00000-of-00001.parquet",
        "errors-00000-of-00001.jsonl",
        "manifest.json",
    ]


@pytest.mark.parametrize("where", ["local", "gcs"])
def test_publishing_refuses_when_another_run_published_meanwhile(tmp_path, request, where):
    """What guards an object store, where nothing can be locked: the check that publish makes before it moves a
    file. A local output takes the same path."""
    gcs = request.getfixturevalue("gcs") if where == "gcs" else None
    out = gcs.url("published", "out") if gcs else str(tmp_path / "out")
    output.prepare_output_dir(out, overwrite=False)
    output.write_bytes(output.staging_path(out, "documents-00000-of-00001.parquet"), [b"this run's"])
    theirs = {"tool": "bertcorpus", "job": "extract-books", "outputs": {"documents": []}}
    output.write_json_atomically(output.join(out, "manifest.json"), theirs)
    ours = {"tool": "bertcorpus", "job": "extract-books", "outputs": {"documents": ["documents-00000-of-00001"]}}
    message = f"another run published into {out} while this one ran; this run published nothing"
    with pytest.raises(output.OutputExistsError, match=f"^{re.escape(message)}"):
        output.publish(out, ["documents-00000-of-00001.parquet"], ours, ["documents-*.parquet"])
    assert output.read_manifest(out) == theirs
    names = sorted(gcs.objects(out)) if gcs else sorted(p.name for p in Path(out).iterdir())
    assert names == ["manifest.json"]
