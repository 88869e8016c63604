"""A job's pipeline run to its end: on this machine under the watch of run_watch.py with the progress line of
run_progress.py, or on a remote runner, whose restarts (flink_restarts.py) or Dataflow job page it names. A dry run,
a drawing of the graph and a job handed to a remote runner without waiting end once the job is built or submitted;
each way of ending has its one line."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field


@dataclass
class FinishedRun:
    """A run that ran to its end here: Beam's final state, for a local run the seconds its stages took, each named
    by the job's steps that worked most in it (run_progress.stage_time_rows), and for a run on a Flink cluster how
    often the job restarted (engines/flink_restarts.py)."""

    state: object
    stage_times: list[tuple[str, float]] = field(default_factory=list)
    runner_rows: list[tuple[str, str]] = field(default_factory=list)

    def summary_rows(self) -> list[tuple[str, str]]:
        from bertcorpus.pipeline.engines.run_progress import stage_time_rows

        return stage_time_rows(self.stage_times) + self.runner_rows


def run_pipeline(pipeline, options, what: str, plan=None) -> FinishedRun | None:
    """Run and wait; None for a dry run or a job handed to a remote runner without waiting. A local run shows its
    progress meanwhile as `plan` (a run_progress.ProgressPlan) says. A local run stopped by Ctrl-C raises
    KeyboardInterrupt (Terminated for SIGTERM), whatever Beam made of it, and one whose worker process died
    WorkerDiedError."""
    from bertcorpus.pipeline.engines import runners
    from bertcorpus.pipeline.engines.launcher_watch import mark_launcher
    from bertcorpus.pipeline.engines.live_counts import LiveCounts
    from bertcorpus.pipeline.engines.run_progress import ProgressPlan, RunProgress, busiest, short_stage, step_seconds
    from bertcorpus.pipeline.engines.run_watch import RunWatch, readable_stage
    from bertcorpus.pipeline.errors import WorkerDiedError, user_message

    if not runners.is_local(options):
        from bertcorpus.pipeline.engines.flink_restarts import FlinkRestarts

        restarts = FlinkRestarts.watching(options)
        result = _run_and_wait(pipeline, options, what)
        if result is None:
            return None
        return FinishedRun(result.state, runner_rows=restarts.rows() if restarts else [])
    mark_launcher()  # local worker processes end themselves if this one is killed (engines/launcher_watch.py)
    from apache_beam.options.pipeline_options import DirectOptions

    quiet = options.view_as(
        DirectOptions
    ).direct_running_mode == "multi_processing" and not logging.getLogger().isEnabledFor(logging.INFO)  # not --verbose
    with contextlib.ExitStack() as stack:
        spill = stack.enter_context(runners.local_shuffle(pipeline))
        steps = step_names(pipeline)  # the steps that run: local_shuffle replaced some
        watch = stack.enter_context(RunWatch(steps, quiet_workers=quiet))
        counts = stack.enter_context(LiveCounts(os.path.join(spill, "counts") if spill else None))
        stream = stack.enter_context(watch.user_stderr())
        plumbing = shuffle_steps(pipeline)

        def stage() -> str | None:
            return short_stage(readable_stage(watch.stage, steps), plumbing, most=2) if watch.stage else None

        try:
            result = _run_and_wait(
                pipeline, options, what, RunProgress(what, plan or ProgressPlan(), counts, stage, stream)
            )
        except BaseException as e:
            if watch.interrupted:
                raise watch.stop() from None
            if watch.dead_worker_status is not None and user_message(e) is None:  # not a worker's own error
                raise WorkerDiedError(watch.worker_death()) from None
            raise
    if watch.interrupted:
        raise watch.stop()
    if result is None:
        return None
    worked = step_seconds(result.monitoring_infos())
    return FinishedRun(result.state, [(busiest(s, plumbing, worked), t) for s, t in watch.stage_times()])


def step_names(pipeline) -> list[str]:
    """The full labels of the job's steps, composite ones included."""
    from apache_beam.pipeline import PipelineVisitor

    class Labels(PipelineVisitor):
        def __init__(self):
            self.labels = []

        def enter_composite_transform(self, node):
            self.labels.append(node.full_label)

        def visit_transform(self, node):
            self.labels.append(node.full_label)

    labels = Labels()
    pipeline.visit(labels)
    return labels.labels


def shuffle_steps(pipeline) -> set[str]:
    """The job's own steps (two labels deep: 'create pretraining data/group into buckets') that only move data: its
    groupings, reshuffles and flattens. A stage is named by the steps that work on the data."""
    import apache_beam as beam
    from apache_beam.pipeline import PipelineVisitor

    from bertcorpus.pipeline.engines.local_shuffle import GroupLargeValues, SpilledGroupByKey

    movers = (beam.GroupByKey, beam.Flatten, beam.Reshuffle, GroupLargeValues, SpilledGroupByKey)

    class Movers(PipelineVisitor):
        def __init__(self):
            self.labels = set()

        def enter_composite_transform(self, node):
            self.visit_transform(node)

        def visit_transform(self, node):
            if node.full_label.count("/") == 1 and isinstance(node.transform, movers):
                self.labels.add(node.full_label)

    movers_found = Movers()
    pipeline.visit(movers_found)
    return movers_found.labels


def _run_and_wait(pipeline, options, what: str, progress=None):
    """The run's result, or None where it did not run to its end here; `progress` (a context manager) is shown while
    the job runs, and ends before the line that says it finished."""
    from bertcorpus.pipeline.engines import runners

    started = time.time()
    dry_run = runners.is_dry_run(options)
    if dry_run and runners.is_local(options):
        # The local engine has no dry-run mode and would run the job: build and check the graph only.
        pipeline.to_runner_api()
        print(f"{what}: dry run — the job graph was built; nothing ran and nothing was written.")
        return None
    with progress or contextlib.nullcontext():
        result = pipeline.run()  # the local runner runs the whole job here
        if runners.is_rendering(options):
            # Fresh, not the cached option dictionary: the render options register only when that runner loads.
            print(f"{what}: job graph written to {', '.join(options.get_all_options().get('render_output') or [])}")
            return None
        if dry_run:
            print(
                f"{what}: dry run — the job graph was built and validated{_package_built(options)}; nothing ran and "
                "nothing was written."
            )
            return None
        job = dataflow_job(result, options)
        if job:
            print(f"{what}: submitted {job}", flush=True)
        if not runners.is_local(options) and options.get_all_options().get("no_wait_until_finish"):
            if not job:
                print(f"{what}: submitted.")
            return None
        state = _wait_until_finish(result)
    logging.getLogger(__name__).info("%s finished in %.1f s", what, time.time() - started)
    print(f"{what}: finished in {time.time() - started:.1f} s ({state})")
    return result


def _package_built(options) -> str:
    """What a Dataflow dry run did besides the graph: Beam's stager built the package its workers would be given
    (an sdist of --setup_file, by `python -m build --no-isolation` in this environment), and would have failed the
    run where it could not."""
    from apache_beam.options.pipeline_options import SetupOptions

    from bertcorpus.pipeline.engines import runners

    setup_file = options.view_as(SetupOptions).setup_file
    if not (setup_file and runners.is_dataflow(options)):
        return ""
    return f", and the package for its workers was built from --setup_file {setup_file}"


def _wait_until_finish(result):
    """The runner's final state; a job that ended unfinished raises RunnerJobFailed (one line), unless a message
    meant for the user came back with it (a worker's input error), which is then raised as it came."""
    from bertcorpus.pipeline.errors import runner_job_failure, user_message

    try:
        return result.wait_until_finish()
    except RuntimeError as e:
        failed = runner_job_failure(e)
        if failed is None or user_message(e) is not None:
            raise
        raise failed from None


def dataflow_job(result, options) -> str | None:
    """A Dataflow job's id and its page in the Cloud console, to show as soon as it is submitted: Beam logs them,
    at a level the command line leaves out unless --verbose."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions

    from bertcorpus.pipeline.engines import runners

    if not runners.is_dataflow(options) or not getattr(result, "has_job", False):
        return None
    cloud, job = options.view_as(GoogleCloudOptions), result.job_id()
    return (
        f"Dataflow job {job}: https://console.cloud.google.com/dataflow/jobs/{cloud.region}/{job}"
        f"?project={cloud.project}"
    )
