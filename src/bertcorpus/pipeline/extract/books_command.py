"""The command line of `bertcorpus extract-books`: its flags, the job's config from them (the book files listed at
launch, the shard count estimated from their size), and the run with its summary. The job is books_job.py's."""

from __future__ import annotations

import math
import os
import sys
from collections import Counter

from bertcorpus.pipeline.cli.shared_flags import (
    add_error_limits,
    add_files,
    add_language,
    add_reuse,
    check_error_rate,
    check_language_flags,
    language_setting,
    positive_int,
)
from bertcorpus.pipeline.extract.book_files import beside, list_inputs, metadata_table
from bertcorpus.pipeline.extract.books_job import JOB, REMOVED_KINDS, BooksConfig, ExtractBooks
from bertcorpus.pipeline.inputs.formats import InputError
from bertcorpus.pipeline.inputs.streams import estimated_text_bytes
from bertcorpus.pipeline.sinks import documents, output
from bertcorpus.transforms.language_id import DETECT
from bertcorpus.transforms.zh_variants import CHOICES, check_converter


def add_arguments(parser) -> None:
    from bertcorpus.pipeline.cli.shared_flags import BooleanFlag

    files = add_files(
        parser,
        inputs="book files, globs or directories (searched at every depth for *.txt, *.text "
        "and *.parquet; a pattern ending in / names directories), local or on any Beam "
        "filesystem (gs://...); .gz, .bz2 and .zst are decompressed by their suffix. One "
        "file is one book: plain text in any common encoding, or HF bookcorpus lines as "
        "text or as Parquet with a `text` column",
        output="output directory: documents-*.parquet, errors-*.jsonl, manifest.json",
    )
    add_reuse(files)
    files.add_argument(
        "--metadata",
        nargs="+",
        default=[],
        metavar="CSV",
        help="PG-19 style metadata.csv files (id,title,year,url) giving titles and URLs by file stem; "
        "a metadata.csv beside the books or one directory up is used without being named (default: none)",
    )
    books = parser.add_argument_group("books")
    books.add_argument(
        "--min-chars",
        type=int,
        default=1000,
        help="skip books with less clean text than this, counted in characters of English (a CJK ideograph counts "
        "4, a Hangul syllable 2): a stub or a failed conversion, not a book (default: 1000)",
    )
    books.add_argument("--source", default="books", help="the documents' source label (default: books)")
    books.add_argument(
        "--dedup",
        action=BooleanFlag,
        default=True,
        help="keep one copy of books whose cleaned text is the same, the one with the smallest id (default: on)",
    )
    books.add_argument(
        "--near-dup-threshold",
        type=float,
        default=0.9,
        help="also drop books whose estimated word 5-shingle Jaccard similarity (MinHash) with a "
        "book of smaller id is at least this, such as other editions and corrected reprints; 0 "
        "turns it off (default: 0.9)",
    )
    books.add_argument(
        "--max-book-mb",
        type=float,
        default=64.0,
        help="reject files larger than this, stored or decompressed, so that a worker's memory "
        "stays bounded (default: 64)",
    )
    add_language(
        books,
        "books",
        DETECT,
        "detect: each book's language found offline, by lingua's light models of all its languages where the "
        "langid extra is installed, else guessed from its script, en for Latin letters and zh for CJK ideographs; "
        "the manifest says which for each book",
    )
    books.add_argument(
        "--zh-variant",
        choices=CHOICES,
        default=None,
        help="convert Chinese books (most of their letters CJK ideographs) to one script or regional variant with "
        "MediaWiki's tables: zh-hans, zh-hant, zh-cn, zh-tw, zh-hk; keep (no conversion, tagged zh); both (each "
        "book twice, zh-hans and zh-hant). Their language is then the variant's. Needs pip install "
        "'bertcorpus[zh]' (default: off, Chinese books stay as written)",
    )
    layout = parser.add_argument_group("layout")
    layout.add_argument(
        "--num-shards",
        type=positive_int,
        default=None,
        help="documents files (default: about 128 MB of text each, estimated from the input size)",
    )
    add_error_limits(
        parser,
        "exit non-zero when errors / files read is above this; the output is written and complete either way",
    )


def _book_files(patterns: list[str], dry_run: bool) -> tuple[list[tuple[str, int]], list[str]]:
    """((path, size) of the book files the patterns name, the metadata.csv files among them). A local pattern that
    matches nothing fails here, before any output is touched; remote ones are listed too (no file is read), except
    in a dry run, which must work offline. The files of an earlier run found among the inputs are named in one
    line."""
    found, listed, earlier = [], [], []
    for pattern in patterns:
        if output.is_remote(pattern) and dry_run:
            continue
        books, metadata, outputs = list_inputs(pattern)
        if not books and not metadata and not dry_run:  # a dry run or a graph drawing needs only the shape
            raise InputError(f"no book files match {pattern!r}")
        found += books
        listed += metadata
        earlier += outputs
    if earlier:
        names = sorted(set(earlier))
        shown = ", ".join(names[:2]) + (", ..." if len(names) > 2 else "")
        print(
            f"bertcorpus {JOB}: left out {len(names):,} file{'s' * (len(names) != 1)} that an earlier run wrote "
            f"({shown}): outputs, not books",
            file=sys.stderr,
        )
    if not found and not dry_run:
        raise InputError(f"no book files in {' '.join(patterns)} (only metadata)")
    return sorted(set(found)), sorted(set(listed))


def config_from_args(args, dry_run: bool) -> BooksConfig:
    check_error_rate(args)
    check_language_flags(args)
    if args.zh_variant:
        check_converter()
    checks = [
        (args.min_chars >= 0, "--min-chars must be >= 0"),
        (0 <= args.near_dup_threshold <= 1, "--near-dup-threshold must be between 0 and 1"),
        (args.max_book_mb > 0, "--max-book-mb must be positive"),
        (args.source.strip() != "", "--source must not be empty"),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)

    def resolved(path: str) -> str:  # absolute, and a trailing '/' still says "directories"
        return path if output.is_remote(path) else os.path.abspath(path) + "/" * path.endswith("/")

    inputs, metadata = [resolved(p) for p in args.input], [resolved(p) for p in args.metadata]
    missing = [p for p in metadata if not output.is_remote(p) and not os.path.isfile(p)]
    if missing:
        raise InputError(f"--metadata {missing[0]} is not a file")
    files, listed = _book_files(inputs, dry_run)
    # Local metadata files are read once here too, so that a damaged one stops the run before any output is touched.
    nearby = {m for p, _ in files for m in beside(p) if not output.is_remote(m) and os.path.isfile(m)}
    for path in sorted({*metadata, *listed, *nearby}):
        if not output.is_remote(path):
            metadata_table(path)
    num_shards = args.num_shards or documents.default_num_shards(
        math.ceil(sum(estimated_text_bytes(p, s) for p, s in files))
    )
    return BooksConfig(
        inputs=inputs,
        output=args.output,
        metadata=metadata,
        num_shards=num_shards,
        min_chars=args.min_chars,
        source=args.source,
        dedup=args.dedup,
        near_dup_threshold=args.near_dup_threshold if args.dedup else 0.0,
        max_book_mb=args.max_book_mb,
        language=language_setting(args),
        zh_variant=args.zh_variant,
        strict=args.strict,
        max_error_rate=args.max_error_rate,
        input_files=files,
    )


def book_rows(manifest: dict) -> list[tuple[str, str]]:
    """Summary lines about the books themselves, totalled from the per-file details in the manifest's inputs."""
    books = [i for i in manifest["inputs"] if "encoding" in i]
    encodings = Counter(i["encoding"] for i in books)
    methods = Counter(method for i in books for method in i.get("languages", {}).values())
    removed = Counter()
    for i in books:
        removed.update(i["removed"])
    rows = [
        ("encodings", ", ".join(f"{e} {n:,}" for e, n in sorted(encodings.items())) or "none"),
        ("languages by", ", ".join(f"{m} {n:,}" for m, n in sorted(methods.items())) or "none"),
        (
            "characters replaced",
            f"{sum(i['replaced'] for i in books):,} undecodable, "
            f"{sum(i['mojibake_fixed'] for i in books):,} mojibake sequences repaired",
        ),
    ]
    rows += [
        (f"lines removed ({kind.removesuffix('_lines')})", f"{removed[kind]:,}")
        for kind in REMOVED_KINDS
        if removed[kind]
    ]
    return rows


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline.cli.job_skeleton import finish, run_extraction
    from bertcorpus.pipeline.engines import runners

    options = runners.pipeline_options(beam_args)
    config = config_from_args(args, runners.is_dry_run(options))
    run = run_extraction(
        JOB, args, options, "extract books" >> ExtractBooks(config), config, args.input + args.metadata, "books"
    )
    if run is None:
        return 0
    manifest = run.manifest
    return finish(
        JOB,
        run,
        documents.summary_rows(manifest) + book_rows(manifest),
        documents.exit_problems(manifest, "books", config.strict, config.max_error_rate),
    )
