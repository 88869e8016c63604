"""The flags users meet first: one spelling per idea across commands (older spellings still accepted, hidden), and
every create flag with a help text that gives its default."""

from __future__ import annotations

import argparse
import re

import pytest

from bertcorpus.pipeline.cli import shared_flags
from bertcorpus.pipeline.create import config

from conftest import SAMPLE_TEXT, run_cli


def help_of(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit):
        run_cli(*argv, "--help")
    return capsys.readouterr().out


class Recorded:
    """A parser, or one of its groups, that keeps the actions its arguments make."""

    def __init__(self, container, actions: list):
        self.container, self.actions = container, actions

    def add_argument(self, *names, **kwargs):
        self.actions.append(self.container.add_argument(*names, **kwargs))
        return self.actions[-1]

    def add_argument_group(self, *args, **kwargs):
        return Recorded(self.container.add_argument_group(*args, **kwargs), self.actions)


def test_every_create_flag_has_a_help_text_that_gives_its_default():
    actions: list = []
    config.add_arguments(Recorded(argparse.ArgumentParser(), actions))
    shown = [a for a in actions if a.help != argparse.SUPPRESS]
    assert len(shown) > 20
    for action in shown:
        assert action.help, action.option_strings
        if not action.required and action.dest not in ("seq_configs", "overwrite"):
            assert "default" in action.help, f"{action.option_strings} does not say its default"


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
    "command, flag",
    [
        ("create", "--num-shards"),
        ("create", "--num-buckets"),
        ("extract-books", "--num-shards"),
        ("extract-wiki", "--num-shards"),
        ("extract-wiki", "--range-mb"),
    ],
)
def test_a_size_of_zero_is_refused_rather_than_read_as_automatic(capsys, tmp_path, command, flag):
    extra = ["--vocab", str(SAMPLE_TEXT)] if command == "create" else []
    with pytest.raises(SystemExit) as exit_:
        run_cli(command, "--input", SAMPLE_TEXT, "--output", tmp_path / "o", *extra, flag, "0")
    assert exit_.value.code == 2
    assert f"argument {flag}: must " in capsys.readouterr().err and not (tmp_path / "o").exists()
