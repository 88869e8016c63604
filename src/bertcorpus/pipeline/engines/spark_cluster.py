"""A Spark standalone cluster on this machine: one master and N workers, each its own JVM, all on one address.

Each daemon is `spark-class` run in the foreground (it execs java), so its process is the JVM. The web UIs move off
Spark's defaults (8080, 8081): a worker's UI would take Flink's REST port."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from bertcorpus.pipeline.engines import daemons
from bertcorpus.pipeline.engines.daemons import Daemon, LocalCluster

MASTER_UI_PORT = 8090  # workers' UIs follow: 8091, 8092, ...
WORKER_MEMORY = "2g"


@dataclass
class LocalSpark(LocalCluster):
    home: Path
    state: Path
    host: str = "127.0.0.1"
    port: int = 7077
    workers: int = 2
    cores: int = 2
    master: Daemon | None = None
    worker_daemons: list[Daemon] = field(default_factory=list)

    def _environment(self) -> dict[str, str]:
        for folder in ("log", "work", "tmp"):
            (self.state / folder).mkdir(parents=True, exist_ok=True)
        return {
            **os.environ,
            "SPARK_HOME": str(self.home),
            "SPARK_LOCAL_IP": self.host,
            "SPARK_MASTER_HOST": self.host,
            "SPARK_PUBLIC_DNS": self.host,
            "SPARK_LOG_DIR": str(self.state / "log"),
            "SPARK_WORKER_DIR": str(self.state / "work"),
            "SPARK_LOCAL_DIRS": str(self.state / "tmp"),
        }

    def alive_workers(self) -> int:
        status = daemons.http_json(f"http://{self.host}:{MASTER_UI_PORT}/json/")
        return sum(worker.get("state") == "ALIVE" for worker in status.get("workers", []))

    def start(self) -> float:
        environment = self._environment()
        spark_class = str(self.home / "bin" / "spark-class")
        self.master = daemons.start(
            "the Spark master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                self.host,
                "--port",
                str(self.port),
                "--webui-port",
                str(MASTER_UI_PORT),
            ],
            self.state / "log" / "master.out",
            environment,
        )
        took = self.wait_for(
            lambda: "status" in daemons.http_json(f"http://{self.host}:{MASTER_UI_PORT}/json/"),
            f"the Spark master answered at http://{self.host}:{MASTER_UI_PORT}",
        )
        for number in range(1, self.workers + 1):
            self.worker_daemons.append(
                daemons.start(
                    f"Spark worker {number}",
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        self.host,
                        "--cores",
                        str(self.cores),
                        "--memory",
                        WORKER_MEMORY,
                        "--webui-port",
                        str(MASTER_UI_PORT + number),
                        "--work-dir",
                        str(self.state / "work" / f"worker{number}"),
                        f"spark://{self.host}:{self.port}",
                    ],
                    self.state / "log" / f"worker-{number}.out",
                    environment,
                )
            )
        return took + self.wait_for(lambda: self.alive_workers() >= self.workers, f"{self.workers} Spark workers alive")

    def leader(self) -> Daemon | None:
        return self.master

    def followers(self) -> list[Daemon]:
        return self.worker_daemons
