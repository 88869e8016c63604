"""The prices a plan's cost is made of, the workers it runs on, and the wall time and bill that follow.

The default prices are Dataflow's published list prices for batch workers in us-central1, without discounts
(docs/dataflow.md §7 names the page and when it was read); `bertcorpus plan --price-vcpu-hour ...` replaces them.
On Flink or Spark the same vCPU and memory prices stand for the machines the user runs, and there is no shuffle
service to pay; a local run is not billed.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass

from bertcorpus.pipeline.plan import rates

PRICES_SOURCE = "Dataflow batch list prices, us-central1 (cloud.google.com/dataflow/pricing)"


@dataclass(frozen=True)
class Prices:
    vcpu_hour: float = 0.056
    memory_gb_hour: float = 0.003557
    shuffle_gb: float = 0.011  # Dataflow Shuffle, per GB of data processed (batch)


@dataclass(frozen=True)
class Workers:
    """Where a job runs: the engine (local, dataflow, flink, spark, portable), how many workers, and each one's
    vCPUs and memory."""

    engine: str
    count: int
    vcpus: int
    memory_gb: float
    machine: str = ""

    @property
    def slots(self) -> int:
        return self.count * self.vcpus


# GB of memory per vCPU of Compute Engine's machine families, by kind (n1 is the older, smaller one).
_MEMORY_PER_VCPU = {"standard": 4.0, "highmem": 8.0, "highcpu": 1.0}
_N1_MEMORY_PER_VCPU = {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9}
_MACHINE = re.compile(r"^(?P<family>[a-z]\d[a-z]?)-(?P<kind>standard|highmem|highcpu)-(?P<vcpus>\d+)$")
DATAFLOW_DEFAULT_MACHINE = "n1-standard-1"  # Dataflow's batch worker when --machine_type is not given


def machine_shape(machine: str) -> tuple[int, float]:
    """(vCPUs, GB of memory) of a Compute Engine machine type such as n2-standard-8."""
    found = _MACHINE.match(machine)
    if not found:
        raise ValueError(
            f"--machine_type {machine}: not a machine type the plan knows (FAMILY-standard|highmem|highcpu-VCPUS, "
            "e.g. n2-standard-8); give --workers-vcpus and --workers-memory-gb instead"
        )
    vcpus = int(found["vcpus"])
    per_vcpu = (_N1_MEMORY_PER_VCPU if found["family"] == "n1" else _MEMORY_PER_VCPU)[found["kind"]]
    return vcpus, vcpus * per_vcpu


def engine_of(runner: str | None) -> str:
    """The engine a --runner names: local for the direct runner (or none), else dataflow, flink, spark, portable."""
    name = (runner or "").lower()
    if name in ("", "directrunner", "fnapirunner", "switchingdirectrunner"):
        return "local"
    return next((engine for engine in ("dataflow", "flink", "spark") if engine in name), "portable")


def workers_of(options: dict, count: int | None, vcpus: int | None, memory_gb: float | None) -> Workers:
    """The workers a job's Beam options ask for; `count`, `vcpus` and `memory_gb` (the plan's own flags) replace
    what the options say or leave open."""
    engine = engine_of(options.get("runner"))
    machine = ""
    if engine == "local":
        parallel = options.get("direct_running_mode") == "multi_processing"
        found_count = (options.get("direct_num_workers") or os.cpu_count() or 1) if parallel else 1
        found_vcpus, found_memory = 1, 0.0
    elif engine == "dataflow":
        machine = options.get("machine_type") or options.get("worker_machine_type") or DATAFLOW_DEFAULT_MACHINE
        found_count = options.get("max_num_workers") or options.get("num_workers") or 1
        known = vcpus is not None and memory_gb is not None  # an unknown machine type needs both given
        found_vcpus, found_memory = (vcpus, memory_gb) if known else machine_shape(machine)
    else:  # a cluster of the user's: its task slots (Flink's --parallelism) or one worker of one vCPU
        found_count, found_vcpus, found_memory = options.get("parallelism") or 1, 1, 4.0
    return Workers(
        engine,
        int(count or found_count),
        int(vcpus or found_vcpus),
        float(memory_gb if memory_gb is not None else found_memory),
        machine,
    )


def engine_cpu_seconds(local_start_s: float, work_s: float, workers: Workers) -> float:
    """A stage's CPU on its engine, from its local start-up and the CPU of its work in memory here."""
    if workers.engine == "local":
        extra = rates.LOCAL_WORKER_START_S * workers.count if workers.count > 1 else 0.0
        return local_start_s + work_s + extra
    return rates.ENGINE_CPU_FACTOR[workers.engine] * work_s + rates.ENGINE_START_CPU_S[workers.engine]


def wall_seconds(cpu_s: float, workers: Workers) -> float:
    """How long a stage takes on its workers: its engine's start, then its CPU shared among them (a local run
    in memory uses one core, and its worker processes share this machine's cores however many there are; remote
    workers are kept busy only part of the time)."""
    if workers.engine == "local":
        return cpu_s / min(workers.count, os.cpu_count() or 1)
    busy = workers.slots * rates.REMOTE_UTILISATION
    return rates.ENGINE_START_WALL_S[workers.engine] + cpu_s / max(busy, 1)


@dataclass(frozen=True)
class Bill:
    vcpu_hours: float
    memory_gb_hours: float
    shuffle_gb: float
    usd: float


def bill(wall_s: float, shuffle_bytes: float, workers: Workers, prices: Prices) -> Bill:
    """What the workers cost for `wall_s`, all of them up all the time (an autoscaled job costs less), and the
    shuffle service's charge on Dataflow; a local run costs nothing."""
    if workers.engine == "local":
        return Bill(0.0, 0.0, 0.0, 0.0)
    hours = wall_s / 3600
    vcpu_hours = workers.slots * hours
    memory_gb_hours = workers.count * workers.memory_gb * hours
    shuffle_gb = shuffle_bytes / 1e9 if workers.engine == "dataflow" else 0.0
    usd = vcpu_hours * prices.vcpu_hour + memory_gb_hours * prices.memory_gb_hour + shuffle_gb * prices.shuffle_gb
    return Bill(vcpu_hours, memory_gb_hours, shuffle_gb, usd)


def prices_record(prices: Prices) -> dict:
    return {**asdict(prices), "source": PRICES_SOURCE}
