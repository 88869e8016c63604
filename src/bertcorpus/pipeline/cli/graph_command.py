"""`bertcorpus graph JOB`: draw a named job's Beam graph offline, as .dot (and .png when graphviz is installed)."""

from __future__ import annotations

import argparse
import os
import shutil

from bertcorpus.pipeline.cli import named_jobs
from bertcorpus.pipeline.engines.runners import RENDER_RUNNER

ACCEPTS_BEAM_OPTIONS = True


def add_arguments(parser) -> None:
    parser.add_argument("job", help="job name from beam_jobs.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a job flag")
    parser.add_argument("--jobs-file", default=None, help="the YAML file (default: ./beam_jobs.yaml)")
    parser.add_argument(
        "--output",
        default="graphs",
        help="the folder JOB.dot and JOB.png go to, e.g. docs/graphs for the drawings the docs show; set the job's "
        "own output with --set output=... (default: graphs, in the current directory)",
    )
    parser.add_argument("--output-dir", dest="output", help=argparse.SUPPRESS)  # its earlier spelling


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline.cli import commands

    spec = named_jobs.load_jobs_file(args.jobs_file)
    os.makedirs(args.output, exist_ok=True)
    outputs = [os.path.join(args.output, f"{args.job}.dot")]
    if shutil.which("dot"):
        outputs.append(os.path.join(args.output, f"{args.job}.png"))
    else:
        print("graphviz's `dot` is not installed (apt-get install graphviz): writing the .dot file only")
    words = named_jobs.command_line(spec, args.job, "local-in-memory", args.set, beam_args)
    words = [w for w in words if not w.startswith(("--runner=", "--direct_"))]
    words += [f"--runner={RENDER_RUNNER}"] + [f"--render_output={path}" for path in outputs]
    return commands.main(words)
