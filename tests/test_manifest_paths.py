"""A manifest names its own files by paths relative to its folder. Every reader of one (create, dedup, vocab, stats,
inspect and the loader) refuses, in one line and before it opens any of them, a manifest that names a file outside
that folder: a `..` part, an absolute path, a URL. Otherwise a manifest someone else wrote could make stats quote
the ids, titles and words of another file, or the loader serve it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import SAMPLE_TEXT, VOCAB, run_cli
from wiki_fixtures import ENWIKI_SMALL


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("documents") / "wiki"
    assert run_cli("extract-wiki", "--input", ENWIKI_SMALL, "--output", out) == 0
    return out


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("records") / "out"
    assert (
        run_cli(
            "create",
            "--input",
            SAMPLE_TEXT,
            "--vocab",
            VOCAB,
            "--output",
            out,
            "--masking",
            "dynamic",
            "--dupe-factor",
            "1",
            "--eval-fraction",
            "0",
            "--num-shards",
            "1",
        )
        == 0
    )
    return out


def rewritten(source: Path, where: Path, change) -> Path:
    """A copy of an output whose manifest `change` rewrote."""
    shutil.copytree(source, where)
    manifest = json.loads((where / "manifest.json").read_text())
    change(manifest)
    (where / "manifest.json").write_text(json.dumps(manifest))
    return where


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize(
    "path, why",
    [
        ("../secret/private.parquet", "leads out of its folder"),
        ("/etc/passwd", "is not relative to its folder"),
        ("gs://elsewhere/documents-00000-of-00001.parquet", "is not relative to its folder"),
    ],
)
def test_a_documents_manifest_naming_a_file_outside_its_folder_is_read_by_no_command(
    documents, tmp_path, capsys, path, why
):
    # A real documents file beside the folder, which a reader that follows the path would read and quote.
    (tmp_path / "secret").mkdir()
    shutil.copy(next(documents.glob("documents-*.parquet")), tmp_path / "secret" / "private.parquet")
    folder = rewritten(documents, tmp_path / "docs", lambda m: m["outputs"]["documents"][0].update(path=path))
    problem = f"it lists {path}, which {why}"
    for words in (
        ["stats", folder],
        ["stats", folder, "--vocab", VOCAB],
        ["create", "--input", folder, "--vocab", VOCAB, "--output", tmp_path / "records"],
        ["dedup", "--input", folder, "--output", tmp_path / "dedup"],
        ["vocab", "--input", folder, "--output", tmp_path / "vocab.txt"],
        ["plan", "create", "--input", folder, "--vocab", VOCAB, "--output", tmp_path / "records"],
    ):
        assert run_cli(*words) == 2, words
        line = one_line(capsys)
        assert f"{folder / 'manifest.json'} is not a" in line and problem in line, (words, line)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs", "secret"]  # nothing written, no card
    assert not (folder / "stats.json").exists()


@pytest.mark.parametrize(
    "damage, problem",
    [
        (
            lambda m: m["outputs"]["seq128"]["train"]["shards"][0].update(path="../elsewhere/" + _shard_name(m)),
            "which leads out of its folder",
        ),
        (lambda m: m["vocab"].update(copy="/etc/passwd"), "it lists /etc/passwd, which is not relative to its folder"),
    ],
    ids=["shard", "vocab copy"],
)
def test_a_records_manifest_naming_a_file_outside_its_folder_is_read_by_no_reader(
    records, tmp_path, capsys, damage, problem
):
    from bertcorpus.loader import LoaderError, PretrainingLoader

    # The shard's own bytes outside the output: the sha256 the manifest names is theirs.
    shard = records / _shard_name(json.loads((records / "manifest.json").read_text()))
    outside = tmp_path / "elsewhere" / shard.relative_to(records)
    outside.parent.mkdir(parents=True)
    shutil.copy(shard, outside)
    out = rewritten(records, tmp_path / "out", damage)
    manifest = out / "manifest.json"
    assert run_cli("stats", out) == 2
    line = one_line(capsys)
    assert f"{manifest} is not a valid bertcorpus manifest: " in line and problem in line, line
    assert run_cli("inspect", out / shard.relative_to(records)) == 2
    line = one_line(capsys)
    assert f"{manifest} is not a manifest bertcorpus reads: " in line and problem in line, line
    with pytest.raises(LoaderError, match=f"{manifest} is not a manifest bertcorpus reads: .*{problem}"):
        PretrainingLoader(out, seq_length=128, batch_size=8, cache_dir=tmp_path / "cache")
    assert not (out / "stats.json").exists()


def _shard_name(manifest: dict) -> str:
    return manifest["outputs"]["seq128"]["train"]["shards"][0]["path"]


@pytest.mark.parametrize(
    "path, why",
    [
        ("documents-00000-of-00001.parquet", None),
        ("seq128/train/shard.00000.mds", None),
        ("seq128/..", "leads out of its folder"),
        ("..\\secret.parquet", "leads out of its folder"),
        ("C:secret.parquet", "is not relative to its folder"),
        ("\\\\server\\share\\x.parquet", "is not relative to its folder"),
        ("", "is not a path"),
        (7, "is not a path"),
        ("a\x00b", "holds a NUL character"),
    ],
)
def test_which_paths_name_a_file_inside_the_folder(path, why):
    from bertcorpus.transforms.manifest_paths import listed_path_problem

    assert listed_path_problem(path) == why
