"""A Flink session cluster on this machine: one JobManager and N TaskManagers, each its own JVM, all on one address.

The configuration is what Beam's batch jobs need on Flink 1.19 (each setting found by a failure without it):
- TaskManager network memory 256 MB: `create`'s shuffles need more buffers than the default 10% gives
  ("Insufficient number of network buffers: required 512, but only 349 available");
- `cluster.evenly-spread-out-slots`: otherwise Flink fills one TaskManager's slots first, and a job of parallelism 2
  runs wholly on one of them;
- 256 MB of task off-heap memory: Beam's Fn API data plane (gRPC over Netty) holds the elements on their way to and
  from the SDK workers in direct memory, and two subtasks' streams in one TaskManager filled the default limit on
  62 MB of text ("Cannot reserve 2097152 bytes of direct buffer memory (allocated: 400941897, limit: 402653184)");
- a 3 GB TaskManager process: Beam's Flink batch runner gathers the values of one key of a GroupByKey in the heap
  before it hands them to Python, and `create`'s shards are such groups (~150 MB each at 62 MB of text with the
  job's own shard count): with 2 GB the same run ended in "OutOfMemoryError: Java heap space";
- a fixed-delay restart strategy: without checkpoints Flink restarts nothing;
- heartbeats every 2 s, a TaskManager taken for lost after 2 heartbeats that cannot reach it (a killed TaskManager's
  port refuses them: found in about 4 s, where Flink's default would leave it registered for 50 s and deploy
  restarts onto it that fail again), and a 60 s timeout for one that is alive but slow to answer: a 10 s timeout
  restarted a job whose TaskManagers a load of 30 on 2 cores had only delayed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bertcorpus.pipeline.engines import daemons
from bertcorpus.pipeline.engines.daemons import Daemon, LocalCluster


@dataclass
class FlinkSettings:
    host: str = "127.0.0.1"
    rest_port: int = 8081
    rpc_port: int = 6123
    task_managers: int = 2
    slots: int = 2
    restart_attempts: int = 10
    restart_delay_seconds: int = 10


def flink_configuration(home: Path, settings: FlinkSettings, state: Path) -> dict:
    """config.yaml's settings (flat keys), the shipped file's Java options kept (Java 17 needs its --add-opens)."""
    shipped = yaml.safe_load((home / "conf" / "config.yaml").read_text()) or {}
    java_options = shipped.get("env", {}).get("java", {}).get("opts", {}).get("all", "")
    host = settings.host
    return {
        "env.java.opts.all": java_options,
        "jobmanager.bind-host": host,
        "jobmanager.rpc.address": host,
        "jobmanager.rpc.port": settings.rpc_port,
        "jobmanager.memory.process.size": "1024m",
        "jobmanager.execution.failover-strategy": "region",
        "taskmanager.bind-host": host,
        "taskmanager.host": host,
        "taskmanager.numberOfTaskSlots": settings.slots,
        "taskmanager.memory.process.size": "3072m",
        "taskmanager.memory.network.min": "256m",
        "taskmanager.memory.network.max": "256m",
        "taskmanager.memory.task.off-heap.size": "256m",  # Beam's gRPC data plane buffers in direct memory
        "taskmanager.memory.managed.fraction": 0.25,  # keeps ~300 MB of task heap beside the larger network pool
        "cluster.evenly-spread-out-slots": True,
        "parallelism.default": settings.slots,
        "rest.address": host,
        "rest.bind-address": host,
        "rest.port": settings.rest_port,
        "io.tmp.dirs": str(state / "tmp"),
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": settings.restart_attempts,
        "restart-strategy.fixed-delay.delay": f"{settings.restart_delay_seconds} s",
        "heartbeat.interval": 2000,  # plain milliseconds: Flink 1.19 refuses "2 s" here
        "heartbeat.rpc-failure-threshold": 2,  # heartbeats that cannot reach a TaskManager: gone (Flink's default)
        "heartbeat.timeout": 60000,  # unanswered heartbeats: a busy host delays answers by more than 10 s
    }


@dataclass
class LocalFlink(LocalCluster):
    home: Path
    state: Path
    settings: FlinkSettings = field(default_factory=FlinkSettings)
    job_manager: Daemon | None = None
    task_managers: list[Daemon] = field(default_factory=list)

    @property
    def rest(self) -> str:
        return f"{self.settings.host}:{self.settings.rest_port}"

    def _environment(self) -> dict[str, str]:
        conf = self.state / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        for name in ("log4j-console.properties", "logback-console.xml"):
            (conf / name).write_bytes((self.home / "conf" / name).read_bytes())
        (conf / "config.yaml").write_text(
            yaml.safe_dump(flink_configuration(self.home, self.settings, self.state), sort_keys=False, width=10_000)
        )
        for folder in ("log", "run", "tmp"):
            (self.state / folder).mkdir(parents=True, exist_ok=True)
        return {
            **os.environ,
            "FLINK_HOME": str(self.home),
            "FLINK_CONF_DIR": str(conf),
            "FLINK_LOG_DIR": str(self.state / "log"),
            "FLINK_PID_DIR": str(self.state / "run"),
        }

    def start(self) -> float:
        """Start the JobManager, then the TaskManagers; seconds until all are registered."""
        environment = self._environment()
        self.job_manager = daemons.start(
            "the Flink JobManager",
            [str(self.home / "bin" / "jobmanager.sh"), "start-foreground"],
            self.state / "log" / "jobmanager.out",
            environment,
        )
        took = self.wait_for(
            lambda: "flink-version" in daemons.http_json(f"http://{self.rest}/config"),
            f"the Flink JobManager answered at http://{self.rest}",
        )
        for _ in range(self.settings.task_managers):
            self.add_task_manager(environment)
        return took + self.wait_for_task_managers(self.settings.task_managers)

    def add_task_manager(self, environment: dict[str, str] | None = None) -> Daemon:
        number = len(self.task_managers)
        daemon = daemons.start(
            f"Flink TaskManager {number}",
            [str(self.home / "bin" / "taskmanager.sh"), "start-foreground"],
            self.state / "log" / f"taskmanager-{number}.out",
            environment or self._environment(),
        )
        self.task_managers.append(daemon)
        return daemon

    def registered_task_managers(self) -> int:
        return len(daemons.http_json(f"http://{self.rest}/taskmanagers").get("taskmanagers", []))

    def wait_for_task_managers(self, count: int) -> float:
        return self.wait_for(lambda: self.registered_task_managers() >= count, f"{count} Flink TaskManagers registered")

    def leader(self) -> Daemon | None:
        return self.job_manager

    def followers(self) -> list[Daemon]:
        return self.task_managers
