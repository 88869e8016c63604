"""Editors follow the project's imports: jedi (the engine behind go-to-definition in many editors), run on the
project's own virtual environment as an editor runs it, takes a `bertcorpus.*` import of each sub-package to the
file on disk in the repository's top-level folders. With the package installed through an import hook, as an
editable install of a package-dir mapping is, jedi finds nothing."""

from __future__ import annotations

import re
import sys
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
    """Where a module's source is in the repository: bertcorpus.pipeline.x is pipeline/x.py, bertcorpus.x is
    bertcorpus/x.py."""
    parts = dotted.split(".")[1:]
    for base in (ROOT, ROOT / "bertcorpus"):
        for path in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
            if parts and path.is_file():
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
    assert Path(found[0].module_path).resolve() == target.resolve()
    if as_module is None:
        assert found[0].line == definition_line(target, name)
