"""Every ```python block of the docs (README.md and docs/*.md) runs as written. A page's blocks run in order in one
fresh Python process, each with the names the blocks before it defined, as a reader follows the page, in a folder
that holds the outputs the page's snippets read (PAGE_DATA: made by bertcorpus's own commands from the bundled
samples). A block that needs what no test machine has (a CUDA GPU, a package that no extra of bertcorpus installs)
says so on the line above its fence, `<!-- snippet: not run (why) -->`, and is left out: the exception, fewer than a
third of the blocks.

The shell lines of the other blocks that run a bertcorpus command (of a full-size corpus, on Dataflow, ...) are
parsed as the command line parses them: each names the command's own flags and values, its required ones too. A
line that elides words (`...`) is left out, and so are optional groups in brackets (`[--bin-size 64]`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from bertcorpus.pipeline.cli import commands

from conftest import BOOKS, SAMPLE_TEXT, run_cli

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
NOT_RUN = re.compile(r"^\s*<!-- snippet: not run \((.+)\) -->\s*$")
FIGURES = re.compile(r"<!-- begin: .*?<!-- end: [^>]*-->", re.S)  # a command's output that .ci/docs_figures.py writes
OPTIONAL = re.compile(r"\s\[[^\]]*\]")
# A small vocab keeps the snippets' models small: their masked-LM heads score every token of it.
SMALL_VOCAB = ["vocab", "--vocab-size", "2000"]
DYNAMIC = ["create", "--masking", "dynamic", "--dupe-factor", "1", "--eval-fraction", "0"]
# The folders each page's snippets read, in the order they are made, each by its command from the bundled samples
# (create with the vocab folder made before it): the output that the loader's page reads at 128 and 1,024 tokens;
# RoBERTa-style full sentences for the recipes' loop; the vocab folder that transformers loads.
PAGE_DATA = {
    "docs/loader.md": {"vocab": SMALL_VOCAB, "out": [*DYNAMIC, "--seq-configs", "128:20,1024:308"]},
    "docs/recipes.md": {"vocab": SMALL_VOCAB, "out": [*DYNAMIC, "--pair-objective", "none"]},
    "docs/vocab.md": {"vocab": ["vocab", "--vocab-size", "8000"]},
}
# Runs a page's snippets in one namespace; the padding before each keeps the doc's own line numbers in a traceback.
RUNNER = """
import json, sys, traceback
namespace = {"__name__": "__main__"}
for path, line, code in json.load(open(sys.argv[1], encoding="utf-8")):
    try:
        exec(compile("\\n" * (line - 1) + code, path, "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        sys.exit(f"the snippet at {path}:{line} fails as written")
"""


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int  # of the block's first line of code
    code: str
    not_run: str | None  # why it is left out, where it is


def snippets(page: Path) -> list[Snippet]:
    """The page's ```python blocks, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        if opening.group(2) == "python":
            before = next((line for line in reversed(lines[:i]) if line.strip()), "")
            reason = NOT_RUN.match(before)
            code = textwrap.dedent("\n".join(lines[i + 1 : end])) + "\n"
            found.append(Snippet(page, i + 2, code, reason.group(1) if reason else None))
        i = end + 1
    return found


def command_lines(page: Path) -> list[tuple[int, list[str]]]:
    """(line, the words after `bertcorpus`) of every shell line of the page's code blocks that runs a command, its
    continuation lines joined; outputs that .ci/docs_figures.py writes are none."""
    text = FIGURES.sub(lambda m: "\n" * m.group(0).count("\n"), page.read_text(encoding="utf-8"))
    lines, found, inside = text.splitlines(), [], False
    for number, line in enumerate(lines, start=1):
        if FENCE.match(line):
            inside = not inside
            continue
        words = re.sub(r"^\$ ", "", line.strip()).split()
        if not inside or len(words) < 2 or words[0] != "bertcorpus" or words[1] not in commands._commands():
            continue
        command, rest = line, number
        while command.rstrip().endswith("\\"):
            command, rest = command.rstrip()[:-1] + " " + lines[rest], rest + 1
        command = OPTIONAL.sub("", re.sub(r"\s#.*$", "", re.sub(r"^\s*\$ ", "", command)))
        if "..." not in command and "…" not in command:
            found.append((number, shlex.split(command)[1:]))
    return found


def parse_problem(words: list[str], capsys) -> str | None:
    """What the command line says of the words, where it refuses them."""
    from bertcorpus.pipeline.errors import user_message

    try:
        commands.parse_command(words)
    except SystemExit as refused:
        return capsys.readouterr().err.strip() if refused.code else None
    except Exception as error:
        message = user_message(error)
        if message is None:
            raise
        return message
    return None


def run_snippets(page: Path, folder: Path) -> subprocess.CompletedProcess:
    """The page's snippets that run, in `folder`, in a process of their own."""
    listed = folder / ".snippets.json"
    runnable = [(str(s.page), s.line, s.code) for s in snippets(page) if s.not_run is None]
    listed.write_text(json.dumps(runnable), encoding="utf-8")
    # Keras on JAX: the Keras loop says any backend, and JAX is there for the JAX loop (TensorFlow would add a minute).
    environment = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(
        [sys.executable, "-c", RUNNER, listed], cwd=folder, env=environment, capture_output=True, text=True, timeout=900
    )


def make(folder: Path, words: list[str]) -> None:
    """A folder that snippets read, made by its command from the bundled samples: the reference's sample text and
    the shorter of the two books (enough for a global batch of 256 at 128 tokens, and two of 16,384 at 1,024)."""
    inputs = ["--input", SAMPLE_TEXT, min(BOOKS, key=lambda book: book.stat().st_size)]
    if words[0] == "vocab":
        assert run_cli("vocab", *inputs, "--output", folder / "vocab.txt", *words[1:]) == 0
    else:
        vocab = folder.parent / "vocab" / "vocab.txt"
        assert run_cli(words[0], *inputs, "--vocab", vocab, "--output", folder, *words[1:]) == 0


def page_name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


RUNNABLE = [page for page in PAGES if any(s.not_run is None for s in snippets(page))]


@pytest.mark.parametrize("page", RUNNABLE, ids=page_name)
def test_every_snippet_of_the_page_runs_as_written(page, tmp_path, capsys):
    for name, words in PAGE_DATA.get(page_name(page), {}).items():
        make(tmp_path / name, words)
    capsys.readouterr()
    done = run_snippets(page, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]


def test_every_bertcorpus_command_of_the_docs_is_one_the_command_line_takes(capsys):
    """benchmarks.md's trainer command once lacked train's --output."""
    lines = [(page, number, words) for page in PAGES for number, words in command_lines(page)]
    refused = [
        f"{page_name(page)}:{n}: {problem}" for page, n, words in lines if (problem := parse_problem(words, capsys))
    ]
    assert len(lines) >= 30 and refused == []


def test_a_command_of_the_docs_with_a_misspelt_flag_is_found(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text(
        "```\n$ bertcorpus create --input docs/ --vocab v.txt --output out \\\n    --dupe-factr 2  # passes\n"
        "bertcorpus create ... --dupe-factr 1\nbertcorpus stats DIR [--vocab vocab.txt]\n```\n"
        "bertcorpus create --nothing, in prose\n",
        encoding="utf-8",
    )
    found = command_lines(page)
    assert found == [
        (2, ["create", "--input", "docs/", "--vocab", "v.txt", "--output", "out", "--dupe-factr", "2"]),
        (5, ["stats", "DIR"]),
    ]
    assert parse_problem(found[0][1], capsys) == "unknown flag --dupe-factr; did you mean --dupe-factor?"
    assert parse_problem(found[1][1], capsys) is None


def test_the_snippets_left_out_are_few_and_say_why():
    every = [s for page in PAGES for s in snippets(page)]
    left_out = [s for s in every if s.not_run is not None]
    assert len(every) >= 10 and 3 * len(left_out) < len(every), [(page_name(s.page), s.line) for s in left_out]
    assert all(len(s.not_run.split()) >= 3 for s in left_out)


def test_a_snippet_that_uses_a_name_it_never_defines_fails_naming_its_line(tmp_path):
    """The recipes' PyTorch loop once read rank, world and epochs that no snippet defined."""
    page = tmp_path / "page.md"
    page.write_text(
        "Read it:\n\n```python\nfrom bertcorpus import Vocab\n```\n\n"
        "<!-- snippet: not run (a GPU that no test machine has) -->\n```python\nimport flash_attn\n```\n\n"
        "Then:\n\n```python\nfor epoch in range(epochs):\n    pass\n```\n",
        encoding="utf-8",
    )
    found = snippets(page)
    assert [(s.line, s.not_run) for s in found] == [(4, None), (9, "a GPU that no test machine has"), (15, None)]
    done = run_snippets(page, tmp_path)
    assert done.returncode == 1
    assert "NameError: name 'epochs' is not defined" in done.stderr
    assert done.stderr.rstrip().endswith(f"the snippet at {page}:15 fails as written")
