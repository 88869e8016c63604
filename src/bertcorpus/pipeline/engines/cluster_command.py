"""`bertcorpus cluster flink|spark|worker-pool`: a local cluster to run the jobs on, in one command.

`flink` fetches Flink and builds Beam's job server once (pipeline/engines/engine_cache.py), starts a JobManager,
TaskManagers and an SDK worker pool on one address, prints the Beam options that send a job there, and waits; on
Ctrl-C or SIGTERM it stops everything it started, each by its process group. `spark` does the same with a Spark
standalone master and workers. `worker-pool` starts only the pool, for the recipe's self-managed clusters: one per
host, beside its TaskManagers or executors (docs/engines.md).

While it runs, STATE/cluster.json holds the options, the daemons' pids and the log folder.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import sys
import time
from pathlib import Path

from bertcorpus.pipeline.engines import engine_cache
from bertcorpus.pipeline.engines.engine_cache import say

ACCEPTS_BEAM_OPTIONS = False
ENGINES = ("flink", "spark", "worker-pool")
POOL_LOG = "worker-pool.log"


def add_arguments(parser) -> None:
    parser.add_argument("engine", choices=ENGINES, help="what to start: a Flink or Spark cluster, or a worker pool")
    parser.add_argument("--host", default="127.0.0.1", help="the address every service listens on (default: 127.0.0.1)")
    parser.add_argument(
        "--workers", type=int, default=2, help="TaskManagers (Flink) or workers (Spark) to start (default: 2)"
    )
    parser.add_argument(
        "--slots", type=int, default=2, help="task slots per TaskManager, cores per Spark worker (default: 2)"
    )
    parser.add_argument(
        "--restart-attempts",
        type=int,
        default=10,
        help="Flink: how often a job whose task failed (a lost TaskManager or SDK worker) restarts before it fails, "
        "10 s apart (default: 10)",
    )
    parser.add_argument("--rest-port", type=int, default=8081, help="Flink's REST port (default: 8081)")
    parser.add_argument("--spark-port", type=int, default=7077, help="the Spark master's port (default: 7077)")
    parser.add_argument("--pool-port", type=int, default=50000, help="the SDK worker pool's port (default: 50000)")
    parser.add_argument(
        "--state-dir",
        default=None,
        help="configuration, logs and scratch space of the cluster (default: ENGINES_CACHE/run-ENGINE)",
    )
    parser.add_argument(
        "--fetch-only",
        action="store_true",
        help="fetch and build what the engine needs, print where it is, and start nothing (default: start)",
    )


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline.errors import UserError

    if args.workers < 1 or args.slots < 1:
        raise UserError("--workers and --slots must be at least 1")
    if args.restart_attempts < 0:
        raise UserError("--restart-attempts must be 0 or more")
    state = Path(args.state_dir or engine_cache.cache_dir() / f"run-{args.engine}").expanduser().resolve()
    if not args.fetch_only:  # now, not after minutes of fetching and building
        from bertcorpus.pipeline.engines.worker_pool import check_can_listen

        check_can_listen(f"{args.host}:{args.pool_port}")
    if args.engine == "worker-pool":
        return _serve_pool_only(args, state)
    engine_cache.require_java()
    if args.engine == "flink":
        home, jar = engine_cache.flink_home(), engine_cache.flink_job_server_jar()
    else:
        home = engine_cache.spark_home()
        jar = engine_cache.spark_job_server_jar(home)
    say(f"{args.engine} home {home}; job server {jar}")
    if args.fetch_only:
        return 0
    return _run_cluster(args, state, home, jar)


def _pool_logger(state: Path) -> None:
    from bertcorpus.pipeline.engines import worker_pool

    (state / "log").mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(state / "log" / POOL_LOG)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger = logging.getLogger(worker_pool.__name__)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # the log file only: the terminal shows the cluster's own lines


def _start_pool(args, state: Path):
    from bertcorpus.pipeline.engines import worker_pool

    _pool_logger(state)
    server, pool, port = worker_pool.serve(f"{args.host}:{args.pool_port}")
    return server, pool, f"{args.host}:{port}"


def _serve_pool_only(args, state: Path) -> int:
    server, pool, address = _start_pool(args, state)
    say(f"SDK worker pool listening at {address} (log: {state / 'log' / POOL_LOG}); Ctrl-C stops it")
    try:
        while True:
            time.sleep(3600)
    finally:
        with _signals_ignored():
            server.stop(0)
            pool.close()


def _beam_options(engine: str, args, jar: Path, pool: str) -> tuple[list[str], dict[str, str]]:
    if engine == "flink":
        options = [
            "--runner",
            "FlinkRunner",
            "--flink_master",
            f"{args.host}:{args.rest_port}",
            "--flink_version",
            engine_cache.FLINK_MINOR,
            "--flink_job_server_jar",
            str(jar),
            # One TaskManager's slots: the job then still fits when another TaskManager is lost.
            "--parallelism",
            str(args.slots),
        ]
        environment = {}
    else:
        options = [
            "--runner",
            "SparkRunner",
            "--spark_master_url",
            f"spark://{args.host}:{args.spark_port}",
            "--spark_job_server_jar",
            str(jar),
        ]
        environment = {"SPARK_LOCAL_IP": args.host}  # the Spark driver runs inside the job server the launcher starts
    options += ["--environment_type", "EXTERNAL", "--environment_config", pool]
    return options, environment


def _run_cluster(args, state: Path, home: Path, jar: Path) -> int:
    from bertcorpus.pipeline.engines import flink_cluster, spark_cluster

    state.mkdir(parents=True, exist_ok=True)
    (state / "cluster.json").unlink(missing_ok=True)
    server = pool = cluster = None
    try:
        server, pool, address = _start_pool(args, state)
        if args.engine == "flink":
            settings = flink_cluster.FlinkSettings(
                args.host,
                args.rest_port,
                task_managers=args.workers,
                slots=args.slots,
                restart_attempts=args.restart_attempts,
            )
            cluster = flink_cluster.LocalFlink(home, state, settings)
        else:
            cluster = spark_cluster.LocalSpark(home, state, args.host, args.spark_port, args.workers, args.slots)
        say(f"starting {args.engine} with {args.workers} workers in {state} ...")
        took = cluster.start()
        options, environment = _beam_options(args.engine, args, jar, address)
        _write_state(state, args.engine, cluster, options, environment, address)
        prefix = " ".join(f"{k}={v}" for k, v in environment.items())
        say(f"ready in {took:.0f} s; run a job with (docs/engines.md):")
        print(f"  {prefix + ' ' if prefix else ''}bertcorpus COMMAND ... {shlex.join(options)}", flush=True)
        say("Ctrl-C stops the cluster")
        _watch(cluster)
    finally:
        with _signals_ignored():
            if cluster is not None:
                cluster.stop()
            if server is not None:
                server.stop(0)
                pool.close()
            (state / "cluster.json").unlink(missing_ok=True)
    return 0


def _write_state(state: Path, engine: str, cluster, options, environment, pool_address: str) -> None:
    record = {
        "engine": engine,
        "home": str(cluster.home),
        "options": options,
        "environment": environment,
        "worker_pool": {"address": pool_address, "pid": os.getpid(), "log": str(state / "log" / POOL_LOG)},
        "daemons": {d.name: d.pid for d in cluster.daemons()},
        "logs": str(state / "log"),
    }
    partial = state / "cluster.json.partial"
    partial.write_text(json.dumps(record, indent=2))
    partial.rename(state / "cluster.json")


def _watch(cluster) -> None:
    """Wait for a stop signal; say when a daemon exits meanwhile (a lost TaskManager)."""
    reported = set()
    while True:
        for daemon in cluster.daemons():
            if not daemon.alive() and daemon.name not in reported:
                reported.add(daemon.name)
                say(f"{daemon.name} exited (status {daemon.process.returncode})")
        time.sleep(1.0)


class _signals_ignored:
    """Stopping the daemons must not be cut short by a second Ctrl-C."""

    def __enter__(self):
        self.previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}

    def __exit__(self, *exc):
        for s, handler in self.previous.items():
            signal.signal(s, handler)
        sys.stderr.flush()
