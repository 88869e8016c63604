"""Editors follow the project's imports: jedi (the engine behind go-to-definition and find-references in many
editors), run on the project's own virtual environment as an editor runs it, takes a `bertcorpus.*` import of each
sub-package to the file in the repository's tree (src/bertcorpus/...), and finds every use of a name from the
file that defines it. With the package installed through an import hook, as an editable install of a package-dir
mapping is, jedi finds nothing; with a second path to each file (a link to a folder of code), it finds the uses
in one file only."""

from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path

import pytest

jedi = pytest.importorskip("jedi")

ROOT = Path(__file__).resolve().parent.parent
# (a module, a name imported from it: a module of its own, or a class or function defined in it)
IMPORTS = [
    ("bertcorpus.pipeline.create", "config"),
    ("bertcorpus.pipeline.create.config", "CreateConfig"),
    ("bertcorpus.pipeline.plan.stages", "create"),
    ("bertcorpus.transforms.masking", "num_to_predict"),
    ("bertcorpus.wordpiece.tokenizer", "WordPieceTokenizer"),
    ("bertcorpus.trainer.loader", "PretrainingLoader"),
    ("bertcorpus", "loader"),
]


def file_on_disk(dotted: str) -> Path | None:
    """Where a module's source is in the repository: bertcorpus.pipeline.x is src/bertcorpus/pipeline/x.py."""
    parts = dotted.split(".")
    base = ROOT / "src"
    for path in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
        if len(parts) > 1 and path.is_file():
            return path
    return None


def definition_line(path: Path, name: str) -> int:
    return next(
        i for i, text in enumerate(path.read_text().splitlines(), 1) if re.match(rf"(class|def) {name}\b", text)
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> jedi.Project:
    """A project outside the repository on this virtual environment, so that only what the install put on the
    environment's path can resolve an import."""
    return jedi.Project(tmp_path_factory.mktemp("editor"), environment_path=sys.prefix, smart_sys_path=False)


@pytest.mark.parametrize("module, name", IMPORTS, ids=[f"{m}.{n}" for m, n in IMPORTS])
def test_go_to_definition_reaches_the_file_in_the_repository(project, module, name):
    source = f"from {module} import {name}\n"
    script = jedi.Script(source, path=project.path / "edited.py", project=project)
    found = script.goto(1, source.rindex(name) + 1, follow_imports=True)
    assert found, f"jedi found no definition of {name} in {source!r}"
    as_module = file_on_disk(f"{module}.{name}")
    target = as_module or file_on_disk(module)
    assert Path(found[0].module_path) == target  # the path itself, as git lists it
    if as_module is None:
        assert found[0].line == definition_line(target, name)


@pytest.mark.parametrize(
    "module, name",
    [("bertcorpus.pipeline.create.config", "CreateConfig"), ("bertcorpus.wordpiece.tokenizer", "WordPieceTokenizer")],
)
def test_find_references_from_the_defining_file_finds_every_use(module, name):
    """As an editor asks it: the project is the repository, the script the file that defines the name."""
    path = file_on_disk(module)
    project = jedi.Project(ROOT, environment_path=sys.prefix, smart_sys_path=False)
    script = jedi.Script(path.read_text(), path=path, project=project)
    line = definition_line(path, name)
    found = script.get_references(line, path.read_text().splitlines()[line - 1].index(name) + 1)
    by_jedi = {(Path(r.module_path).relative_to(ROOT), r.line) for r in found if r.module_path}
    # every line of the package where the name is code (a NAME token), not prose in a string or a comment
    by_text = {
        (p.relative_to(ROOT), token.start[0])
        for p in (ROOT / "src").rglob("*.py")
        for token in tokenize.generate_tokens(io.StringIO(p.read_text()).readline)
        if token.type == tokenize.NAME and token.string == name
    }
    in_package = {(p, i) for p, i in by_jedi if p.parts[0] == "src"}
    assert by_text <= in_package, sorted(by_text - in_package)[:10]
    assert len({p for p, _ in by_text}) >= 3  # used across the package, not in its own file alone
