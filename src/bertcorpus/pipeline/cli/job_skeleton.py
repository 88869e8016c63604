"""The skeleton every Beam job of the command line shares: its output kept apart from its inputs and claimed, its
graph built on the runner the options name and run under the local watch (with its progress line), then its
manifest read, its summary printed with the time of each stage, and its exit status decided.

    def run(args, beam_args):
        options = runners.pipeline_options(beam_args)
        config = config_from_args(args, runners.is_dry_run(options))
        run = run_job("extract-books", options, "extract books" >> ExtractBooks(config), config.output,
                      inputs, args.overwrite, plan)
        return 0 if run is None else finish("extract-books", run, rows(run.manifest), problems)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

import apache_beam as beam

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.engines import runners
from bertcorpus.pipeline.engines.run_and_wait import run_pipeline
from bertcorpus.pipeline.engines.run_progress import ProgressPlan
from bertcorpus.pipeline.sinks import documents, output
from bertcorpus.pipeline.sinks.up_to_date import Reuse


@dataclass
class JobRun:
    """A job that ran to its end here, or whose up-to-date output was kept: its manifest, and the rows its run adds
    to the summary (the time of its stages, a Flink job's restarts)."""

    manifest: dict
    run_rows: list[tuple[str, str]] = field(default_factory=list)


def run_job(
    name: str,
    options,
    job: beam.PTransform,
    output_dir: str,
    inputs: Iterable[str],
    overwrite: bool,
    plan: ProgressPlan | None = None,
    reuse: Reuse | None = None,
) -> JobRun | None:
    """Run `job` (a labelled transform) on a new pipeline into `output_dir`, showing its progress as `plan` says;
    None where nothing ran to the end here (a dry run, a graph drawing, a job handed to a remote runner without
    waiting). With `reuse`, an up-to-date output is kept instead, and an outdated one replaced."""
    output.check_apart([output_dir], inputs)
    if reuse is not None and not runners.is_dry_run(options):
        outcome = reuse.outcome(name, output_dir, output.join(output_dir, output.MANIFEST))
        if outcome == "keep":
            return JobRun(output.read_manifest(output_dir))
        overwrite = overwrite or outcome == "replace"
    pipeline = runners.make_pipeline(options)  # before the output is claimed: it checks a remote engine
    if not runners.is_dry_run(options):
        output.prepare_output_dir(output_dir, overwrite)
    _ = pipeline | job
    finished = run_pipeline(pipeline, options, what=name, plan=plan)
    if finished is None:
        return None
    return JobRun(output.read_manifest(output_dir), finished.summary_rows())


def run_extraction(
    name: str, args, options, job: beam.PTransform, config, inputs: list[str], items: str
) -> JobRun | None:
    """run_job for a job that writes documents: its progress line counts the bytes of `config.input_files` (the
    files listed at launch), the `items` read (pages, books) and the documents written, and --reuse compares those
    files and `config.describe()` with its output's manifest."""
    return run_job(
        name,
        options,
        job,
        config.output,
        inputs,
        args.overwrite,
        ProgressPlan(
            sum(size for _, size in config.input_files),
            (f"{documents.METRICS}/read", items),
            (f"{tally.PROGRESS}/documents_written", "documents"),
        ),
        Reuse(config.describe(), config.input_files) if args.reuse else None,
    )


def finish(name: str, run: JobRun, rows: list[tuple[str, str]], problems: Iterable[str | None] = ()) -> int:
    """Print the summary, then the first problem that makes the run exit 1 although its output is complete."""
    print_summary(name, rows + run.run_rows)
    problem = next((p for p in problems if p), None)
    if problem is None:
        return 0
    print(f"bertcorpus {name}: {problem}", file=sys.stderr)
    return 1


def print_summary(what: str, rows: list[tuple[str, str]]) -> None:
    """The closing summary: one row a line, the values aligned."""
    width = max(len(k) for k, _ in rows) if rows else 0
    print(f"\n{what} summary")
    for key, value in rows:
        print(f"  {key.ljust(width)}  {value}")
    sys.stdout.flush()
