"""The flags users meet first: one spelling per idea across commands (older spellings still accepted, hidden), every
flag with a help text that gives its default in one format, and usage mistakes in one line."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest
import yaml

from bertcorpus.pipeline.cli import commands, shared_flags

from conftest import SAMPLE_TEXT, run_cli

REPO = Path(__file__).resolve().parent.parent


def help_of(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit):
        run_cli(*argv, "--help")
    return capsys.readouterr().out


def command_options(command: str) -> list[argparse.Action]:
    """The options a command's --help lists."""
    parser, *_ = commands._build_parsers(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return [a for a in sub._actions if a.option_strings and a.help != argparse.SUPPRESS and a.dest != "help"]


@pytest.mark.parametrize("command", list(commands._commands()))
def test_every_flag_ends_its_help_with_its_default_in_one_format(command):
    """A setting with a default (a value, or a --x/--no-x switch) ends its help with `(default: X)`, as does any
    help that speaks of a default; no help gives two."""
    for action in command_options(command):
        assert action.help, f"{command} {action.option_strings} has no help text"
        text = action.help % {"default": action.default}
        valued = action.default not in (None, argparse.SUPPRESS, []) and not isinstance(action.default, bool)
        switch = isinstance(action, argparse.BooleanOptionalAction)
        if valued or switch or "default" in text:
            assert re.search(r"\(default: [^()]+(\([^()]*\)[^()]*)*\)$", text), f"{command} {action.option_strings}"
            assert text.count("default") == 1, f"{command} {action.option_strings}: {text}"


def test_the_top_level_help_says_what_there_is(capsys):
    """Every record format create writes, and the demo's samples as what they are: package data, not files of a
    checkout."""
    text = " ".join(help_of(capsys).split())
    assert text.count("TFRecords, Parquet, MDS or Megatron indexed datasets") == 2  # the description and create's line
    assert "TFRecord, Parquet or MDS shard" in text  # what inspect reads
    assert "real samples installed with bertcorpus" in text and "in the repository" not in text


COMMON_RECIPE = ["--input", "--output", "--vocab", "--tokenizer", "--seq-configs", "--masking", "--dupe-factor"]


def test_create_help_shows_the_common_recipe_on_its_first_screen_and_the_rest_under_headings(capsys, monkeypatch):
    """A newcomer reads the flags of the common recipe first, within 40 lines of an 80-column terminal; each of the
    other 29 flags stands under a heading after them."""
    monkeypatch.setenv("COLUMNS", "80")
    lines = help_of(capsys, "create").splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].startswith("usage: bertcorpus create --input GLOB")
    start = next(i for i, line in enumerate(lines) if line.startswith("the common recipe"))
    end = lines.index("", start)
    assert end <= 40
    flags = [m.group(1) for line in lines if (m := re.match(r"  (--[a-z-]+)(,| |$)", line))]
    assert flags[: len(COMMON_RECIPE) + 1] == [*COMMON_RECIPE, "--num-shards"]
    assert all(re.match(r"  --", line) or line.startswith(" " * 24) for line in lines[start + 1 : end])
    headings = [line for line in lines[end:] if re.match(r"^[a-z].*:$", line)]
    assert len(headings) >= 6
    own = [a.option_strings[0] for a in command_options("create") if a.dest != "verbose"]
    assert sorted(flags) == sorted(own) and len(own) == 37


def test_the_demo_help_gives_its_defaults_as_every_command_does(capsys):
    text = " ".join(help_of(capsys, "demo").split())
    assert "(default: 8000; 21128" in text and "(default: 300)" in text
    assert "(default 8000" not in text


@pytest.mark.parametrize("command", ["create", "vocab"])
def test_lower_casing_is_spelled_one_way(capsys, command):
    text = help_of(capsys, command)
    assert "--do-lower-case" in text and "--no-do-lower-case" in text
    assert not re.search(r"--(un)?cased\b", text)


def test_the_older_spellings_still_work():
    parser = argparse.ArgumentParser()
    shared_flags.add_lower_case(parser, "case")
    assert parser.parse_args(["--cased"]).do_lower_case is False
    assert parser.parse_args(["--uncased"]).do_lower_case is True
    assert parser.parse_args(["--no-do-lower-case"]).do_lower_case is False
    assert parser.parse_args([]).do_lower_case is True


def test_graph_writes_into_output_like_every_command(capsys, tmp_path):
    text = help_of(capsys, "graph")
    assert "--output " in text and "--output-dir" not in text
    assert run_cli("graph", "sample", "--output-dir", tmp_path) == 0  # the earlier spelling, hidden
    assert (tmp_path / "sample.dot").exists()


@pytest.mark.parametrize(
    "command, flag, value",
    [
        ("create", "--num-shards", "0"),
        ("create", "--num-buckets", "0"),
        ("create", "--bin-size", "abc"),
        ("extract-books", "--num-shards", "0"),
        ("extract-wiki", "--num-shards", "0"),
        ("extract-wiki", "--range-mb", "0"),
    ],
)
def test_a_bad_flag_value_is_one_line(capsys, tmp_path, command, flag, value):
    """A size of zero is refused rather than read as automatic; argparse's usage, which --help shows, is left out."""
    extra = ["--vocab", str(SAMPLE_TEXT)] if command == "create" else []
    with pytest.raises(SystemExit) as exit_:
        run_cli(command, "--input", SAMPLE_TEXT, "--output", tmp_path / "o", *extra, f"{flag}={value}")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bertcorpus {command}: error: argument {flag}: ") and len(err.splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["create", "--input", "x"],
            "bertcorpus create: error: the following arguments are required: --output",
        ),
        (
            ["create", "--input", "x", "--output", "o"],
            "bertcorpus create: error: one of the arguments --vocab --tokenizer is required",
        ),
        (
            ["create", "--input", "x", "--output", "o", "--vocab", "v.txt", "--tokenizer", "t"],
            "bertcorpus create: error: argument --tokenizer: not allowed with argument --vocab",
        ),
        (
            ["extract-wiki", "--output", "o"],
            "bertcorpus extract-wiki: error: the following arguments are required: --input",
        ),
        (["train", "--data", "d"], "bertcorpus train: error: the following arguments are required: --output"),
        ([], "bertcorpus: error: the following arguments are required: COMMAND"),
    ],
)
def test_a_missing_required_flag_is_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        run_cli(*argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err == message + "\n"


def test_print_command_quotes_globs_as_a_shell_needs_them(capsys):
    assert run_cli("run", "pretraining-both", "--print-command") == 0
    printed = capsys.readouterr().out.strip()
    assert "'data/documents-wiki/documents-*.parquet'" in printed
    words = shlex.split(printed)  # what a shell hands bertcorpus when the line is pasted
    assert words[:2] == ["bertcorpus", "create"] and "data/documents-books/documents-*.parquet" in words


def test_run_list_aligns_its_columns(capsys):
    jobs = yaml.safe_load((REPO / "beam_jobs.yaml").read_text())["jobs"]
    assert run_cli("run", "--list") == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in lines if line.startswith("  ")}
    assert set(rows) == set(jobs)
    commands_at = {rows[name].index(f" {job['command']} ", 2 + len(name)) for name, job in jobs.items()}
    helps_at = {rows[name].index(job["help"]) for name, job in jobs.items()}
    assert len(commands_at) == 1 and len(helps_at) == 1, lines
