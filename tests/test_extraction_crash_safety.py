"""Crash-safe reruns of `extract-wiki`, `extract-books` and `vocab` (test_crash_safety.py does `create`): a run killed
while it writes or just before its manifest leaves nothing that looks like output, its rerun first clears what the
killed run left and then gives the same bytes as a clean run, a killed `--overwrite` run never leaves the old manifest
over new files, and the steps that write files give the same result when a bundle is retried.

The manifests name their output paths, so every run of a job writes to the same path: the clean run is made there
once and moved aside, and each test then starts from an empty place at that path.

`vocab` has no .staging area: with --count-with-beam --counts-dir its Beam job writes counts files through
WriteToText (temporary files in COUNTS/beam-temp-*/, renamed to COUNTS/train-*.tsv and heldout-*.tsv) and then
COUNTS/manifest.json; vocab.txt follows, written by an atomic rename. Those stand in for the staging area and the
manifest here, and a third kill point, between the counts manifest and vocab.txt, covers the training step.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_crash_safety import digest, kill_when

from bertcorpus.pipeline.errors import UserError

from conftest import DATA, run_cli
from wiki_fixtures import ENWIKI_2014

BOOKS = DATA / "books"
VOCAB_BOOKS = (BOOKS / "gutenberg_utf8" / "11-0.txt", BOOKS / "gutenberg_utf8" / "84-0.txt")


def listing(root: Path, pattern: str) -> list[Path]:
    """root.glob(pattern) while a run may be working there: listed again when a directory goes away mid-listing."""
    while True:
        try:
            return list(root.glob(pattern))
        except FileNotFoundError:
            continue


def files_under(root: Path, pattern: str) -> list[Path]:
    return [p for p in listing(root, pattern) if p.is_file()]


@dataclass
class Job:
    """How to run one job into an output tree ROOT, and how to read the state of that tree."""

    name: str
    command: Callable[[Path], list[str]]  # ROOT → the command line (the same for the clean run and the reruns)
    manifest: str  # the file, relative to ROOT, that says the output is complete
    writing: str  # glob, relative to ROOT, of the files a run writes before it publishes
    staged: Callable[[dict[str, int]], dict[str, int]]  # clean tree {path: size} → those files when all written
    leftovers: str  # glob of what a killed run leaves that a rerun must clear before writing
    done: str  # the file, relative to ROOT, that a run writes last
    finished: Callable[[Path], list[Path]]  # what would make ROOT look like (part of) a finished run
    scratch: str | None = None  # glob of temporary places that are gone once every file is published
    # filled in by the clean run
    root: Path | None = None
    tree: dict[str, str] | None = None  # path → sha256 of every file of the clean run
    dirs: set[str] | None = None  # and its directories
    sizes: dict[str, int] | None = None
    saved: Path | None = None  # a copy of the clean run


def extraction_job(name: str, command: Callable[[Path], list[str]]) -> Job:
    return Job(
        name,
        command,
        manifest="manifest.json",
        writing=".staging/**/*",
        staged=lambda sizes: {f".staging/{p}": n for p, n in sizes.items() if p != "manifest.json"},
        leftovers=".staging/**/*",
        done="manifest.json",
        # a manifest, or any file outside the staging area
        finished=lambda root: [
            p for p in root.rglob("*") if p.is_file() and ".staging" not in p.relative_to(root).parts
        ],
    )


def wiki_command(root: Path) -> list[str]:
    return ["extract-wiki", "--input", str(ENWIKI_2014), "--output", str(root), "--num-shards", "3"]


def books_command(root: Path) -> list[str]:
    return ["extract-books", "--input", str(BOOKS), "--output", str(root), "--num-shards", "2"]


def snapshot(root: Path) -> tuple[dict[str, str], set[str]]:
    return digest(root), {str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir()}


def clean_run(job: Job, base: Path) -> Job:
    """Run the job once, uninterrupted, at base/out; remember its tree and move it aside to base/clean."""
    job.root = base / "out"
    assert run_cli(*job.command(job.root)) == 0
    job.tree, job.dirs = snapshot(job.root)
    job.sizes = {p: (job.root / p).stat().st_size for p in job.tree}
    assert job.staged(job.sizes), "the clean run wrote no files to stage"
    job.saved = base / "clean"
    job.root.rename(job.saved)
    return job


@pytest.fixture(scope="module")
def extract_wiki(tmp_path_factory) -> Job:
    return clean_run(extraction_job("extract-wiki", wiki_command), tmp_path_factory.mktemp("extract-wiki"))


@pytest.fixture(scope="module")
def extract_books(tmp_path_factory) -> Job:
    return clean_run(extraction_job("extract-books", books_command), tmp_path_factory.mktemp("extract-books"))


@pytest.fixture(scope="module")
def vocab(tmp_path_factory) -> Job:
    """Two real novels as ~8 KB JSONL documents (as in test_vocab.py), counted by the Beam job."""
    base = tmp_path_factory.mktemp("vocab")
    corpus = base / "books.jsonl"
    with open(corpus, "w", encoding="utf-8") as f:
        for book in VOCAB_BOOKS:
            paragraphs, part = book.read_text(encoding="utf-8").split("\n\n"), []
            for i, paragraph in enumerate(paragraphs):
                part.append(paragraph)
                if sum(map(len, part)) >= 8000 or i == len(paragraphs) - 1:
                    f.write(json.dumps({"id": f"{book.stem}:{i}", "text": "\n\n".join(part)}) + "\n")
                    part = []

    def command(root: Path) -> list[str]:
        # --holdout-fraction 0.1 so that the held-out counts file is not empty
        return [
            "vocab",
            "--input",
            str(corpus),
            "--output",
            str(root / "vocab.txt"),
            "--vocab-size",
            "8000",
            "--holdout-fraction",
            "0.1",
            "--count-with-beam",
            "--counts-dir",
            str(root / "counts"),
        ]

    job = Job(
        "vocab",
        command,
        manifest="counts/manifest.json",
        writing="counts/beam-temp-*/*",
        staged=lambda sizes: {p: n for p, n in sizes.items() if p.endswith(".tsv")},
        leftovers="counts/*",
        done="vocab.txt",
        scratch="counts/beam-temp-*",
        finished=lambda root: [p for p in (root / "vocab.txt", root / "counts" / "manifest.json") if p.exists()],
    )
    job = clean_run(job, base)
    assert set(job.staged(job.sizes)) == {"counts/train-00000-of-00001.tsv", "counts/heldout-00000-of-00001.tsv"}
    assert all(job.sizes.values())
    return job


@pytest.fixture
def job(request) -> Job:
    """The job named by the test's parameter, its output path empty at the start and removed after the test."""
    job = request.getfixturevalue(request.param)
    assert not job.root.exists()
    yield job
    shutil.rmtree(job.root, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- the kill points


def writing(job: Job) -> Callable[[], bool]:
    """The first file a run writes before publishing has appeared (it may still be being written)."""
    return lambda: bool(files_under(job.root, job.writing))


def before_the_manifest(job: Job) -> Callable[[], bool]:
    """Every file the run publishes is written in full (the sizes of the clean run's), no temporary place is left
    (vocab: WriteToText has removed its beam-temp-* directories), and no manifest yet."""
    expected = job.staged(job.sizes)

    def reached() -> bool:
        for path, size in expected.items():
            try:
                if (job.root / path).stat().st_size != size:
                    return False
            except FileNotFoundError:
                return False
        if job.scratch and listing(job.root, job.scratch):
            return False
        return not (job.root / job.manifest).exists()

    return reached


def before_vocab_txt(job: Job) -> Callable[[], bool]:
    """vocab only: the counts manifest is written and training has begun; vocab.txt is not there yet."""
    return lambda: (job.root / job.manifest).exists()


KILL_POINTS = {
    "while writing": writing,
    "before the manifest": before_the_manifest,
    "before vocab.txt": before_vocab_txt,
}


def assert_same_tree_as_clean(job: Job) -> None:
    # Every file and directory is the clean run's, byte for byte: nothing a killed run left (such as the
    # COUNTS/beam-temp-*/ directories of vocab's text writers) may survive the rerun.
    tree, dirs = snapshot(job.root)
    assert tree == job.tree and dirs == job.dirs


def rerun_clears_leftovers_first(job: Job) -> None:
    """Start the rerun and kill it as soon as what the killed run left is gone: that must happen before the rerun
    publishes anything (a rerun that did not clear them would get there only once its own output is in place).
    A vocab run killed while its first counts file is written may have left only WriteToText's temporary files,
    which no rerun clears (see assert_same_tree_as_clean); then there is nothing to watch."""
    if not files_under(job.root, job.leftovers):
        assert job.name == "vocab"
        return
    kill_when(job.command(job.root), lambda: not files_under(job.root, job.leftovers) or (job.root / job.done).exists())
    assert not job.finished(job.root)


def assert_no_temporary_files(job: Job) -> None:
    """Neither manifest.json.tmp nor vocab.txt.tmp-PID: a rerun would not clear a temporary file of a killed run."""
    assert not [p for p in job.root.rglob("*.tmp*") if ".staging" not in p.parts and "beam-temp-" not in str(p)]


@pytest.mark.parametrize(
    "job, point",
    [
        pytest.param(job, point, id=f"{job}-{point.replace(' ', '-')}")
        for job in ("extract_wiki", "extract_books", "vocab")
        for point in ("while writing", "before the manifest") + (("before vocab.txt",) if job == "vocab" else ())
    ],
    indirect=["job"],
)
def test_killed_run_then_rerun_is_byte_identical(job, point):
    kill_when(job.command(job.root), KILL_POINTS[point](job))
    if point == "before vocab.txt":
        # The counts are complete, the vocab is not: vocab.txt appears whole or not at all.
        assert (job.root / job.manifest).exists() and not (job.root / "vocab.txt").exists()
    else:
        # No manifest, and nothing published: the directory cannot be mistaken for output.
        assert not job.finished(job.root)
    assert_no_temporary_files(job)
    rerun_clears_leftovers_first(job)
    # The rerun needs no --overwrite: nothing finished is there to replace.
    assert run_cli(*job.command(job.root)) == 0
    assert_same_tree_as_clean(job)


@pytest.mark.parametrize("job", ["extract_wiki", "extract_books", "vocab"], indirect=True)
def test_killed_rerun_over_finished_output_never_leaves_a_stale_manifest(job):
    shutil.copytree(job.saved, job.root)  # the clean run, at its own path
    # Other settings, so that what the killed run writes is new; killed once it is writing.
    changed = ["--seed", "7"] if job.name == "vocab" else ["--num-shards", "4"]
    kill_when([*job.command(job.root), "--overwrite", *changed], writing(job))
    # The old manifest went first, so the old files no longer claim to be a finished run.
    assert not (job.root / job.manifest).exists()
    assert_no_temporary_files(job)
    old = {p: (job.saved / p).read_bytes() for p in job.tree}
    if job.name == "vocab":
        # The old counts files went with it (any there is the new run's, which holds out other documents);
        # vocab.txt, replaced only by a rename, is still the old one.
        assert all(p.read_bytes() != old[str(p.relative_to(job.root))] for p in files_under(job.root, "counts/*.tsv"))
        assert (job.root / "vocab.txt").read_bytes() == old["vocab.txt"]
    else:
        # The old shards stay as they were until the new run's publishing replaces them.
        assert {str(p.relative_to(job.root)): p.read_bytes() for p in job.finished(job.root)} == {
            p: data for p, data in old.items() if p != "manifest.json"
        }
    assert run_cli(*job.command(job.root), "--overwrite") == 0
    assert_same_tree_as_clean(job)


# ---------------------------------------------------------------------------------------------- bundle retries


def tagged(outputs: list) -> list:
    """DoFn outputs, with tagged ones as (tag, value) so that they compare by value."""
    return [(o.tag, o.value) if hasattr(o, "tag") else o for o in outputs]


def real_documents() -> list[dict]:
    """Documents cut from a real book, one id twice (the writer keeps the first of a sorted shard)."""
    text = (BOOKS / "gutenberg_utf8" / "11-0.txt").read_text(encoding="utf-8")
    paragraphs = [p for p in text.split("\n\n") if len(p) > 200][:40]
    docs = [
        {
            "id": f"books:alice-{i:03d}",
            "source": "books",
            "title": "Alice" if i % 3 else None,
            "text": p,
            "url": None if i % 2 else f"https://example.org/{i}",
            "language": "en",
            "language_confidence": None,
        }
        for i, p in enumerate(paragraphs)
    ]
    return docs + [dict(docs[5])]


def test_document_writers_and_publish_are_idempotent_under_retries(tmp_path):
    from bertcorpus.pipeline.sinks import documents, output

    out = tmp_path / "out"
    docs = real_documents()
    errors = [
        {"input": "a.xml.bz2", "where": "byte 10", "reason": "truncated", "detail": "ends early"},
        {"input": "b.txt", "where": "file", "reason": "binary", "detail": "png"},
    ]
    doc_writer = documents.WriteDocuments(str(out), 2).writer
    error_writer = documents.WriteErrors(str(out)).writer
    shards = {0: [], 1: []}
    for doc in docs:
        shard, row = documents._keyed(doc, documents._document_row, 2)
        shards[shard].append(row)
    error_rows = [documents._keyed(e, documents._error_row, 1)[1] for e in errors]

    files, counts, staged = [], [], {}
    for writer, shard, rows in [(doc_writer, 0, shards[0]), (doc_writer, 1, shards[1]), (error_writer, 0, error_rows)]:
        first = tagged(list(writer.process((shard, rows))))
        path = out / ".staging" / first[0]["path"]
        staged[first[0]["path"]] = path.read_bytes()
        # A retried bundle gets the same rows, in whatever order the shuffle gives them this time; the file it
        # writes is the same.
        again = list(rows)
        random.Random(shard).shuffle(again)
        assert tagged(list(writer.process((shard, again)))) == first
        assert path.read_bytes() == staged[first[0]["path"]]
        files.append(first[0])
        counts += [value for tag, value in first[1:]]
    assert [f["path"] for f in files] == [
        "documents-00000-of-00002.parquet",
        "documents-00001-of-00002.parquet",
        "errors-00000-of-00001.jsonl",
    ]
    assert sum(f["records"] for f in files[:2]) == len(docs) - 1

    total = {"read": len(docs) + len(errors), "errors:truncated": 1, "errors:binary": 1}
    for c in counts:
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    inputs = [{"path": "b.txt", "size": 3}, {"path": "a.xml.bz2", "size": 10}]
    publish = documents._Publish(str(out), "extract-books", {"output": str(out)}, None)

    # The manifest is the last thing publishing writes: when writing it fails, every file has already moved.
    (out / "manifest.json.tmp").mkdir()
    with pytest.raises(UserError, match=r"cannot write .*manifest\.json.*: Is a directory"):
        list(publish.process(list(reversed(files)), total, inputs))
    assert not (out / "manifest.json").exists() and not (out / ".staging").exists()
    assert {p: (out / p).read_bytes() for p in staged} == staged
    (out / "manifest.json.tmp").rmdir()

    # The retry finds the files already moved, and writes the manifest; so does a second retry, byte for byte.
    manifest = tagged(list(publish.process(files, total, inputs)))
    manifest_bytes = (out / "manifest.json").read_bytes()
    assert tagged(list(publish.process(list(reversed(files)), total, list(reversed(inputs))))) == manifest
    assert (out / "manifest.json").read_bytes() == manifest_bytes
    assert json.loads(manifest_bytes) == manifest[0]
    assert manifest[0]["documents"]["kept"] == len(docs) - 1 and manifest[0]["documents"]["errors"] == 2
    assert {p: (out / p).read_bytes() for p in staged} == staged
    assert sorted(p.name for p in out.iterdir()) == sorted([*staged, "manifest.json"])

    # A bundle retried after a crash between moves: one file moved, the others still staged.
    again = tmp_path / "again"
    (again / ".staging").mkdir(parents=True)
    for rel, data in staged.items():
        (again / ".staging" / rel).write_bytes(data)
    (again / ".staging" / files[1]["path"]).rename(again / files[1]["path"])
    output.publish(str(again), list(staged), manifest[0], documents.OWNED_GLOBS)
    assert {p: (again / p).read_bytes() for p in staged} == staged
    assert (again / "manifest.json").read_bytes() == manifest_bytes and not (again / ".staging").exists()


def test_vocab_writers_are_idempotent_under_retries(tmp_path):
    from bertcorpus.pipeline.sinks import output
    from bertcorpus.pipeline.vocab.counting import VocabConfig
    from bertcorpus.pipeline.vocab.job import WriteCountsManifest
    from bertcorpus.wordpiece.training import TrainingConfig

    counts_dir = tmp_path / "counts"
    cfg = VocabConfig(
        inputs=["books.jsonl"],
        output=str(tmp_path / "vocab.txt"),
        training=TrainingConfig(),
        count_with_beam=True,
        counts_dir=str(counts_dir),
    )
    train_files = [str(counts_dir / f"train-0000{i}-of-00002.tsv") for i in range(2)]
    held_out = [str(counts_dir / "heldout-00000-of-00001.tsv")]
    tallies = {
        "documents_read": 3,
        "documents_train": 2,
        "documents_heldout": 1,
        "train_words": 40,
        "heldout_words": 9,
        "too_long": 0,
    }
    # Per-reader file stats: b.jsonl read whole, a.jsonl in two spans (the first span's reader hashes the file).
    files = [
        {"path": "b.jsonl", "size": 5, "sha256": "b5", "documents": 1, "replaced_chars": 0, "skipped": {}},
        {"path": "a.jsonl", "size": 7, "sha256": "a7", "documents": 1, "replaced_chars": 1, "skipped": {}},
        {"path": "a.jsonl", "size": 0, "sha256": "", "documents": 1, "replaced_chars": 0, "skipped": {"x": 1}},
    ]
    pruning, symbols = (0, 0, 0), {"first": {}, "rest": {}}
    writer = WriteCountsManifest(cfg)
    first = list(writer.process(tallies, train_files, held_out, pruning, symbols, files))
    manifest = counts_dir / "manifest.json"
    once = manifest.read_bytes()
    # The retry gets its side inputs in another order, and rewrites the same manifest.
    assert list(writer.process(tallies, train_files[::-1], held_out, pruning, symbols, files[::-1])) == first
    assert manifest.read_bytes() == once and json.loads(once) == first[0]
    assert first[0]["train_files"] == train_files
    assert first[0]["inputs"] == [
        {
            "path": "a.jsonl",
            "size": 7,
            "sha256": "a7",
            "documents": 2,
            "replaced_chars": 1,
            "skipped": {"x": 1},
            "errors": {},
        },
        {
            "path": "b.jsonl",
            "size": 5,
            "sha256": "b5",
            "documents": 1,
            "replaced_chars": 0,
            "skipped": {},
            "errors": {},
        },
    ]
    assert sorted(p.name for p in counts_dir.iterdir()) == ["manifest.json"]

    # vocab.txt is written by a rename: writing it again leaves the same bytes and no temporary file.
    data = "".join(f"{t}\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "##s"]).encode()
    output.write_atomically(cfg.output, data)
    output.write_atomically(cfg.output, data)
    assert Path(cfg.output).read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts", "vocab.txt"]
