"""The skeleton every Beam job of the command line shares: its output kept apart from its inputs and claimed, its
graph built on the runner the options name and run under the local watch, then its manifest read, its summary
printed and its exit status decided.

    def run(args, beam_args):
        options = runners.pipeline_options(beam_args)
        config = config_from_args(args, runners.is_dry_run(options))
        manifest = run_job("extract-books", options, "extract books" >> ExtractBooks(config), config.output,
                           inputs, args.overwrite)
        return 0 if manifest is None else finish("extract-books", manifest, rows, problems)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

import apache_beam as beam

from bertcorpus.pipeline.cli.common import print_summary, run_pipeline
from bertcorpus.pipeline.engines import runners
from bertcorpus.pipeline.sinks import output


def run_job(
    name: str, options, job: beam.PTransform, output_dir: str, inputs: Iterable[str], overwrite: bool
) -> dict | None:
    """Run `job` (a labelled transform) on a new pipeline into `output_dir`; its manifest, or None where nothing ran
    to the end here (a dry run, a graph drawing, a job handed to a remote runner without waiting)."""
    output.check_apart([output_dir], inputs)
    pipeline = runners.make_pipeline(options)  # first: it checks a remote engine before the output is claimed
    if not runners.is_dry_run(options):
        output.prepare_output_dir(output_dir, overwrite)
    _ = pipeline | job
    if run_pipeline(pipeline, options, what=name) is None:
        return None
    return output.read_manifest(output_dir)


def finish(name: str, manifest: dict, rows: list[tuple[str, str]], problems: Iterable[str | None] = ()) -> int:
    """Print the summary, then the first problem that makes the run exit 1 although its output is complete."""
    print_summary(name, manifest, rows)
    problem = next((p for p in problems if p), None)
    if problem is None:
        return 0
    print(f"bertcorpus {name}: {problem}", file=sys.stderr)
    return 1
