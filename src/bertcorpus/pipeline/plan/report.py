"""A plan as `bertcorpus plan` shows it: its stages on their workers, their sum and bill, as a table or as JSON."""

from __future__ import annotations

import os
from dataclasses import dataclass

from bertcorpus.pipeline.plan.prices import PRICES_SOURCE, Bill, Prices, Workers, bill, prices_record
from bertcorpus.pipeline.plan.stages import Input, Stage, joined

_SHOWN_INPUTS = 5  # input files listed by name before "and N more"


@dataclass
class Plan:
    """A plan: what it plans, on which workers, its stages (each on those workers) and the prices it is billed at."""

    what: str
    workers: Workers
    stages: list[Stage]
    prices: Prices

    @property
    def inputs(self) -> Input:
        """What the plan reads from storage: the first stage's input, or, for a chain, every extraction's."""
        read = [s.input for s in self.stages if s.name.startswith("extract-")] or [self.stages[0].input]
        return joined(read)

    @property
    def cpu_seconds(self) -> float:
        return sum(s.cpu_seconds for s in self.stages)

    @property
    def wall_seconds(self) -> float:
        return sum(s.wall_seconds for s in self.stages)

    @property
    def bill(self) -> Bill:
        """The workers' bill: for the stages they run (a vocab trained on this machine keeps none of them busy)."""
        remote = [s for s in self.stages if not s.runs_here]
        wall = sum(s.wall_seconds for s in remote)
        return bill(wall, sum(s.shuffle_bytes for s in remote), self.workers, self.prices)

    def record(self) -> dict:
        cost = self.bill
        return {
            "plan": self.what,
            "workers": {
                "engine": self.workers.engine,
                "count": self.workers.count,
                "vcpus": self.workers.vcpus,
                "memory_gb": self.workers.memory_gb,
                "machine": self.workers.machine or None,
            },
            "inputs": {"files": len(self.inputs.files), "bytes": self.inputs.bytes, "listed": self.inputs.files},
            "stages": [s.record() for s in self.stages],
            "cpu_seconds": round(self.cpu_seconds, 1),
            "cpu_hours": round(self.cpu_seconds / 3600, 4),
            "wall_seconds": round(self.wall_seconds, 1),
            "peak_memory_bytes": max(s.peak_memory_bytes for s in self.stages),
            "shuffle_bytes": sum(s.shuffle_bytes for s in self.stages),
            "output_bytes": sum(s.output_bytes for s in self.stages),
            "cost": {
                "usd": round(cost.usd, 2),
                "vcpu_hours": round(cost.vcpu_hours, 2),
                "memory_gb_hours": round(cost.memory_gb_hours, 2),
                "shuffle_gb": round(cost.shuffle_gb, 2),
                "prices": prices_record(self.prices),
            },
        }


def plan_lines(plan: Plan) -> list[str]:
    lines = [f"plan: {plan.what}, {_workers_phrase(plan.workers)}"]
    lines += _input_lines(plan.inputs)
    header = ("stage", "documents", "buckets", "shards", "instances", "CPU", "memory/worker", "shuffle", "output")
    rows = [
        (
            s.name,
            _count(s.documents),
            _count(s.buckets),
            _count(s.shards),
            "; ".join(f"{name} {n['train'] + n['eval']:,}" for name, n in s.instances.items()) or "-",
            _duration(s.cpu_seconds),
            _size(s.peak_memory_bytes),
            _size(s.shuffle_bytes),
            _size(s.output_bytes),
        )
        for s in plan.stages
    ]
    if len(plan.stages) > 1:
        rows.append(
            (
                "total",
                "",
                "",
                "",
                "",
                _duration(plan.cpu_seconds),
                _size(max(s.peak_memory_bytes for s in plan.stages)),
                _size(sum(s.shuffle_bytes for s in plan.stages)),
                _size(sum(s.output_bytes for s in plan.stages)),
            )
        )
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines.append("")
    for row in [header, *rows]:
        lines.append(
            "  ".join(
                cell.ljust(w) if i in (0, 4) else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))
            ).rstrip()
        )
    lines.append("")
    lines += [f"{s.name}: {note}" for s in plan.stages for note in s.notes]
    waits = "" if plan.workers.engine == "local" else "; the shuffle's own time comes on top"
    lines.append(f"wall time ≈ {_duration(plan.wall_seconds, cpu=False)} ({_workers_phrase(plan.workers)}){waits}")
    lines.append(_cost_line(plan))
    return lines


def _input_lines(first: Input) -> list[str]:
    lines = [f"inputs: {len(first.files):,} file{'s' * (len(first.files) != 1)}, {_size(first.bytes)} as stored"]
    width = max((len(_shown(p)) for p, _ in first.files[:_SHOWN_INPUTS]), default=0)
    lines += [f"  {_shown(p).ljust(width)}  {_size(size)}" for p, size in first.files[:_SHOWN_INPUTS]]
    if len(first.files) > _SHOWN_INPUTS:
        lines.append(f"  and {len(first.files) - _SHOWN_INPUTS:,} more")
    lines += [f"  {p}: not listed (a dry run works offline; `bertcorpus plan` lists it)" for p in first.not_listed]
    return lines


def _workers_phrase(workers: Workers) -> str:
    if workers.engine == "local":
        return "this machine, " + ("in memory" if workers.count == 1 else f"{workers.count:,} worker processes")
    machine = f" ({workers.machine})" if workers.machine else ""
    return f"{workers.engine}, {workers.count:,} workers × {workers.vcpus} vCPUs{machine}"


def _cost_line(plan: Plan) -> str:
    cost, prices = plan.bill, plan.prices
    if plan.workers.engine == "local":
        return "cost: none billed (this machine)"
    shuffle = f", {cost.shuffle_gb:,.0f} GB shuffled × ${prices.shuffle_gb:g}" if cost.shuffle_gb else ""
    return (
        f"cost ≈ ${cost.usd:,.2f}: {cost.vcpu_hours:,.1f} vCPU-h × ${prices.vcpu_hour:g}, "
        f"{cost.memory_gb_hours:,.0f} GB-h × ${prices.memory_gb_hour:g}{shuffle}, all workers up all the time "
        f"(prices: {PRICES_SOURCE}; --price-* to change)"
    )


def _shown(path: str) -> str:
    """A local path relative to the working directory where it lies below it; any other as it is."""
    if "://" in path or not os.path.isabs(path):
        return path
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def _size(n: float) -> str:
    """Bytes in the largest unit that keeps the figure at least 1, to three figures; a figure that rounds up to
    1,000 (999,957 bytes) is shown in the next unit (1 MB), not as 1e+03 kB."""
    for unit, scale in (("B", 1), ("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if _rounded(n / scale) < 1000:
            return f"{_figures(n / scale)} {unit}"
    return f"{_figures(n / 1e12)} TB"


def _duration(seconds: float, cpu: bool = True) -> str:
    prefix = "CPU-" if cpu else ""
    if seconds >= 3600:
        return f"{_figures(seconds / 3600)} {prefix}h"
    if seconds >= 60:
        return f"{_figures(seconds / 60)} {prefix}min"
    return f"{_figures(seconds)} {prefix}s"


def _rounded(value: float) -> float:
    """value to three significant figures, as the plan shows it."""
    return float(f"{value:.3g}")


def _figures(value: float) -> str:
    """value to three significant figures, written out in full from 1,000 on (hours, terabytes) rather than in
    Python's exponent form."""
    return f"{value:.3g}" if _rounded(value) < 1000 else f"{value:,.0f}"
