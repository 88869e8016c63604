"""Input matching at launch: every file once with its size, however many names it is given by; what an input folder
holds that is not read (folders, broken links) named and counted; special files refused; names with glob characters
taken as they are."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bertcorpus.pipeline.inputs.discovery import find_inputs, match_inputs
from bertcorpus.pipeline.inputs.formats import InputError

from conftest import DATA, SAMPLE_TEXT, VOCAB, run_cli
from wiki_fixtures import ENWIKI_SMALL

LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
ROOT = Path(__file__).resolve().parent.parent
ALICE = DATA / "books" / "gutenberg_utf8" / "11-0.txt"


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
    assert run_cli("create", "--input", *names, "--vocab", VOCAB, "--output", out, "--dupe-factor", "1", *LOCAL) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["documents"]["read"] == 3  # the sample's three documents, not nine
    assert [f["path"] for f in manifest["inputs"]] == [names[0]]


def test_vocab_says_which_names_it_left_out(one_file_three_names, tmp_path, capsys):
    text, names = one_file_three_names
    assert (
        run_cli(
            "vocab", "--input", *names, "--output", tmp_path / "vocab.txt", "--vocab-size", "300", "--layout", "compact"
        )
        == 0
    )
    assert (
        f"note: 1 input path(s) name a file already listed and were left out: {names[2]} (= {text})"
        in capsys.readouterr().err
    )


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


# ---------------------------------------------------------------------------------------------- what is left out


@pytest.fixture
def corpus_with_extras(tmp_path) -> dict[str, Path]:
    """A folder holding the reference sample, a folder of more text, and a symbolic link whose file was deleted."""
    corpus = tmp_path / "corpus"
    (corpus / "more").mkdir(parents=True)
    (corpus / "sample_text.txt").write_bytes(SAMPLE_TEXT.read_bytes())
    (corpus / "more" / "sample_again.txt").write_bytes(SAMPLE_TEXT.read_bytes())
    (corpus / "gone.txt").symlink_to(tmp_path / "deleted.txt")
    return {
        "corpus": corpus,
        "text": corpus / "sample_text.txt",
        "folder": corpus / "more",
        "link": corpus / "gone.txt",
    }


def left_out_note(folder: Path, link: Path) -> str:
    return (
        f"left out 1 folder (folders are not searched: name one to read the files directly in it): {folder}; "
        f"left out 1 broken symbolic link (the file it names does not exist): {link}"
    )


def test_folders_and_broken_links_in_an_input_folder_are_named_and_counted(corpus_with_extras):
    corpus, link, folder = corpus_with_extras["corpus"], corpus_with_extras["link"], corpus_with_extras["folder"]
    found = find_inputs([str(corpus)])
    assert found.files == [(str(corpus_with_extras["text"]), SAMPLE_TEXT.stat().st_size)]
    assert found.skipped == {str(folder): "folder", str(link): "broken_symlink"}
    assert found.skipped_counts() == {"folder": 1, "broken_symlink": 1}
    assert found.note() == left_out_note(folder, link)
    # A pattern meets them alike; a folder that another input reads from is not left out.
    assert find_inputs([str(corpus / "*")]).skipped == found.skipped
    both = find_inputs([str(corpus), str(folder / "*.txt")])
    assert len(both.files) == 2 and both.skipped == {str(link): "broken_symlink"}
    assert both.skipped_counts() == {"folder": 0, "broken_symlink": 1}
    # Named itself, a broken link is one line.
    with pytest.raises(
        InputError, match=f"^{link} is a symbolic link to {link.parent.parent / 'deleted.txt'}, which does not exist$"
    ):
        find_inputs([str(link)])


@pytest.mark.parametrize("command", ["create", "vocab", "extract-wiki"])
def test_every_command_says_what_it_left_out_of_an_input_folder(corpus_with_extras, tmp_path, capsys, command):
    corpus = corpus_with_extras["corpus"]
    out = tmp_path / "out"
    if command == "extract-wiki":  # a dump instead of the text
        corpus_with_extras["text"].unlink()
        (corpus / ENWIKI_SMALL.name).write_bytes(ENWIKI_SMALL.read_bytes())
    args = {
        "create": ["--vocab", VOCAB, "--output", out, "--dupe-factor", "1", *LOCAL],
        "vocab": ["--output", out, "--vocab-size", "300", "--layout", "compact"],
        "extract-wiki": ["--output", out, *LOCAL],
    }[command]
    assert run_cli(command, "--input", corpus, *args) == 0
    printed = capsys.readouterr()
    assert f"note: {left_out_note(corpus_with_extras['folder'], corpus_with_extras['link'])}\n" in printed.err
    # and the manifest counts them, as the summary says
    manifest = json.loads(((out.parent if command == "vocab" else out) / "manifest.json").read_text())
    assert manifest["inputs_skipped"] == {"broken_symlink": 1, "folder": 1}
    assert "inputs left out (broken symlink)" in printed.out and "inputs left out (folder)" in printed.out


def test_extract_books_records_a_broken_link_as_a_book_it_cannot_read(tmp_path):
    books = tmp_path / "books"
    books.mkdir()
    (books / "alice.txt").write_bytes(ALICE.read_bytes())
    (books / "gone.txt").symlink_to(tmp_path / "deleted.txt")
    out = tmp_path / "out"
    # One error in two files is over the default --max-error-rate: exit 1, the output complete.
    assert run_cli("extract-books", "--input", books, "--output", out, *LOCAL) == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["documents"]["read"] == 2 and manifest["documents"]["errors_by_reason"] == {"read_error": 1}
    [error] = [json.loads(line) for line in (out / "errors-00000-of-00001.jsonl").read_text().splitlines()]
    assert error["input"] == str(books / "gone.txt") and "No such file or directory" in error["detail"]


# ---------------------------------------------------------------------------------------------- special files


def special_files(folder: Path) -> dict[str, Path]:
    """A FIFO, and a folder holding a real book and a FIFO named like one."""
    folder.mkdir()
    named = folder / "named.txt"
    os.mkfifo(named)
    inside = folder / "books"
    inside.mkdir()
    (inside / "alice.txt").write_bytes(ALICE.read_bytes())
    os.mkfifo(inside / "stream.txt")
    return {"named": named, "inside": inside, "fifo_inside": inside / "stream.txt"}


def test_a_fifo_is_refused_when_inputs_are_listed(tmp_path):
    from bertcorpus.pipeline.extract.book_files import list_inputs

    fifo = special_files(tmp_path / "special")
    for listing in (find_inputs, list_inputs):
        for pattern, path in ((fifo["named"], fifo["named"]), (fifo["inside"], fifo["fifo_inside"])):
            with pytest.raises(
                InputError,
                match=f"^{path} is a named pipe \\(FIFO\\), not a regular file; "
                "inputs are read from regular files only$",
            ):
                listing([str(pattern)] if listing is find_inputs else str(pattern))


def test_every_command_refuses_a_fifo_in_its_input_folder_in_one_line(tmp_path):
    """Read, a FIFO would keep a command waiting for bytes forever: each runs in a process of its own, with a time
    limit."""
    fifo = special_files(tmp_path / "special")
    commands = {
        "create": ["--vocab", VOCAB, "--output", tmp_path / "create"],
        "vocab": ["--output", tmp_path / "vocab.txt"],
        "extract-wiki": ["--output", tmp_path / "wiki"],
        "extract-books": ["--output", tmp_path / "books"],
    }
    runs = {
        command: subprocess.Popen(
            [sys.executable, "-m", "bertcorpus", command, "--input", str(fifo["inside"]), *map(str, args)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for command, args in commands.items()
    }
    try:
        for command, run in runs.items():
            err = run.communicate(timeout=120)[1]
            assert run.returncode == 2, err
            assert err == (
                f"bertcorpus {command}: error: {fifo['fifo_inside']} is a named pipe (FIFO), not a "
                "regular file; inputs are read from regular files only\n"
            )
    finally:
        for run in runs.values():
            run.kill()
            run.wait()


# ---------------------------------------------------------------------------------------------- names with [ * ?


def test_an_existing_name_with_glob_characters_is_taken_as_it_is(tmp_path):
    named = tmp_path / "sample[1].txt"
    named.write_bytes(SAMPLE_TEXT.read_bytes())
    (tmp_path / "sample1.txt").write_bytes(b"what the pattern would match\n")
    assert find_inputs([str(named)]).files == [(str(named), SAMPLE_TEXT.stat().st_size)]
    # Where no such name exists, it is a pattern.
    assert find_inputs([str(tmp_path / "sample[12].txt")]).files == [(str(tmp_path / "sample1.txt"), 29)]
    # A job that matches again on its workers gets a pattern that matches that file only.
    assert match_inputs([str(named)]) == [(str(tmp_path / "sample[[]1].txt"), SAMPLE_TEXT.stat().st_size)]


@pytest.mark.parametrize("command", ["create", "vocab", "extract-wiki", "extract-books"])
def test_every_command_reads_a_file_whose_name_has_glob_characters(tmp_path, command):
    source, name = {"extract-wiki": (ENWIKI_SMALL, "enwiki[1].xml.bz2"), "extract-books": (ALICE, "alice[1].txt")}.get(
        command, (SAMPLE_TEXT, "sample[1].txt")
    )
    folder = tmp_path / "in[put]"  # and a folder of such a name
    folder.mkdir()
    named = folder / name
    named.write_bytes(source.read_bytes())
    out = tmp_path / ("vocab.txt" if command == "vocab" else "out")
    args = {
        "create": ["--vocab", VOCAB, "--dupe-factor", "1", *LOCAL],
        "vocab": ["--vocab-size", "300", "--layout", "compact"],
    }.get(command, LOCAL)
    for given in (named, folder):
        assert run_cli(command, "--input", given, "--output", out, "--overwrite", *args) == 0
        if command != "vocab":
            manifest = json.loads((out / "manifest.json").read_text())
            assert [i["path"] for i in manifest["inputs"]] == [str(named)]
            assert manifest["documents"]["read"] == {"create": 3, "extract-wiki": 3, "extract-books": 1}[command]


def test_remote_names_with_glob_characters_and_folders_inside_a_remote_folder(gcs):
    from bertcorpus.pipeline.inputs.reads import match_on_worker

    corpus, size = gcs.url("matching", "corpus"), SAMPLE_TEXT.stat().st_size
    for name in ("sample[1].txt", "sample1.txt", "more/sample_again.txt"):
        gcs.upload(SAMPLE_TEXT, f"{corpus}/{name}")
    named = f"{corpus}/sample[1].txt"
    assert find_inputs([named]).files == [(named, size)]
    assert list(match_on_worker(named)) == [(named, size)]  # a worker takes the name as it is too
    found = find_inputs([corpus])
    assert found.files == [(f"{corpus}/sample1.txt", size), (named, size)]
    assert found.skipped == {f"{corpus}/more": "folder"}
