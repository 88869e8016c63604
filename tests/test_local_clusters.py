"""What the local Flink and Spark clusters share (pipeline/engines/daemons.py's LocalCluster), on real processes in
place of the JVMs: the daemons are stopped followers first, and a wait ends in one line naming a daemon that exits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bertcorpus.pipeline.engines import daemons
from bertcorpus.pipeline.engines.flink_cluster import LocalFlink
from bertcorpus.pipeline.engines.spark_cluster import LocalSpark
from bertcorpus.pipeline.errors import UserError


def daemon(tmp_path: Path, name: str, script: str) -> daemons.Daemon:
    return daemons.start(name, ["sh", "-c", script], tmp_path / "log" / f"{name}.out", dict(os.environ))


def flink(tmp_path: Path) -> LocalFlink:
    cluster = LocalFlink(tmp_path, tmp_path)
    cluster.job_manager = daemon(tmp_path, "jobmanager", "sleep 60")
    cluster.task_managers = [daemon(tmp_path, f"taskmanager-{n}", "sleep 60") for n in range(2)]
    return cluster


def spark(tmp_path: Path) -> LocalSpark:
    cluster = LocalSpark(tmp_path, tmp_path)
    cluster.master = daemon(tmp_path, "master", "sleep 60")
    cluster.worker_daemons = [daemon(tmp_path, f"worker-{n}", "sleep 60") for n in range(2)]
    return cluster


@pytest.mark.parametrize("make", [flink, spark])
def test_a_cluster_stops_its_followers_then_its_leader(tmp_path, make):
    cluster = make(tmp_path)
    leader, followers = cluster.leader(), cluster.followers()
    assert cluster.daemons() == [*followers, leader] and len(followers) == 2
    cluster.stop()
    assert not any(d.alive() for d in [leader, *followers])


@pytest.mark.parametrize("make", [flink, spark])
def test_a_wait_ends_in_one_line_naming_the_daemon_that_exited(tmp_path, make):
    cluster = make(tmp_path)
    try:
        cluster.followers().append(daemon(tmp_path, "follower 3", "echo 'ERROR: no memory for the heap'; exit 3"))
        with pytest.raises(UserError) as refused:
            cluster.wait_for(lambda: False, "3 followers registered")
        assert str(refused.value) == (
            f"follower 3 exited (status 3) before 3 followers registered; {tmp_path / 'log' / 'follower 3.out'}: "
            "ERROR: no memory for the heap"
        )
    finally:
        cluster.stop()
