"""Pipeline options and runner choice shared by every job.

Beam's DirectRunner first tries the Prism runner, a Go binary it downloads on first use. These machines may
have no network, and a job must never depend on a download, so "DirectRunner" (or no --runner at all) runs
on Beam's FnApiRunner directly — the same engine DirectRunner falls back to — honouring
--direct_running_mode (in_memory, multi_threading, multi_processing) and --direct_num_workers. In
multi_processing mode its worker processes are forked from the launcher where that is safe
(pipeline/forked_workers.py) instead of started as fresh interpreters.
"""
from __future__ import annotations

import logging
import multiprocessing
import re
import types
import weakref

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, PortableOptions, StandardOptions

# The runners bertcorpus runs on Beam's FnApiRunner on this machine; no --runner runs locally too.
LOCAL_RUNNER_NAMES = {None, "DirectRunner", "FnApiRunner", "SwitchingDirectRunner"}


_ALL_OPTIONS: "weakref.WeakKeyDictionary[PipelineOptions, dict]" = weakref.WeakKeyDictionary()


def all_options(options: PipelineOptions) -> dict:
    """options.get_all_options(), computed once: each call builds an argparse parser for every Beam option."""
    if options not in _ALL_OPTIONS:
        _ALL_OPTIONS[options] = options.get_all_options()
    return _ALL_OPTIONS[options]


_VIEWS: "weakref.WeakKeyDictionary[PipelineOptions, dict]" = weakref.WeakKeyDictionary()


class _Options(PipelineOptions):
    """PipelineOptions that make each view once. Beam asks for a view some 300 times while it builds a job graph,
    and every new view builds an argument parser for its options and parses all the flags again (≈ 0.2 s in all).
    A view keeps no values of its own (they live in the shared option dictionary), so one per class serves."""

    def view_as(self, cls):
        views = _VIEWS.setdefault(self, {})
        if cls not in views:
            views[cls] = super().view_as(cls)
        return views[cls]


def pipeline_options(beam_args: list[str]) -> PipelineOptions:
    options = _Options(beam_args)
    # Jobs pickle DoFns that refer to module-level functions; keep the main session out of it.
    options.view_as(beam.options.pipeline_options.SetupOptions).save_main_session = False
    return options


def is_local(options: PipelineOptions) -> bool:
    return options.view_as(StandardOptions).runner in LOCAL_RUNNER_NAMES


def workers_read_local_files(options: PipelineOptions) -> bool:
    """Whether the job's workers run on this machine, as processes that can open its files: a local runner
    without containers (--environment_type DOCKER or EXTERNAL put the workers elsewhere)."""
    environment = (options.view_as(PortableOptions).environment_type or "").upper()
    return is_local(options) and environment not in ("DOCKER", "EXTERNAL")


def local_workers(options: PipelineOptions) -> int:
    """How many workers a local runner shares a stage's input between (as Beam's local runner counts them); 1
    elsewhere."""
    if not is_local(options):
        return 1
    return options.view_as(DirectOptions).direct_num_workers or multiprocessing.cpu_count()


RENDER_RUNNER = "apache_beam.runners.render.RenderRunner"


def is_rendering(options: PipelineOptions) -> bool:
    return (options.view_as(StandardOptions).runner or "").endswith("RenderRunner")


def is_dry_run(options: PipelineOptions) -> bool:
    """True when the job graph is built but nothing runs: --dry_run=True, or drawing the graph."""
    return bool(all_options(options).get("dry_run")) or is_rendering(options)


_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")


def check_remote_locations(options: PipelineOptions) -> None:
    """Reject malformed gs:// locations up front: Beam would otherwise try, over the network, to create a
    default bucket instead, which hangs on a machine without network and fails with a traceback elsewhere."""
    from pipeline.errors import UserError

    for name in ("temp_location", "staging_location"):
        location = all_options(options).get(name)
        if location and location.startswith("gs://"):
            bucket = location[len("gs://"):].split("/", 1)[0]
            if not _BUCKET.match(bucket):
                raise UserError(f"--{name}={location}: {bucket!r} is not a valid Cloud Storage bucket name "
                                "(3-63 characters: lower-case letters, digits, '-', '_' and '.')")


def make_pipeline(options: PipelineOptions) -> beam.Pipeline:
    if not is_local(options):
        check_remote_locations(options)
        return beam.Pipeline(options=options)
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    _shorten_state_sampling()
    _keep_freed_memory()
    _remember_dofn_specs()

    encoded = JobServiceHandle.encode_pipeline_options(all_options(options))
    provision = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
    return beam.Pipeline(runner=_local_runner_class()(provision_info=provision), options=options)


def _dofn_specs_key(dofn) -> tuple | None:
    """What Beam's get_dofn_specs reads of a DoFn: the methods dir(dofn) shows. They come from its class, except
    where its own attributes add or shadow one; None where the DoFn could compute its attributes itself."""
    cls = type(dofn)
    if getattr(cls, "__getattr__", None) is not None or cls.__dir__ is not object.__dir__:
        return None
    own = getattr(dofn, "__dict__", {})
    shadows = tuple(sorted((name, value.__func__ if isinstance(value, types.MethodType) else None)
                           for name, value in own.items()
                           if isinstance(value, types.MethodType) or callable(getattr(cls, name, None))))
    return cls, shadows


def _remember_dofn_specs() -> None:
    """Beam finds a DoFn's state and timer specs by building an inspect.signature of each of its ~30 methods, and
    asks again for every step it builds and every bundle processor a worker makes: 250 times and 0.25 CPU-s in a
    small create run. The answer depends only on the methods, so it is kept per class and own methods."""
    from apache_beam.transforms import userstate

    find = userstate.get_dofn_specs
    if hasattr(find, "beams_own"):
        return
    found: dict = {}

    def get_dofn_specs(dofn):
        key = _dofn_specs_key(dofn)
        if key is None:
            return find(dofn)
        if key not in found:
            found[key] = find(dofn)
        state, timers = found[key]
        return set(state), set(timers)

    get_dofn_specs.beams_own = find
    userstate.get_dofn_specs = get_dofn_specs


# How often Beam's workers sample which step they are in. The end of every bundle waits for the sampling thread's
# current sleep, which Beam lets grow to 200 ms: idle time that each long bundle pays, 0.1 s on average.
LOCAL_SAMPLING_PERIOD_MS = 10


def _shorten_state_sampling() -> None:
    """Local runs sample every LOCAL_SAMPLING_PERIOD_MS (workers forked from the launcher inherit it). Left alone
    if Beam's sampler no longer has the one default this expects."""
    from apache_beam.runners.worker import statesampler

    init = statesampler.StateSampler.__init__
    if init.__defaults__ == (statesampler.DEFAULT_SAMPLING_PERIOD_MS,):
        init.__defaults__ = (LOCAL_SAMPLING_PERIOD_MS,)


# glibc malloc parameters (mallopt) for local runs: serve arrays up to 1 GiB from the heap, grow the heap 256 MiB at a
# time, and return its free top to the system only beyond 1 GiB.
_MALLOC_PARAMETERS = {-3: 1 << 30, -2: 256 << 20, -1: 1 << 30}  # M_MMAP_THRESHOLD, M_TOP_PAD, M_TRIM_THRESHOLD


def _keep_freed_memory() -> None:
    """Let local runs reuse the memory they free. By default glibc maps each array over a few MB afresh and unmaps
    it when freed, so every bucket's arrays fault in their pages again and every unmap stops the other core to
    flush its address cache: with two workers this took 8% of the CPU and of the wall time of a 25 MB create run.
    A worker's memory then stays at its peak until it exits. Forked workers inherit the setting."""
    import ctypes
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    for parameter, value in _MALLOC_PARAMETERS.items():
        mallopt(parameter, value)


# The command Beam's local runner starts each worker process with in multi_processing mode.
_STOCK_WORKER_COMMAND = "-m apache_beam.runners.worker.sdk_worker_main"


def _local_runner_class():
    """FnApiRunner whose multi-process workers are forked from the launcher (pipeline/forked_workers.py)."""
    from apache_beam.portability import python_urns
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    from pipeline import forked_workers

    class LocalRunner(fn_runner.FnApiRunner):
        def run_via_runner_api(self, pipeline_proto, options):
            direct = options.view_as(DirectOptions)
            if direct.direct_running_mode == "in_memory":
                return super().run_via_runner_api(pipeline_proto, options)
            stock = [env for env in pipeline_proto.components.environments.values()
                     if env.urn == python_urns.SUBPROCESS_SDK and env.payload.decode().endswith(_STOCK_WORKER_COMMAND)]
            workers = None
            if stock and forked_workers.can_fork():
                try:
                    workers = forked_workers.ForkedWorkers(self._num_workers)
                except OSError as e:
                    logging.getLogger(__name__).warning("starting the workers the usual way: %s", e)
            forked_workers.note_grpc_started()  # from here on this process talks gRPC: no later run may fork
            if workers is None:
                return super().run_via_runner_api(pipeline_proto, options)
            with workers:
                logging.getLogger(__name__).info("forked %d SDK worker processes: %s", len(workers.pids),
                                                 " ".join(map(str, workers.pids)))
                for env in stock:
                    env.payload = workers.command.encode()
                return super().run_via_runner_api(pipeline_proto, options)

    return LocalRunner
