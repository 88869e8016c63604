"""`bertcorpus plan`: a run sized and priced before it runs.

    bertcorpus plan create --input wiki/ books/ --vocab vocab.txt --output out --runner DataflowRunner ...
    bertcorpus plan run pretraining-both --profile dataflow
    bertcorpus plan chain --wiki enwiki-...-multistream.xml.bz2 --books books/ --dedup --seq-configs 128:20,512:80

The job's own words follow `plan JOB`, as the job takes them: the job's parser reads them and the job's own code
lists the inputs and decides buckets and shards. Nothing is read but the listing (and an extraction folder's
manifest), nothing is written. `chain` plans extract-wiki, extract-books, dedup (with --dedup), vocab and create
in turn, each from what the stage before it is predicted to write. A job's dry run (--dry_run=True) ends with the
same plan, from what a dry run lists: it works offline, so remote inputs are named but not sized.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from dataclasses import dataclass, field

from bertcorpus.pipeline.cli.commands import PLANNED_COMMANDS, parse_command
from bertcorpus.pipeline.cli.shared_flags import positive_float, positive_int
from bertcorpus.pipeline.plan.jobs import chain_beam_options, chain_stages, chain_usage, job_stage
from bertcorpus.pipeline.plan.prices import PRICES_SOURCE, Prices, Workers, workers_of
from bertcorpus.pipeline.plan.report import Plan, plan_lines
from bertcorpus.pipeline.plan.stages import Stage

ACCEPTS_BEAM_OPTIONS = True
BEAM_OPTIONS_EPILOG = (
    "The job's own flags and Beam options follow JOB, as the job takes them, e.g. "
    "`bertcorpus plan create --input wiki/ --vocab vocab.txt --output out --runner DataflowRunner "
    "--machine_type n2-standard-8 --max_num_workers 64`."
)
JOBS = (*PLANNED_COMMANDS, "chain", "run")


def add_arguments(parser) -> None:
    parser.add_argument(
        "job",
        choices=JOBS,
        metavar="JOB",
        help=f"{', '.join(PLANNED_COMMANDS)}: that job, with its own flags; run: a named job of beam_jobs.yaml, "
        f"with --profile; chain: the whole chain, {chain_usage()}",
    )
    parser.add_argument("--json", action="store_true", help="print the plan as JSON, for scripts (default: a table)")
    workers = parser.add_argument_group("workers (default: what the runner's options say)")
    workers.add_argument(
        "--workers",
        type=positive_int,
        help="workers to plan the wall time and cost for (default: --max_num_workers or --num_workers on Dataflow, "
        "--parallelism on Flink, --direct_num_workers locally)",
    )
    workers.add_argument("--workers-vcpus", type=positive_int, help="vCPUs per worker (default: from --machine_type)")
    workers.add_argument(
        "--workers-memory-gb", type=positive_float, help="GB of memory per worker (default: from --machine_type)"
    )
    prices = parser.add_argument_group(f"prices (default: {PRICES_SOURCE}; docs/dataflow.md §7)")
    defaults = Prices()
    prices.add_argument("--price-vcpu-hour", type=_price, default=defaults.vcpu_hour, help="USD (default: %(default)s)")
    prices.add_argument(
        "--price-memory-gb-hour",
        type=_price,
        default=defaults.memory_gb_hour,
        help="USD (default: %(default)s)",
    )
    prices.add_argument(
        "--price-shuffle-gb",
        type=_price,
        default=defaults.shuffle_gb,
        help="USD per GB of shuffle data processed on Dataflow (default: %(default)s)",
    )


def _price(text: str) -> float:
    """An argparse type: a price in USD, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


@dataclass(frozen=True)
class Overrides:
    """The plan's own flags: the workers (None: what the runner's options say) and the prices."""

    workers: int | None = None
    vcpus: int | None = None
    memory_gb: float | None = None
    prices: Prices = field(default_factory=Prices)

    @classmethod
    def of(cls, args) -> Overrides:
        prices = Prices(args.price_vcpu_hour, args.price_memory_gb_hour, args.price_shuffle_gb)
        return cls(args.workers, args.workers_vcpus, args.workers_memory_gb, prices)

    def workers_for(self, beam_args: list[str]) -> Workers:
        from bertcorpus.pipeline.engines import runners

        options = runners.pipeline_options(beam_args).get_all_options()
        return workers_of(options, self.workers, self.vcpus, self.memory_gb)


def _plan(job: str, words: list[str], overrides: Overrides) -> Plan:
    """The plan of `plan JOB WORDS...`."""
    if job == "run":
        return _plan_named_job(words, overrides)
    if job == "chain":
        workers = overrides.workers_for(chain_beam_options(words))
        planned = chain_stages(words, workers, dry_run=False)
        return _priced(" → ".join(s.name for s in planned), workers, planned, overrides)
    job_args, beam_args = parse_command([job, *words])
    return _job_plan(job, job_args, beam_args, overrides, dry_run=False)


def _job_plan(job: str, job_args, beam_args: list[str], overrides: Overrides, dry_run: bool) -> Plan:
    workers = overrides.workers_for(beam_args)
    return _priced(job, workers, [job_stage(job, job_args, workers, dry_run)], overrides)


def _priced(what: str, workers: Workers, planned: list[Stage], overrides: Overrides) -> Plan:
    return Plan(what, workers, [s.on_workers(workers) for s in planned], overrides.prices)


def _plan_named_job(words: list[str], overrides: Overrides) -> Plan:
    from bertcorpus.pipeline.cli import named_jobs

    run_args, extra = parse_command(["run", *words])
    if not run_args.job:
        raise ValueError("plan run needs a job name from the jobs file (bertcorpus run --list names them)")
    spec = named_jobs.load_jobs_file(run_args.jobs_file)
    command, *job_words = named_jobs.command_line(spec, run_args.job, run_args.profile, run_args.set, extra)
    plan = _plan(command, job_words, overrides)
    plan.what = f"{run_args.job} ({command}, profile {run_args.profile})"
    return plan


def run(args, beam_args: list[str]) -> int:
    plan = _plan(args.job, beam_args, Overrides.of(args))
    print(json.dumps(plan.record(), indent=2) if args.json else "\n".join(plan_lines(plan)))
    return 0


def print_after_dry_run(args, beam_args: list[str]) -> None:
    """After a job's dry run: its plan, from what the dry run could list."""
    from bertcorpus.pipeline.engines import runners

    if runners.is_rendering(runners.pipeline_options(beam_args)):
        return
    # The plan lists the inputs again with the job's own code, whose notes (paths left out) the dry run has said.
    with contextlib.redirect_stderr(io.StringIO()):
        plan = _job_plan(args.command, args, beam_args, Overrides(), dry_run=True)
    print("\n" + "\n".join(plan_lines(plan)))
