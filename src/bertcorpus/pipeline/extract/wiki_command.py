"""The command line of `bertcorpus extract-wiki`: its flags, the job's config from them (the input files listed
at launch, the shard count estimated from their size), and the run with its summary. The job is wiki_job.py's."""

from __future__ import annotations

import math

from bertcorpus.pipeline.cli.shared_flags import (
    LOCAL_FOLDERS_HELP,
    add_error_limits,
    add_files,
    add_reuse,
    check_error_rate,
    positive_float,
    positive_int,
)
from bertcorpus.pipeline.extract.wiki_job import JOB, ExtractWikipedia, WikiConfig, read_dump_header
from bertcorpus.pipeline.extract.wiki_losses import loss_check, loss_rows, pages_lost
from bertcorpus.pipeline.inputs.discovery import SKIPPED, match_inputs
from bertcorpus.pipeline.inputs.reads import MAX_RANGE_MB, MIN_RANGE_MB
from bertcorpus.pipeline.inputs.streams import estimated_text_bytes
from bertcorpus.pipeline.sinks import documents
from bertcorpus.pipeline.sinks.output import has_glob
from bertcorpus.transforms.zh_variants import CHOICES, check_converter

# For the default shard count: about a fifth of a full dump's XML is article text (the rest is markup, redirects
# and pages outside namespace 0).
ARTICLE_TEXT_PER_XML_BYTE = 0.2


def add_arguments(parser) -> None:
    files = add_files(
        parser,
        inputs="pages-articles dumps: .xml, .xml.bz2 (single or multistream), .xml.gz, "
        ".xml.xz, .xml.zst, or Wikimedia's per-part files; files, globs or directories "
        f"({LOCAL_FOLDERS_HELP}), local or on any Beam filesystem (gs://...)",
        output="output directory: documents-*.parquet, errors-*.jsonl, manifest.json",
    )
    add_reuse(files)
    files.add_argument(
        "--index",
        nargs="+",
        metavar="INDEX",
        help="the multistream index of each --input dump, in the same order: each dump is then read "
        "as byte ranges of whole bz2 streams by many workers at once (without it: one reader "
        "per file)",
    )
    pages = parser.add_argument_group("pages")
    pages.add_argument(
        "--min-chars",
        type=int,
        default=100,
        help="skip articles with less clean text than this, counted in characters of English (a CJK ideograph "
        "counts 4, a Hangul syllable 2, as much as they say); 100 drops what list and undeclared disambiguation "
        "pages leave, and keeps two-sentence stubs in every script (default: 100)",
    )
    pages.add_argument("--source", default="wikipedia", help="the documents' source label (default: wikipedia)")
    pages.add_argument(
        "--zh-variant",
        choices=CHOICES,
        default=None,
        help="for a Chinese dump (zhwiki): resolve its converter markup (-{...}-, NoteTA) as MediaWiki does and write "
        "every article in one script or regional variant with MediaWiki's tables: zh-hans, zh-hant, zh-cn, zh-tw, "
        "zh-hk; keep (the markup resolved, no conversion); both (each article twice, zh-hans and zh-hant, as "
        "Google's Chinese BERT had it). Needs pip install 'bertcorpus[zh]' (default: zh-hans for a zh dump)",
    )
    layout = parser.add_argument_group("layout and scale")
    layout.add_argument(
        "--num-shards",
        type=positive_int,
        default=None,
        help="documents files (default: about 128 MB of text each, estimated from the input size)",
    )
    layout.add_argument(
        "--range-mb",
        type=positive_float,
        default=None,
        help="with --index: compressed MB per byte range, the unit of work (default: a 64th of "
        f"the dump, between {MIN_RANGE_MB} and {MAX_RANGE_MB} MB)",
    )
    add_error_limits(
        parser,
        "exit non-zero when (errors + pages lost) / (pages read + pages lost) is above this, the "
        "pages lost with damaged data counted from the index or estimated; the output is written "
        "and complete either way",
    )


def _list_inputs(patterns: list[str], dry_run: bool, skipped: dict[str, int] | None = None) -> list[tuple[str, int]]:
    """(path, size) of every file the patterns match, as create and vocab list theirs; no file is read. A pattern
    that matches nothing fails here, before any output is touched. A dry run (also a graph drawing) needs only the
    job's shape and must work offline: there remote patterns, and local ones that match nothing, stay as given
    with size 0. The paths left out (folders, broken links) are counted in `skipped`."""
    if not dry_run:
        return match_inputs(patterns, skipped=skipped)
    return sorted({f for pattern in patterns for f in match_inputs([pattern], True, skipped) or [(pattern, 0)]})


def _check_chinese_dumps(files: list[tuple[str, int]]) -> None:
    """--zh-variant converts Chinese dumps: refuse it, before any work, for a dump whose header says it is not one,
    and where the conversion tables are not installed."""
    for path, _ in files:
        dump = read_dump_header(path)
        if not dump.is_chinese:
            raise ValueError(
                f"--zh-variant converts Chinese Wikipedia dumps, and {path} is {dump.wiki} ({dump.language}); "
                "leave the flag out for it"
            )
    check_converter()


def config_from_args(args, dry_run: bool) -> WikiConfig:
    index = list(args.index or [])
    check_error_rate(args)
    checks = [
        (args.min_chars >= 0, "--min-chars must be >= 0"),
        (args.source.strip() != "", "--source must not be empty"),
        (
            not index or len(index) == len(args.input),
            f"--index needs one index per --input dump, in the same order ({len(args.input)} dumps, "
            f"{len(index)} indexes)",
        ),
        (
            not index or not any(has_glob(p) for p in args.input + index),
            "with --index, --input and --index name single files, not patterns",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)
    skipped: dict[str, int] = dict.fromkeys(SKIPPED, 0)
    if index:
        # Each dump pairs with the index in the same position, so the order is kept and each names one file.
        listed = [_list_inputs([p], dry_run, skipped) for p in args.input]
        if any(len(found) > 1 for found in listed):
            raise ValueError("with --index, each --input names a single dump file, not a directory")
        indexes = _list_inputs(index, dry_run)  # a missing local index fails now rather than on a worker
        inputs, files = list(args.input), [f for found in listed for f in found]
        # Named as given, as the manifest names them: each dump and its index, every byte of which a worker reads.
        read = [(p, size) for p, (_, size) in zip([*inputs, *index], [*files, *indexes])]
    else:
        files = _list_inputs(args.input, dry_run, skipped)
        inputs, read = [path for path, _ in files], files
    if args.zh_variant is not None and not dry_run:
        _check_chinese_dumps(files)
    num_shards = args.num_shards or documents.default_num_shards(
        math.ceil(ARTICLE_TEXT_PER_XML_BYTE * sum(estimated_text_bytes(path, size) for path, size in files))
    )
    return WikiConfig(
        inputs=inputs,
        output=args.output,
        index=index,
        num_shards=num_shards,
        min_chars=args.min_chars,
        source=args.source,
        range_mb=args.range_mb or 0.0,
        zh_variant=args.zh_variant or "zh-hans",
        strict=args.strict,
        max_error_rate=args.max_error_rate,
        input_files=read,
        inputs_skipped=skipped,
    )


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline.cli.job_skeleton import finish, run_extraction
    from bertcorpus.pipeline.engines import runners

    options = runners.pipeline_options(beam_args)
    config = config_from_args(args, runners.is_dry_run(options))
    run = run_extraction(
        JOB,
        args,
        options,
        "extract wikipedia" >> ExtractWikipedia(config),
        config,
        args.input + (args.index or []),
        "pages",
    )
    if run is None:
        return 0
    manifest = run.manifest
    rows = documents.summary_rows(manifest)
    return finish(
        JOB,
        run,
        rows[:1] + loss_rows(pages_lost(manifest)) + rows[1:],
        documents.exit_problems(
            manifest, "pages", config.strict, config.max_error_rate, loss_check(manifest, config.max_error_rate)
        ),
    )
