"""Input matching at launch: every file once with its size, however many names it is given by."""
from __future__ import annotations

import json
import os

import pytest
from conftest import SAMPLE_TEXT, VOCAB, run_cli

from pipeline.sources import InputError, find_inputs, match_inputs

LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]


@pytest.fixture
def one_file_three_names(tmp_path) -> tuple[str, list[str]]:
    """The reference sample in data/, and three names for it: plain, with '..', and a symlink."""
    data = tmp_path / "data"
    data.mkdir()
    text = data / "sample_text.txt"
    text.write_bytes(SAMPLE_TEXT.read_bytes())
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "elsewhere" / "link.txt"
    link.symlink_to(text)
    return str(text), [str(text), str(tmp_path / "elsewhere" / ".." / "data" / "sample_text.txt"), str(link)]


def test_one_file_named_three_ways_is_listed_once_with_the_names_left_out(one_file_three_names):
    text, names = one_file_three_names
    found = find_inputs(names)
    assert found.files == [(text, SAMPLE_TEXT.stat().st_size)]
    assert found.aliases == {names[2]: text}  # the '..' name is the same absolute path
    assert found.note() == f"1 input path(s) name a file already listed and were left out: {names[2]} (= {text})"
    assert find_inputs(names[::-1]).files == found.files  # the name kept does not depend on the order given


def test_create_reads_a_file_named_three_ways_once(one_file_three_names, tmp_path):
    _, names = one_file_three_names
    out = tmp_path / "out"
    assert run_cli("create", "--input", *names, "--vocab", VOCAB, "--output", out, "--dupe-factor", "1",
                   *LOCAL) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["documents"]["read"] == 3  # the sample's three documents, not nine
    assert [f["path"] for f in manifest["inputs"]] == [names[0]]


def test_vocab_says_which_names_it_left_out(one_file_three_names, tmp_path, capsys):
    text, names = one_file_three_names
    assert run_cli("vocab", "--input", *names, "--output", tmp_path / "vocab.txt", "--vocab-size", "300",
                   "--layout", "compact") == 0
    assert f"note: 1 input path(s) name a file already listed and were left out: {names[2]} (= {text})" \
        in capsys.readouterr().err


def test_relative_names_and_directories_become_absolute_file_paths(tmp_path, monkeypatch):
    (tmp_path / "dir" / "sub").mkdir(parents=True)
    for name in ("dir/a.txt", "dir/b.jsonl", "dir/sub/c.txt"):
        (tmp_path / name).write_text("x\n")
    monkeypatch.chdir(tmp_path)
    expected = [(str(tmp_path / "dir" / "a.txt"), 2), (str(tmp_path / "dir" / "b.jsonl"), 2)]
    assert match_inputs(["dir"]) == expected  # a directory stands for the files in it, not below
    assert match_inputs(["dir/*.txt", "./dir/b.jsonl", "dir/../dir/a.txt"]) == expected


def test_a_pattern_that_matches_nothing_is_an_input_error_unless_missing_is_allowed(tmp_path):
    with pytest.raises(InputError, match="no input files match"):
        find_inputs([str(tmp_path / "missing-*.txt")])
    # A dry run only needs the job's shape, and must work offline: remote patterns are not listed.
    assert find_inputs([str(tmp_path / "missing-*.txt"), "gs://bucket/docs/*.parquet"], allow_missing=True).files == []
