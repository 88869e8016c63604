"""The project's import structure, read from its source with `ast` (nothing is imported).

docs/architecture.md states the four rules this test holds the project to:
- one namespace: the project's modules are bertcorpus.pipeline..., bertcorpus.transforms..., and every import
  names them so (a bare `import pipeline` would find a user's module of that name, or none once installed);
- dependencies run pipeline → transforms → wordpiece, and trainer → transforms → wordpiece (the loader masks
  with the same pure code as create); trainer imports nothing of pipeline/ (the CLI in pipeline/ starts it);
- no import circle between project modules, counting the imports inside functions too (a lazy import that
  closes a circle still ties the two modules together), nor between the folders of pipeline/ (inputs/, sinks/, ...);
- pure logic in transforms/ imports no Beam: a module there may hold the thin DoFn/PTransform of its step, so
  a Beam name may be used only inside a class that derives from a Beam class. Today no module in transforms/
  imports Beam at all, and the check holds each future DoFn to that shape.
Each rule is also run on a small tree written by the test, so that a checker that finds nothing fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

NAMESPACE = "bertcorpus"
PACKAGE = Path(__file__).resolve().parent.parent / "src" / NAMESPACE
PACKAGES = ("pipeline", "transforms", "wordpiece", "trainer")
# What each package may import from the project, besides its own modules and the namespace's root module (which
# holds the version and imports nothing). The root's own folder (the public face) may import every package.
ALLOWED = {
    "pipeline": {"transforms", "wordpiece", "trainer"},
    "transforms": {"wordpiece"},
    "wordpiece": set(),
    "trainer": {"transforms", "wordpiece"},
    NAMESPACE: set(PACKAGES),
}
BEAM = "apache_beam"


def module_name(package: Path, path: Path) -> str:
    """The import name: src/bertcorpus/pipeline/create/job.py is bertcorpus.pipeline.create.job."""
    parts = path.relative_to(package).with_suffix("").parts
    return ".".join((NAMESPACE, *(parts[:-1] if parts[-1] == "__init__" else parts)))


def project_modules(package: Path) -> dict[str, ast.Module]:
    """Module name → parsed source, for every .py file of the package folder (src/bertcorpus, or a test's tree)."""
    return {
        module_name(package, path): ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for path in sorted(package.rglob("*.py"))
    }


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGES else NAMESPACE


def bare_imports(modules: dict[str, ast.Module]) -> list[str]:
    """Imports of a project package outside the namespace (`from pipeline.x import y`)."""
    return [
        f"{name}, line {node.lineno}: imports {wanted} outside the {NAMESPACE} namespace"
        for name, tree in sorted(modules.items())
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0)
        for wanted in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])
        if wanted.split(".")[0] in PACKAGES
    ]


def imported_names(node: ast.AST, importer: str) -> list[str]:
    """The dotted names an import statement asks for: `from a import b` gives a.b (the submodule, if it is one)
    and a; relative imports are resolved against the importing module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = importer.split(".")[: -node.level]
        base = ".".join(package + ([base] if base else []))
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def dependencies(modules: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Module → the project modules it imports anywhere in its source (top level or inside functions)."""
    graph = {}
    for name, tree in modules.items():
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                wanted = imported_names(node, name)
                # `from bertcorpus.pipeline.sinks import documents` depends on that module, not on the package itself.
                named = wanted[:-1] if isinstance(node, ast.ImportFrom) else wanted
                found.update([w for w in named if w in modules] or [w for w in wanted if w in modules])
        graph[name] = found - {name}
    return graph


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for importer, targets in sorted(graph.items()):
        layer = layer_of(importer)
        for target in sorted(targets):
            other = layer_of(target)
            if other != layer and target != NAMESPACE and other not in ALLOWED[layer]:
                problems.append(
                    f"{importer} imports {target}: {layer}/ may import only "
                    f"{', '.join(sorted(ALLOWED[layer])) or 'nothing else of the project'}"
                )
    return problems


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return sorted(circles)


def room_of(module: str) -> str:
    """The folder of pipeline/ that holds a module (bertcorpus.pipeline.sinks.up_to_date → bertcorpus.pipeline.sinks),
    or the module itself where it stands alone; a module of another package stays itself."""
    parts = module.split(".")
    return ".".join(parts[:3]) if parts[1:2] == ["pipeline"] and len(parts) > 3 else module


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The imports between pipeline/'s folders: every module's imports, each side taken as its folder."""
    rooms: dict[str, set[str]] = {}
    for importer, targets in graph.items():
        room = room_of(importer)
        rooms.setdefault(room, set()).update(room_of(t) for t in targets if room_of(t) != room)
    return rooms


def _beam_names(tree: ast.Module) -> set[str]:
    """The names a module binds by importing Beam (`beam`, `DoFn`, ...), wherever the import is."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == BEAM)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == BEAM:
            names.update(a.asname or a.name for a in node.names)
    return names


def _uses(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def beam_outside_beam_classes(name: str, tree: ast.Module) -> list[str]:
    """Where a transforms/ module touches Beam outside a class derived from a Beam class: its import is allowed
    at the top of the module, every other use must sit in the thin DoFn/PTransform part."""
    names = _beam_names(tree)
    if not names:
        return []
    problems = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) and names & {
            a.asname or a.name.split(".")[0] for a in node.names
        }:
            continue
        if isinstance(node, ast.ClassDef) and any(_uses(base, names) for base in node.bases):
            continue
        inner_imports = any(
            isinstance(n, ast.Import | ast.ImportFrom) and _beam_names(ast.Module([n], [])) for n in ast.walk(node)
        )
        if _uses(node, names) or inner_imports:
            what = getattr(node, "name", type(node).__name__)
            problems.append(f"{name}, line {node.lineno} ({what}): Beam used outside a DoFn/PTransform class")
    return problems


# ---------------------------------------------------------------------------------------------- the project


@pytest.fixture(scope="module")
def modules() -> dict[str, ast.Module]:
    return project_modules(PACKAGE)


def test_every_package_is_read(modules) -> None:
    assert {layer_of(name) for name in modules} == {*PACKAGES, NAMESPACE} and len(modules) > 150
    assert "bertcorpus.wordpiece.tokenizer" in modules and "bertcorpus.pipeline.extract.books_job" in modules


def test_every_import_names_the_namespace(modules) -> None:
    assert bare_imports(modules) == []


def test_dependencies_run_pipeline_transforms_wordpiece(modules) -> None:
    assert layer_violations(dependencies(modules)) == []


def test_no_import_circle_between_project_modules(modules) -> None:
    assert import_circles(dependencies(modules)) == []


def test_no_import_circle_between_the_folders_of_pipeline(modules) -> None:
    assert import_circles(room_graph(dependencies(modules))) == []


def test_transforms_use_beam_only_in_their_dofns(modules) -> None:
    problems = [
        p
        for name, tree in modules.items()
        if name.startswith("bertcorpus.transforms.")
        for p in beam_outside_beam_classes(name, tree)
    ]
    assert problems == []


# ---------------------------------------------------------------------------------------------- the checks fail


def write_tree(root: Path, files: dict[str, str]) -> dict[str, ast.Module]:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return project_modules(root)


def test_an_arrow_back_up_is_found(tmp_path: Path) -> None:
    modules = write_tree(
        tmp_path,
        {
            "wordpiece/__init__.py": "",
            "wordpiece/tokenizer.py": "from bertcorpus.transforms.ranges import concat_ranges\n",
            "transforms/__init__.py": "",
            "transforms/ranges.py": "import numpy\n",
            "transforms/steps.py": "def run():\n    from bertcorpus.pipeline import output\n",
            "pipeline/__init__.py": "",
            "pipeline/output.py": "import bertcorpus\nfrom bertcorpus.transforms import steps\n"
            "from bertcorpus.wordpiece.tokenizer import x\n",
            "trainer/__init__.py": "",
            "trainer/data.py": "from . import model\nfrom bertcorpus.wordpiece import tokenizer\n"
            "from bertcorpus.pipeline import output\n",
            "trainer/model.py": "",
            "__init__.py": "",
            "loader.py": "from bertcorpus.trainer.data import x\n",
        },
    )
    assert layer_violations(dependencies(modules)) == [
        "bertcorpus.trainer.data imports bertcorpus.pipeline.output: trainer/ may import only transforms, wordpiece",
        "bertcorpus.transforms.steps imports bertcorpus.pipeline.output: transforms/ may import only wordpiece",
        "bertcorpus.wordpiece.tokenizer imports bertcorpus.transforms.ranges: wordpiece/ may import only nothing "
        "else of the project",
    ]


def test_an_import_outside_the_namespace_is_found(tmp_path: Path) -> None:
    modules = write_tree(
        tmp_path,
        {
            "pipeline/__init__.py": "",
            "pipeline/a.py": "import json\nfrom bertcorpus.pipeline import b\nfrom pipeline import c\n",
            "pipeline/b.py": "def f():\n    import trainer.loader\n",
        },
    )
    assert bare_imports(modules) == [
        "bertcorpus.pipeline.a, line 3: imports pipeline outside the bertcorpus namespace",
        "bertcorpus.pipeline.b, line 2: imports trainer.loader outside the bertcorpus namespace",
    ]


def test_circles_are_found_also_through_imports_in_functions(tmp_path: Path) -> None:
    modules = write_tree(
        tmp_path,
        {
            "pipeline/__init__.py": "",
            "pipeline/cli/job_skeleton.py": "from bertcorpus.pipeline.engines.runners import make_pipeline\n",
            "pipeline/engines/runners.py": "def fail():\n    from bertcorpus.pipeline.cli import job_skeleton\n",
            "pipeline/a.py": "import bertcorpus.pipeline.b\n",
            "pipeline/b.py": "from .c import x\n",
            "pipeline/c.py": "from bertcorpus.pipeline import a\n",
            "pipeline/d.py": "from bertcorpus.pipeline import a\n",
        },
    )
    assert import_circles(dependencies(modules)) == [
        ["bertcorpus.pipeline.a", "bertcorpus.pipeline.b", "bertcorpus.pipeline.c"],
        ["bertcorpus.pipeline.cli.job_skeleton", "bertcorpus.pipeline.engines.runners"],
    ]


def test_a_circle_of_folders_is_found_where_no_two_modules_import_each_other(tmp_path: Path) -> None:
    """sinks/up_to_date.py once took a fingerprint from inputs/, which takes its paths from sinks/output.py."""
    modules = write_tree(
        tmp_path,
        {
            "pipeline/__init__.py": "",
            "pipeline/tally.py": "",
            "pipeline/inputs/discovery.py": "from bertcorpus.pipeline.sinks.output import is_remote\n",
            "pipeline/inputs/streams.py": "from bertcorpus.pipeline import tally\n",
            "pipeline/sinks/output.py": "from bertcorpus.pipeline import tally\n",
            "pipeline/sinks/up_to_date.py": "from bertcorpus.pipeline.inputs.streams import head_tail_sha256\n",
        },
    )
    assert import_circles(dependencies(modules)) == []
    assert import_circles(room_graph(dependencies(modules))) == [
        ["bertcorpus.pipeline.inputs", "bertcorpus.pipeline.sinks"]
    ]


def test_beam_in_pure_logic_is_found(tmp_path: Path) -> None:
    modules = write_tree(
        tmp_path,
        {
            "transforms/__init__.py": "",
            "transforms/step.py": """
import apache_beam as beam
from apache_beam.metrics import Metrics


def pure(x):
    return x + 1


def counted(x):
    Metrics.counter("step", "x").inc()
    return x


class Plain:
    def run(self):
        from apache_beam.io.filesystems import FileSystems
        return FileSystems


class Step(beam.DoFn):
    def process(self, x):
        Metrics.counter("step", "x").inc()
        yield pure(x)
""",
        },
    )
    assert beam_outside_beam_classes("bertcorpus.transforms.step", modules["bertcorpus.transforms.step"]) == [
        "bertcorpus.transforms.step, line 10 (counted): Beam used outside a DoFn/PTransform class",
        "bertcorpus.transforms.step, line 15 (Plain): Beam used outside a DoFn/PTransform class",
    ]
