"""`create` on a Flink cluster of one and of two TaskManagers against the direct runner, on the same input.

Figures (recorded in docs/benchmarks.md):
  * CPU-µs per instance of each run, and its ratio to the direct runner's: the launcher (with the job server JVM it
    starts) plus every process of the cluster (JobManager, TaskManagers, the worker pool and its SDK workers),
    user+sys from /proc, sampled before and after the run;
  * the start-up cost of a Flink job: wall and CPU of `create` on the reference sample_text.txt (120 instances,
    nearly all of it fixed cost), and of the large run the seconds from the launcher's start to the job's
    submission (Flink's REST API), the job's own running time, and the seconds after it ended;
  * where a Flink run's CPU goes: the launcher with its job server, Flink's JVMs (scheduling, the shuffle, sorting,
    the Fn API data plane: the engine's own cost) and the Python processes (the job's work), for the large run and
    the tiny one.

The input is bench_create.py's real text (books and wiki articles as JSONL, repeated to --mb). Each cluster is
`bertcorpus cluster flink --workers N` (2 slots per TaskManager, parallelism 2) inside a network namespace of its
own, as in the tests (root and iproute2 needed); it is stopped before the next starts.

    .venv/bin/python benchmarks/bench_engines.py [--mb 5] [--task-managers 1,2] [--num-shards N] [--shared-data DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_create
from bench_create import SAMPLE, create_command, instances, measure, write_corpus

BERTCORPUS = [sys.executable, "-m", "bertcorpus"]
LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
TICKS = os.sysconf("SC_CLK_TCK")


def namespace_cpu(namespace: str) -> dict[int, tuple[str, float]]:
    """(command name, CPU seconds: user+sys with reaped children) of every process in the network namespace."""
    pids = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout.split()
    cpu = {}
    for pid in map(int, pids):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu[pid] = (name, sum(int(f) for f in fields[11:15]) / TICKS)  # utime, stime, cutime, cstime
    return cpu


def in_namespace(namespace: str, url: str):
    script = "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())"
    done = subprocess.run(
        ["ip", "netns", "exec", namespace, sys.executable, "-c", script, url], capture_output=True, text=True
    )
    return json.loads(done.stdout)


def run_on_cluster(namespace: str, options: list[str], inputs: list, output: Path, flags: list[str]) -> dict:
    before = namespace_cpu(namespace)
    started = time.time()
    run = measure(["ip", "netns", "exec", namespace, *create_command(BERTCORPUS, inputs, output, *flags, *options)])
    after = namespace_cpu(namespace)
    used = {pid: (name, cpu - before[pid][1] if pid in before else cpu) for pid, (name, cpu) in after.items()}
    cluster = sum(cpu for _, cpu in used.values())
    # The JVMs (JobManager, TaskManagers) run the engine: scheduling, the shuffle, sorting, the Fn API data plane;
    # the Python processes (the pool and its SDK workers) run the job's own work.
    engine = sum(cpu for name, cpu in used.values() if name == "java")
    jobs = in_namespace(namespace, "http://127.0.0.1:8081/jobs/overview")["jobs"]
    job = max(jobs, key=lambda j: j["start-time"])
    return {
        **run,
        "launcher_cpu": run["cpu"],
        "cluster_cpu": cluster,
        "engine_cpu": engine,
        "cpu": run["cpu"] + cluster,
        "instances": instances(output),
        "to_submission": job["start-time"] / 1000 - started,
        "job_seconds": job["duration"] / 1000,
        "after_job": started + run["wall"] - job["end-time"] / 1000,
    }


def flink_runs(task_managers: int, corpus: Path, tmp: Path, flags: list[str]) -> dict[str, dict]:
    namespace = f"bench-engines-{os.getpid()}-{task_managers}"
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    subprocess.run(["ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up"], check=True)
    state = tmp / f"flink-{task_managers}"
    with open(tmp / f"cluster-{task_managers}.log", "w") as log:
        cluster = subprocess.Popen(
            ["ip", "netns", "exec", namespace, *BERTCORPUS, "cluster", "flink", "--workers", str(task_managers)]
            + ["--state-dir", str(state)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        while not (state / "cluster.json").exists():
            if cluster.poll() is not None:
                raise SystemExit(f"the cluster did not start: {(tmp / f'cluster-{task_managers}.log').read_text()}")
            time.sleep(1)
        options = json.loads((state / "cluster.json").read_text())["options"]
        return {
            "tiny": run_on_cluster(namespace, options, [SAMPLE], tmp / f"tiny-{task_managers}", []),
            "large": run_on_cluster(namespace, options, [corpus], tmp / f"large-{task_managers}", flags),
        }
    finally:
        os.killpg(cluster.pid, signal.SIGTERM)
        cluster.wait()
        subprocess.run(["ip", "netns", "delete", namespace])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=5.0, help="megabytes of text in the large input (default: 5)")
    parser.add_argument("--task-managers", default="1,2", help="cluster sizes to measure (default: 1,2)")
    parser.add_argument(
        "--shared-data", type=Path, default=bench_create.SHARED, help=f"the real text (default: {bench_create.SHARED})"
    )
    parser.add_argument(
        "--num-shards",
        type=int,
        default=0,
        help="create's --num-shards for the large input (default: the job's own choice). On Flink a shard's records "
        "are one group held in a TaskManager's heap: past ~50 MB of text, ask for more shards (docs/engines.md)",
    )
    args = parser.parse_args()
    flags = ["--num-shards", str(args.num_shards)] if args.num_shards else []
    bench_create.SHARED = args.shared_data  # where bench_create's corpus reads its books and wiki articles
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as folder:
        tmp = Path(folder)
        corpus = tmp / "corpus.jsonl"
        size, _ = write_corpus(corpus, args.mb)
        direct = {
            "tiny": {**measure(create_command(BERTCORPUS, [SAMPLE], tmp / "tiny-direct", *LOCAL))},
            "large": {**measure(create_command(BERTCORPUS, [corpus], tmp / "large-direct", *flags, *LOCAL))},
        }
        for name, run in direct.items():
            run["instances"] = instances(tmp / f"{name}-direct")
        results = {"direct": direct}
        for count in map(int, args.task_managers.split(",")):
            results[f"flink, {count} TM"] = flink_runs(count, corpus, tmp, flags)
    base = direct["large"]["cpu"] / direct["large"]["instances"]
    print(f"create on {size / 1e6:.1f} MB of text, 128/20, dupe factor 10; load {os.getloadavg()[0]:.1f}")
    print(
        "| run | instances | wall s | CPU s (launcher + cluster) | CPU-µs/instance | × direct "
        "| tiny job wall s / CPU s |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, runs in results.items():
        large, tiny = runs["large"], runs["tiny"]
        per = large["cpu"] / large["instances"]
        split = f"{large['launcher_cpu']:.0f} + {large['cluster_cpu']:.0f}" if "cluster_cpu" in large else "–"
        print(
            f"| {name} | {large['instances']:,} | {large['wall']:.0f} | {large['cpu']:.0f} ({split}) | "
            f"{per * 1e6:.0f} | {per / base:.1f} | {tiny['wall']:.0f} / {tiny['cpu']:.0f} |"
        )
    for name, runs in results.items():
        if "to_submission" in runs["large"]:
            large, tiny = runs["large"], runs["tiny"]
            split = [
                f"{r['launcher_cpu']:.0f} / {r['engine_cpu']:.0f} / {r['cluster_cpu'] - r['engine_cpu']:.0f}"
                for r in (large, tiny)
            ]
            print(
                f"{name}: launcher start → job submitted {large['to_submission']:.0f} s, job ran "
                f"{large['job_seconds']:.0f} s, job end → launcher exit {large['after_job']:.0f} s; CPU s, launcher "
                f"and job server / Flink's JVMs / Python workers and pool: {split[0]} (the tiny job's: {split[1]})"
            )


if __name__ == "__main__":
    main()
