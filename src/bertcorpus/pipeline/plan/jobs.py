"""Each stage of a plan from the words its job takes: the job's own parser reads them and the job's own code lists
the inputs (`bertcorpus plan extract-wiki|extract-books|dedup|vocab|create ...`), or the whole chain, each stage
from what the one before it is predicted to write (`bertcorpus plan chain ...`)."""

from __future__ import annotations

import json
import os

from bertcorpus.pipeline.cli.commands import OneLineParser, parse_command
from bertcorpus.pipeline.cli.shared_flags import positive_int
from bertcorpus.pipeline.inputs.streams import estimated_text_bytes
from bertcorpus.pipeline.plan import stages
from bertcorpus.pipeline.plan.prices import Workers
from bertcorpus.pipeline.plan.stages import Input, Stage, joined
from bertcorpus.pipeline.sinks.output import is_remote
from bertcorpus.transforms.manifest_paths import manifest_paths_problem


def job_stage(command: str, args, workers: Workers, dry_run: bool) -> Stage:
    """The stage a job's parsed arguments describe, its inputs listed by the job's own code."""
    return _PLANNERS[command](args, workers, dry_run)


def _extract_wiki(args, workers: Workers, dry_run: bool) -> Stage:
    from bertcorpus.pipeline.extract.wiki_command import config_from_args

    config = config_from_args(args, dry_run)
    dumps = config.input_files[: len(config.inputs)] if config.index else config.input_files
    return stages.extract_wiki(_listed(dumps), config.num_shards, workers)


def _extract_books(args, workers: Workers, dry_run: bool) -> Stage:
    from bertcorpus.pipeline.extract.books_command import config_from_args

    config = config_from_args(args, dry_run)
    unlisted = [p for p in config.inputs if is_remote(p)] if dry_run else []
    return stages.extract_books(Input.listed(config.input_files, not_listed=unlisted), config.num_shards, workers)


def _dedup(args, workers: Workers, dry_run: bool) -> Stage:
    from bertcorpus.pipeline.dedup.config import config_from_args

    config = config_from_args(args, dry_run)
    files = [f for source in config.sources for f in source.files]
    unlisted = [s.path for s in config.sources if not s.files]
    return stages.dedup(_documents_input(files, unlisted), sum(config.num_shards), bool(config.benchmarks), workers)


def _vocab(args, workers: Workers, dry_run: bool) -> Stage:
    from bertcorpus.pipeline.vocab.command import config_from_args

    config = config_from_args(args)
    text = _found(config.inputs, dry_run)
    return stages.vocab(
        text, config.sample_fraction, config.training.vocab_size, config.max_words, config.count_with_beam
    )


def _create(args, workers: Workers, dry_run: bool) -> Stage:
    from bertcorpus.pipeline.create.config import config_from_args

    config = config_from_args(args)
    text = _found(config.inputs, dry_run)
    # Buckets and shards as the job decides them: from the text the listing's sizes suggest.
    listed = sum(estimated_text_bytes(path, size) for path, size in text.files)
    return stages.create(text, config.resolved(listed), workers)


_PLANNERS = {
    "extract-wiki": _extract_wiki,
    "extract-books": _extract_books,
    "dedup": _dedup,
    "vocab": _vocab,
    "create": _create,
}


def _found(patterns: list[str], dry_run: bool) -> Input:
    """The files the patterns name, as create and vocab list them (an extraction folder: the documents its
    manifest lists), with their text and documents as the extraction counted them where it did."""
    from bertcorpus.pipeline.inputs.discovery import find_inputs

    found = find_inputs(patterns, allow_missing=dry_run)
    unlisted = [p for p in patterns if is_remote(p)] if dry_run else []
    return _documents_input(found.files, unlisted)


def _listed(files: list[tuple[str, int]]) -> Input:
    """Files as a dry run lists them: a remote one keeps its pattern and size 0, and is named as not listed."""
    return Input.listed(
        [(p, s) for p, s in files if s or not is_remote(p)], not_listed=[p for p, s in files if not s and is_remote(p)]
    )


def _documents_input(files: list[tuple[str, int]], unlisted=()) -> Input:
    """Documents files with the text and documents they hold: as the manifest beside them counts them (a file's
    share of its folder's characters by its size; its own records), else estimated from its size and name as create
    estimates it. A file's size is a poor guide where its text repeats, which Parquet stores once."""
    estimated = Input.listed(files, None, unlisted)
    text, documents = 0.0, 0
    manifests: dict[str, dict | None] = {}  # by folder: read once, however many of its files are listed
    for path, _ in files:
        folder = os.path.dirname(path)
        if folder not in manifests:
            manifests[folder] = _manifest_beside(folder) if not is_remote(path) else None
        counted = _counted_by_manifest(path, manifests[folder])
        if counted is None:
            return estimated
        share, records = counted
        text, documents = text + share, documents + records
    return Input(list(files), text, documents if files else None, list(unlisted))


def _counted_by_manifest(path: str, manifest: dict | None) -> tuple[float, int] | None:
    """(characters, documents) of a local documents file that an extraction's manifest beside it lists."""
    if manifest is None:
        return None
    listed = {f.get("path"): f for f in manifest.get("outputs", {}).get("documents", []) if isinstance(f, dict)}
    entry = listed.get(os.path.basename(path))
    characters = manifest.get("documents", {}).get("characters")
    total = sum(f.get("bytes") or 0 for f in listed.values())
    if entry is None or not isinstance(characters, int) or not total:
        return None
    return characters * (entry.get("bytes") or 0) / total, int(entry.get("records") or 0)


def _manifest_beside(folder: str) -> dict | None:
    """The extraction manifest in a local folder; None where there is none, or one that is not read (a file it
    lists could lie outside the folder: transforms/manifest_paths.py)."""
    try:
        with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest_paths_problem(manifest):
        return None
    return manifest if isinstance(manifest.get("documents"), dict) else None


# ------------------------------------------------------------------------------------------------ the chain


# create's own required flags, for the chain's create: its input is what the stages before it write.
_CREATE_PLACEHOLDERS = ("create", "--input", "-", "--vocab", "-", "--output", "-")


def chain_usage() -> str:
    """The chain's own flags, as its usage line gives them (without the program's name)."""
    usage = " ".join(_chain_parser().format_usage().split())
    return usage.removeprefix("usage: bertcorpus plan chain ") + ", then create's flags and Beam options"


def _chain_parser() -> OneLineParser:
    """The chain's own flags; the words it leaves are create's flags (--seq-configs, --dupe-factor, --masking, ...)
    and Beam options, which every stage is given."""
    parser = OneLineParser(prog="bertcorpus plan chain", add_help=False)  # `plan --help` shows these flags
    parser.add_argument("--wiki", nargs="+", default=[], metavar="DUMP", help="pages-articles dumps (extract-wiki)")
    parser.add_argument("--wiki-index", nargs="+", metavar="INDEX", help="their multistream indexes, in order")
    parser.add_argument("--books", nargs="+", default=[], metavar="PATH", help="book files or folders (extract-books)")
    parser.add_argument("--dedup", action="store_true", help="dedup the sources before the vocab (default: off)")
    parser.add_argument("--decontaminate", action="store_true", help="dedup with benchmark files (default: off)")
    parser.add_argument("--vocab-size", type=positive_int, default=30000, help="(default: %(default)s)")
    parser.add_argument("--count-with-beam", action="store_true", help="vocab counts with Beam (default: off)")
    return parser


def chain_stages(words: list[str], workers: Workers, dry_run: bool) -> list[Stage]:
    """extract-wiki and extract-books from the files listed, then dedup (with --dedup), vocab and create from what
    the extractions are predicted to write."""
    from bertcorpus.pipeline.create.config import config_from_args
    from bertcorpus.pipeline.vocab.counting import VocabConfig

    parser = _chain_parser()
    chain, rest = parser.parse_known_args(words)
    if not chain.wiki and not chain.books:
        parser.error("give --wiki dumps, --books, or both")
    create_args, beam_args = parse_command([*_CREATE_PLACEHOLDERS, *rest])
    planned: list[Stage] = []
    if chain.wiki:
        index = ["--index", *chain.wiki_index] if chain.wiki_index else []
        wiki, _ = parse_command(["extract-wiki", "--input", *chain.wiki, *index, "--output", "-", *beam_args])
        planned.append(_extract_wiki(wiki, workers, dry_run))
    if chain.books:
        books, _ = parse_command(["extract-books", "--input", *chain.books, "--output", "-", *beam_args])
        planned.append(_extract_books(books, workers, dry_run))
    documents = joined([stages.documents_output(s) for s in planned])
    if chain.dedup:
        planned.append(
            stages.dedup(documents, stages.documents_shards(documents.text_bytes), chain.decontaminate, workers)
        )
    planned.append(stages.vocab(documents, 1.0, chain.vocab_size, VocabConfig.max_words, chain.count_with_beam))
    config = config_from_args(create_args)
    planned.append(stages.create(documents, config.resolved(documents.text_bytes), workers))
    return planned


def chain_beam_options(words: list[str]) -> list[str]:
    """The chain's Beam options: the words that neither its own parser nor create's take."""
    _, rest = _chain_parser().parse_known_args(words)
    return parse_command([*_CREATE_PLACEHOLDERS, *rest])[1]
