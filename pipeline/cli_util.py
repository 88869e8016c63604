"""What every command shares: running a pipeline, boolean flags, the closing summary."""
from __future__ import annotations

import argparse
import logging
import sys
import time

BooleanFlag = argparse.BooleanOptionalAction


def run_pipeline(pipeline, options, what: str):
    """Run and wait; None for a dry run or a job handed to a remote runner without waiting. A local run stopped by
    Ctrl-C raises KeyboardInterrupt, whatever Beam made of it, and one whose worker process died WorkerDiedError."""
    from pipeline import runners
    from pipeline.errors import WorkerDiedError, user_message
    from pipeline.run_watch import RunWatch

    if not runners.is_local(options):
        return _run_and_wait(pipeline, options, what)
    from apache_beam.options.pipeline_options import DirectOptions

    quiet = (options.view_as(DirectOptions).direct_running_mode == "multi_processing"
             and not logging.getLogger().isEnabledFor(logging.INFO))  # not --verbose
    with runners.local_shuffle(pipeline), RunWatch(step_names(pipeline), quiet_workers=quiet) as watch:
        try:
            state = _run_and_wait(pipeline, options, what)
        except BaseException as e:
            if watch.interrupted:
                raise KeyboardInterrupt from None
            if watch.dead_worker_status is not None and user_message(e) is None:  # not a worker's own error
                raise WorkerDiedError(watch.worker_death()) from None
            raise
    if watch.interrupted:
        raise KeyboardInterrupt
    return state


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


def _run_and_wait(pipeline, options, what: str):
    from pipeline import runners

    started = time.time()
    dry_run = runners.is_dry_run(options)
    if dry_run and runners.is_local(options):
        # The local engine has no dry-run mode and would run the job: build and check the graph only.
        pipeline.to_runner_api()
        print(f"{what}: dry run — the job graph was built; nothing ran and nothing was written.")
        return None
    result = pipeline.run()
    if runners.is_rendering(options):
        # Fresh, not the cached option dictionary: the render options register only when that runner loads.
        print(f"{what}: job graph written to {', '.join(options.get_all_options().get('render_output') or [])}")
        return None
    if dry_run:
        print(f"{what}: dry run — the job graph was built and validated; nothing ran and nothing was written.")
        return None
    if not runners.is_local(options) and not options.get_all_options().get("wait_until_finish", True):
        print(f"{what}: submitted.")
        return None
    state = result.wait_until_finish()
    logging.getLogger(__name__).info("%s finished in %.1f s", what, time.time() - started)
    print(f"{what}: finished in {time.time() - started:.1f} s ({state})")
    return state


def print_summary(what: str, manifest: dict, rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows) if rows else 0
    print(f"\n{what} summary")
    for key, value in rows:
        print(f"  {key.ljust(width)}  {value}")
    sys.stdout.flush()
