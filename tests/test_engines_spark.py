"""create and extract-wiki on a Spark standalone cluster of two workers (tests/engine_cluster.py) with an external
SDK worker pool: the bytes and the summary of the in-memory run, with an executor on each worker."""

from __future__ import annotations

import pytest

from conftest import SAMPLE_TEXT, VOCAB, run_cli
from engine_cluster import Cluster, assert_same_tree, running_cluster, summary_lines
from wiki_fixtures import ENWIKI_SMALL, build_multistream

pytestmark = [pytest.mark.xdist_group("spark-cluster"), pytest.mark.slow]
LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
WORKER_UIS = ("http://127.0.0.1:8091/json/", "http://127.0.0.1:8092/json/")  # spark_cluster.MASTER_UI_PORT + n


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    with running_cluster("spark", tmp_path_factory.mktemp("spark")) as cluster:
        yield cluster


def executors_per_worker(spark: Cluster) -> list[int]:
    counts = []
    for ui in WORKER_UIS:
        status = spark.get(ui)
        counts.append(len(status.get("executors", [])) + len(status.get("finishedexecutors", [])))
    return counts


def run_on_both(spark: Cluster, capsys, command: str, args: list, tmp_path) -> None:
    local, remote = tmp_path / "local", tmp_path / "spark"
    assert run_cli(command, *args, "--output", local, *LOCAL) == 0
    local_summary = summary_lines(capsys.readouterr().out, local)
    before = executors_per_worker(spark)
    done = spark.run(command, *args, "--output", remote)
    assert done.returncode == 0, done.stderr[-3000:]
    assert summary_lines(done.stdout, remote) == local_summary
    assert_same_tree(remote, local)
    assert all(after > was for after, was in zip(executors_per_worker(spark), before))  # an executor on each


def test_create_on_spark(spark, capsys, tmp_path):
    run_on_both(spark, capsys, "create", ["--input", SAMPLE_TEXT, "--vocab", VOCAB], tmp_path)


def test_extract_wiki_byte_ranges_on_spark(spark, capsys, tmp_path):
    dump, index = build_multistream(ENWIKI_SMALL, tmp_path, pages_per_stream=1)
    args = ["--input", dump, "--index", index, "--range-mb", "0.005", "--num-shards", "2"]
    run_on_both(spark, capsys, "extract-wiki", args, tmp_path)
