"""Pipeline options and the choice of runner, shared by every job.

Every job builds one graph, whatever runs it. Only the runner differs: "DirectRunner" (or no --runner at all)
runs on Beam's FnApiRunner on this machine, honouring --direct_running_mode (in_memory, multi_threading,
multi_processing) and --direct_num_workers. That is the engine Beam's DirectRunner falls back to; it is named
directly because DirectRunner first tries the Prism runner, a Go binary it downloads on first use, and a local
job must never depend on a download. Every other runner (PortableRunner, DataflowRunner, FlinkRunner, ...) is
Beam's own, given the options as they are.

One transform has a local expansion of its own, chosen here (`local_shuffle`): GroupLargeValues, the shuffles
that carry a job's bytes, which a run on this machine passes through spill files (pipeline/engines/local_shuffle.py).
"""

from __future__ import annotations

import contextlib
import re

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, SetupOptions, StandardOptions
from apache_beam.pipeline import PTransformOverride

from bertcorpus.pipeline.engines import engine_checks
from bertcorpus.pipeline.engines.local_shuffle import GroupLargeValues, SpilledGroupByKey, spill_directory
from bertcorpus.pipeline.errors import UserError

# The runners bertcorpus runs on Beam's FnApiRunner on this machine; no --runner runs locally too.
LOCAL_RUNNER_NAMES = {None, "DirectRunner", "FnApiRunner", "SwitchingDirectRunner"}
RENDER_RUNNER = "apache_beam.runners.render.RenderRunner"


def pipeline_options(beam_args: list[str]) -> PipelineOptions:
    options = PipelineOptions(beam_args)
    # Jobs pickle DoFns that refer to module-level functions; keep the main session out of it.
    options.view_as(SetupOptions).save_main_session = False
    return options


def is_local(options: PipelineOptions) -> bool:
    return options.view_as(StandardOptions).runner in LOCAL_RUNNER_NAMES


def is_rendering(options: PipelineOptions) -> bool:
    return (options.view_as(StandardOptions).runner or "").endswith("RenderRunner")


def is_dataflow(options: PipelineOptions) -> bool:
    return (options.view_as(StandardOptions).runner or "").endswith("DataflowRunner")


def is_dry_run(options: PipelineOptions) -> bool:
    """True when the job graph is built but nothing runs: --dry_run=True, or drawing the graph."""
    return bool(options.get_all_options().get("dry_run")) or is_rendering(options)


_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")


def check_remote_locations(options: PipelineOptions) -> None:
    """Reject malformed gs:// locations up front: Beam would otherwise try, over the network, to create a
    default bucket instead, which hangs on a machine without network and fails with a traceback elsewhere."""
    all_options = options.get_all_options()
    for name in ("temp_location", "staging_location"):
        location = all_options.get(name)
        if location and location.startswith("gs://"):
            bucket = location[len("gs://") :].split("/", 1)[0]
            if not _BUCKET.match(bucket):
                raise UserError(
                    f"--{name}={location}: {bucket!r} is not a valid Cloud Storage bucket name "
                    "(3-63 characters: lower-case letters, digits, '-', '_' and '.')"
                )


def check_worker_packaging(options: PipelineOptions) -> None:
    """Dataflow workers start from Beam's stock image, without bertcorpus: a job must either stage the package
    (--setup_file) or name an image that has it (--sdk_container_image). Without either its workers would fail
    at their first step, after the job had been accepted, so even a dry run refuses it."""
    setup = options.view_as(SetupOptions)
    image = options.get_all_options().get("sdk_container_image")
    if not (setup.setup_file or image):
        raise UserError(
            "a Dataflow job needs the bertcorpus package on its workers: pass --setup_file ./setup.py "
            "(Beam builds and stages the package) or --sdk_container_image IMAGE (an image built from "
            "the Dockerfile); the dataflow profile in beam_jobs.yaml sets --setup_file"
        )


def make_pipeline(options: PipelineOptions) -> beam.Pipeline:
    if not is_local(options):
        check_remote_locations(options)
        engine_checks.check_engine(options)
        if is_dataflow(options):
            check_worker_packaging(options)
        return beam.Pipeline(options=options)
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    # As Beam's DirectRunner builds its FnApiRunner: the workers see the job's options through the provision info.
    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    provision = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
    return beam.Pipeline(runner=fn_runner.FnApiRunner(provision_info=provision), options=options)


class _SpillLargeValues(PTransformOverride):
    """GroupLargeValues → SpilledGroupByKey, through Beam's public override API."""

    def __init__(self, directory: str):
        self.directory = directory

    def matches(self, applied_ptransform) -> bool:
        return isinstance(applied_ptransform.transform, GroupLargeValues)

    def get_replacement_transform_for_applied_ptransform(self, applied_ptransform):
        return SpilledGroupByKey(self.directory)


@contextlib.contextmanager
def local_shuffle(pipeline: beam.Pipeline):
    """For a run on this machine (every worker process shares its disk): the pipeline's GroupLargeValues go
    through spill files in a directory of the run's own under $TMPDIR (local_shuffle.spill_directory)."""
    with spill_directory() as directory:
        pipeline.replace_all([_SpillLargeValues(directory)])
        yield directory
