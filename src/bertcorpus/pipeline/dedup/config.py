"""What a `dedup` run is asked to do: its sources in priority order and its config, from the flags that
command.py adds.

A source is a documents output: an extraction's (or an earlier dedup's) output folder, which stands for the documents
its manifest lists, documents Parquet, or JSONL, each a file, a folder's worth or a pattern. Its NAME (the folder's
or file's name without suffixes, or NAME=PATH) names its output folder, OUT/NAME, and its rows in the ledger.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field

from apache_beam.io.filesystems import FileSystems

from bertcorpus.pipeline.cli.shared_flags import (
    MAX_DOCUMENT_MB,
    check_error_rate,
    check_language_flags,
    language_setting,
)
from bertcorpus.pipeline.errors import UserError
from bertcorpus.pipeline.inputs.discovery import find_inputs
from bertcorpus.pipeline.inputs.formats import guess_format
from bertcorpus.pipeline.inputs.reads import plan_reads
from bertcorpus.pipeline.inputs.streams import estimated_text_bytes
from bertcorpus.pipeline.sinks import documents
from bertcorpus.pipeline.sinks.output import FILESYSTEM_ERRORS, MANIFEST, glob_folder, has_glob, is_remote
from bertcorpus.transforms.language_id import LanguageSetting

POLICIES = ("cut", "drop")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SUFFIXES = (".zst", ".gz", ".bz2", ".parquet", ".jsonl", ".json")


@dataclass
class Source:
    name: str
    path: str  # as given, made absolute where local
    files: list[tuple[str, int]] = field(default_factory=list)  # (path, size), empty in an offline dry run


@dataclass
class DedupConfig:
    sources: list[Source]
    output: str
    num_shards: list[int]  # documents files per source
    shingle_words: int = 5
    num_hashes: int = 160
    bands: int = 20
    rows: int = 8
    threshold: float = 0.8
    cc_rounds: int = 6
    benchmarks: list[str] = field(default_factory=list)
    benchmark_names: list[str] = field(default_factory=list)
    benchmark_text_fields: list[str] = field(default_factory=list)
    ngram: int = 13
    min_ngram: int = 8
    contamination: str = "cut"
    cut_margin: int = 200
    max_splits: int = 10
    min_piece_chars: int = 200
    language: LanguageSetting = field(default_factory=LanguageSetting)
    max_document_mb: float = MAX_DOCUMENT_MB  # longer documents are cut into pieces, million characters
    strict: bool = False
    max_error_rate: float = 0.01

    @property
    def max_document_chars(self) -> int:
        return int(self.max_document_mb * 1e6)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.sources]

    def tasks(self) -> list[tuple[int, str, int, int]]:
        """(priority, path, start, stop) of every reader: a large JSONL file is read in byte spans."""
        return [
            (priority, *task)
            for priority, source in enumerate(self.sources)
            for path, size in source.files
            for task in plan_reads(path, size, "auto")
        ]

    def describe(self) -> dict:
        d = asdict(self)
        d["sources"] = [{"name": s.name, "path": s.path, "priority": i} for i, s in enumerate(self.sources)]
        return d


# ---------------------------------------------------------------------------------------------- sources


def _split_name(given: str) -> tuple[str | None, str]:
    """NAME=PATH → (NAME, PATH); a PATH that exists as it is, or holds no such prefix, has no NAME."""
    name, sep, path = given.partition("=")
    if sep and _NAME.fullmatch(name) and "/" not in name and not os.path.lexists(given):
        return name, path
    return None, given


def source_name(path: str) -> str:
    """A folder's name, or a file's name without its format and compression suffixes; a pattern's folder."""
    if has_glob(path):
        path = glob_folder(path)
    base = os.path.basename(path.rstrip("/"))
    for suffix in _SUFFIXES:
        base = base[: -len(suffix)] if base.lower().endswith(suffix) else base
    return base


def _manifest_of(folder: str) -> dict | None:
    """The parsed manifest.json of a folder, or None where it has none (or it is not JSON)."""
    path = FileSystems.join(folder, MANIFEST)
    try:
        if not FileSystems.exists(path):
            return None
        with FileSystems.open(path, compression_type="uncompressed") as f:
            return json.load(f)
    except FILESYSTEM_ERRORS as e:
        raise UserError(f"cannot read {path}: {e}") from None
    except ValueError:
        return None


def _is_folder(path: str) -> bool:
    if is_remote(path):
        return not os.path.splitext(path.rstrip("/"))[1] or path.endswith("/")
    return os.path.isdir(path)


def _check_documents_output(given: str, path: str, files: list[tuple[str, int]]) -> None:
    """Refuse (UserError) a source that is not a documents output."""
    what = "an extraction's or dedup's output folder (with its manifest.json), documents Parquet, or JSONL"
    if _is_folder(path) and not has_glob(path):
        manifest = _manifest_of(path)
        if manifest is None:
            raise UserError(f"--input {given} is not a documents output: the folder has no {MANIFEST} ({what})")
        outputs = manifest.get("outputs") if isinstance(manifest, dict) else None
        if not (isinstance(outputs, dict) and isinstance(outputs.get("documents"), list)):
            job = manifest.get("job", "unknown") if isinstance(manifest, dict) else "unknown"
            hint = ": name one of its sources' folders" if job == "dedup" else ""
            raise UserError(f"--input {given} is not a documents output: its {MANIFEST} is a {job} run's{hint}")
        return
    for file, _ in files:
        if guess_format(file) not in ("documents", "jsonl"):
            raise UserError(f"--input {given} is not a documents output: {file} is neither Parquet nor JSONL ({what})")
        if guess_format(file) == "documents" and not is_remote(file):
            _check_parquet_columns(given, file)


def _check_parquet_columns(given: str, path: str) -> None:
    import pyarrow.parquet as pq

    try:
        names = set(pq.read_schema(path).names)
    except Exception as e:  # pyarrow raises several types for a file that is no Parquet
        raise UserError(f"--input {given} is not a documents output: {path}: {str(e).splitlines()[0]}") from None
    if not {"id", "text"} <= names:
        raise UserError(f"--input {given} is not a documents output: {path} has no id and text columns")


def resolve_sources(inputs: list[str], dry_run: bool) -> list[Source]:
    """The sources in the order given, each checked: a documents output, a valid name of its own, no file in two of
    them. A dry run lists no remote source (it must work offline), and passes over a local one that is not there."""
    sources, seen_paths, owners = [], {}, {}
    for given in inputs:
        name, path = _split_name(given)
        path = path if is_remote(path) else os.path.abspath(path) + "/" * path.endswith("/")
        name = name or source_name(path)
        if not _NAME.fullmatch(name):
            raise UserError(
                f"--input {given}: {name!r} cannot name an output folder; give the source a name as NAME=PATH"
            )
        where = path.rstrip("/") if is_remote(path) else os.path.realpath(path)
        if where in seen_paths:
            raise UserError(
                f"--input {seen_paths[where]} and {given} are the same {'folder' if _is_folder(path) else 'file'}"
            )
        seen_paths[where] = given
        same_name = next((s for s in sources if s.name == name), None)
        if same_name is not None:
            raise UserError(
                f"--input {same_name.path} and {given} would both be written to {name}/; name them as NAME=PATH"
            )
        if dry_run and (is_remote(path) or not os.path.lexists(path)):  # a dry run or a drawing needs no data
            sources.append(Source(name, path, []))
            continue
        files = find_inputs([path]).files
        _check_documents_output(given, path, files)
        for file, _ in files:
            key = file if is_remote(file) else os.path.realpath(file)
            if key in owners:
                raise UserError(f"{file} is in two inputs, {owners[key]} and {given}; give each file once")
            owners[key] = given
        sources.append(Source(name, path, files))
    return sources


# ---------------------------------------------------------------------------------- the flags, checked


def check_numbers(args) -> int:
    """Refuse (UserError) settings that cannot work; the rows per band."""
    check_error_rate(args)
    if not 0 < args.threshold <= 1:
        raise UserError(f"--threshold must be in (0, 1], not {args.threshold:g}")
    rows = args.rows or max(1, args.num_hashes // args.bands)
    if args.bands * rows != args.num_hashes:
        raise UserError(
            f"--bands {args.bands} × --rows {rows} = {args.bands * rows} does not fit --num-hashes "
            f"{args.num_hashes}: bands × rows must equal the number of hashes"
        )
    if args.min_ngram > args.ngram:
        raise UserError(f"--min-ngram {args.min_ngram} is more than --ngram {args.ngram}")
    for flag, value in (("--cut-margin", args.cut_margin), ("--max-splits", args.max_splits)):
        if value < 0:
            raise UserError(f"{flag} must be >= 0, not {value}")
    if args.min_piece_chars < 0:
        raise UserError(f"--min-piece-chars must be >= 0, not {args.min_piece_chars}")
    if args.benchmark_text_field and not args.decontaminate:
        raise UserError("--benchmark-text-field names the text of --decontaminate files, and none is given")
    return rows


def config_from_args(args, dry_run: bool) -> DedupConfig:
    from bertcorpus.pipeline.dedup.benchmark_files import benchmark_names, read_benchmark

    rows = check_numbers(args)
    check_language_flags(args)
    sources = resolve_sources(args.input, dry_run)
    names = benchmark_names(args.decontaminate)
    for path, name in zip(args.decontaminate, names):
        if not (dry_run and is_remote(path)):
            read_benchmark(path, name, args.benchmark_text_field)  # a file that cannot be read stops the run here
    shards = [
        args.num_shards or documents.default_num_shards(int(sum(estimated_text_bytes(p, s) for p, s in source.files)))
        for source in sources
    ]
    return DedupConfig(
        sources=sources,
        output=args.output,
        num_shards=shards,
        shingle_words=args.shingle_words,
        num_hashes=args.num_hashes,
        bands=args.bands,
        rows=rows,
        threshold=args.threshold,
        cc_rounds=args.cc_rounds,
        benchmarks=[p if is_remote(p) else os.path.abspath(p) for p in args.decontaminate],
        benchmark_names=names,
        benchmark_text_fields=args.benchmark_text_field,
        ngram=args.ngram,
        min_ngram=args.min_ngram,
        contamination=args.contamination,
        cut_margin=args.cut_margin,
        max_splits=args.max_splits,
        min_piece_chars=args.min_piece_chars,
        language=language_setting(args),
        max_document_mb=args.max_document_mb,
        strict=args.strict,
        max_error_rate=args.max_error_rate,
    )
