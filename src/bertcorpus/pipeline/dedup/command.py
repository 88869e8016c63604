"""`bertcorpus dedup`, the command: its flags, its run (the job of job.py run to its end, an unsettled cluster
warned of) and its summary. config.py turns the flags into the run's sources and config."""

from __future__ import annotations

import sys

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.cli.job_skeleton import finish, run_job
from bertcorpus.pipeline.cli.shared_flags import (
    add_document_cap,
    add_error_limits,
    add_files,
    add_language,
    positive_int,
)
from bertcorpus.pipeline.dedup.config import POLICIES, config_from_args
from bertcorpus.pipeline.dedup.job import Dedup
from bertcorpus.pipeline.dedup.publish import JOB
from bertcorpus.pipeline.engines import runners
from bertcorpus.pipeline.engines.run_progress import ProgressPlan
from bertcorpus.pipeline.sinks.documents import error_check


def add_arguments(parser) -> None:
    files = add_files(
        parser,
        inputs="documents sources in priority order, earlier first: where copies are found, the document of the "
        "earliest source stays. Each is an extraction's or an earlier dedup's output folder (the documents its "
        "manifest lists), documents Parquet, or JSONL (a file, a folder or a pattern; local or any Beam "
        "filesystem); its name (the folder's or file's name, or NAME=PATH) names its output folder",
        output="output directory: NAME/documents-*.parquet and NAME/manifest.json per source, removed-*.jsonl, "
        "contaminated-*.jsonl, manifest.json",
    )
    files.add_argument(
        "--num-shards",
        type=positive_int,
        default=None,
        help="documents files per source (default: about 128 MB of text each, estimated from its input size)",
    )
    add_document_cap(files, "compared, kept or removed as a document of its own and written as one")
    near = parser.add_argument_group("duplicates")
    near.add_argument(
        "--threshold",
        type=float,
        default=0.8,
        help="remove a document whose word-shingle Jaccard similarity with a document that stays is at least this, "
        "measured exactly on the shingles of every pair LSH proposes (default: 0.8)",
    )
    near.add_argument("--shingle-words", type=positive_int, default=5, help="words per shingle (default: 5)")
    near.add_argument("--num-hashes", type=positive_int, default=160, help="MinHash values per document (default: 160)")
    near.add_argument(
        "--bands",
        type=positive_int,
        default=20,
        help="LSH bands; bands × rows must equal --num-hashes. More bands, fewer rows: more candidate pairs, "
        "fewer missed (default: 20)",
    )
    near.add_argument(
        "--rows",
        type=positive_int,
        default=None,
        help="MinHash values per band; 8 at 160 hashes in 20 bands, where a pair of Jaccard 0.8 is proposed with "
        "probability 0.975 (default: --num-hashes / --bands)",
    )
    near.add_argument(
        "--cc-rounds",
        type=positive_int,
        default=6,
        help="rounds of the connected-components steps that join clusters; a cluster not settled after them keeps "
        "the documents it could not decide on, and the run says so (default: 6)",
    )
    bench = parser.add_argument_group("decontamination")
    bench.add_argument(
        "--decontaminate",
        nargs="+",
        default=[],
        metavar="FILE",
        help="benchmark files whose text must not be in the corpus: SQuAD v1/v2 JSON, GLUE TSV, SuperGLUE JSONL, "
        "or any JSONL, JSON or Parquet with --benchmark-text-field (default: none)",
    )
    bench.add_argument(
        "--benchmark-text-field",
        nargs="+",
        default=[],
        metavar="FIELD",
        help="the fields holding text in benchmark files of another layout; nested ones as a.b (default: none)",
    )
    bench.add_argument("--ngram", type=positive_int, default=13, help="words per matching n-gram (default: 13)")
    bench.add_argument(
        "--min-ngram",
        type=positive_int,
        default=8,
        help="a benchmark text shorter than --ngram words is one n-gram of all its words if it has at least this "
        "many, else too short to match (default: 8)",
    )
    bench.add_argument(
        "--contamination",
        choices=POLICIES,
        default="cut",
        help="cut: remove each match with --cut-margin characters around it and split the document there; drop: "
        "remove the whole document (default: cut)",
    )
    bench.add_argument(
        "--cut-margin", type=int, default=200, help="characters removed on each side of a match (default: 200)"
    )
    bench.add_argument(
        "--max-splits",
        type=int,
        default=10,
        help="a document cut in more places than this is removed whole (default: 10)",
    )
    bench.add_argument(
        "--min-piece-chars",
        type=int,
        default=200,
        help="a piece left between cuts that is shorter than this goes with them (default: 200)",
    )
    add_language(parser.add_argument_group("languages"), "documents")
    add_error_limits(
        parser,
        "exit non-zero when unreadable records / records read is above this; the output is written and "
        "complete either way",
    )


def summary_rows(manifest: dict) -> list[tuple[str, str]]:
    """The closing summary, every number from the manifest."""
    rows = []
    for s in manifest["sources"]:
        removed = ", ".join(f"{reason} {n:,}" for reason, n in s["removed"].items() if n) or "none"
        chars = s["characters"]
        more = s["split"]["pieces"] - s["split"]["documents"]  # a document cut into pieces is kept or removed as them
        rows.append(
            (
                s["name"],
                f"read {s['read']:,}{f' + {more:,} more pieces' if more else ''} = kept {s['kept']:,} + removed "
                f"{sum(s['removed'].values()):,} "
                f"({removed}) + skipped {sum(s['skipped'].values()):,} + errors {s['errors']:,}",
            )
        )
        rows.append(
            (
                f"{s['name']} characters",
                f"read {chars['read']:,} = kept {chars['kept']:,} + removed "
                f"{chars['removed']:,}; too short to compare {s['too_short_to_compare']:,}",
            )
        )
        if s["split"]["documents"]:
            rows.append(
                (
                    f"{s['name']} documents cut",
                    f"{s['split']['documents']:,} longer than --max-document-mb, into {s['split']['pieces']:,} pieces",
                )
            )
        if s["replaced_chars"]:
            rows.append((f"{s['name']} invalid UTF-8", f"{s['replaced_chars']:,} characters replaced by U+FFFD"))
        if s["unknown_language_tags"]:
            rows.append((f"{s['name']} language tags", f"{s['unknown_language_tags']:,} unknown, read as und"))
    dup = manifest["duplicates"]
    rows.append(("pairs", f"{dup['pairs_measured']:,} measured, {dup['pairs_similar']:,} at or above the threshold"))
    for b in manifest["benchmarks"]:
        where = ", ".join(f"{n} {c:,}" for n, c in b["documents"].items() if c) or "nowhere"
        rows.append(
            (
                f"benchmark {b['name']}",
                f"{b['contaminated_examples']:,} of {b['examples']:,} examples found (documents: {where})",
            )
        )
    rows.append(("output", manifest["config"]["output"]))
    return rows


def run(args, beam_args: list[str]) -> int:
    options = runners.pipeline_options(beam_args)
    config = config_from_args(args, runners.is_dry_run(options))
    inputs = [s.path for s in config.sources] + config.benchmarks
    # The progress line: the bytes of the sources' files read (benchmark files are small), documents written.
    plan = ProgressPlan(
        sum(size for s in config.sources for _, size in s.files),
        None,
        (f"{tally.PROGRESS}/documents_written", "documents"),
    )
    run = run_job(JOB, options, "dedup" >> Dedup(config), config.output, inputs, args.overwrite, plan)
    if run is None:
        return 0
    manifest = run.manifest
    if manifest["duplicates"]["unsettled"]:
        print(
            f"bertcorpus dedup: warning: {manifest['duplicates']['unsettled']:,} documents in clusters that "
            f"--cc-rounds {config.cc_rounds} did not settle were kept; rerun with more rounds to remove them",
            file=sys.stderr,
        )
    read = sum(s["read"] for s in manifest["sources"])
    errors = sum(s["errors"] for s in manifest["sources"])
    problem = error_check({"documents": {"read": read, "errors": errors}}, config.strict, config.max_error_rate)
    return finish(
        JOB,
        run,
        summary_rows(manifest),
        [problem and f"{problem}; the output is complete, and each NAME/errors-*.jsonl says what could not be read"],
    )
