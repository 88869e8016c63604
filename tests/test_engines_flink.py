"""Every job on a Flink session cluster of two TaskManagers (tests/engine_cluster.py), with parallelism 2 and an
external SDK worker pool: the bytes, the summary and the manifest's counts of the in-memory run, and the work
spread over both TaskManagers (Flink's REST API) and over several SDK worker processes (the pool's log).

One cluster serves the module; its tests run in one xdist worker (the group below). Each job is the smallest real
input of its kind, so that the cost is mostly Flink's own per-job start-up (docs/engines.md).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import DATA, SAMPLE_TEXT, VOCAB, run_cli
from engine_cluster import Cluster, assert_same_tree, flink_jar, running_cluster, summary_lines
from wiki_fixtures import ENWIKI_SMALL, build_multistream, write_language_articles

pytestmark = pytest.mark.xdist_group("flink-cluster")
LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
BOOKS = DATA / "books" / "pg19_format"
CREATE = ["--input", SAMPLE_TEXT, "--vocab", VOCAB]


@pytest.fixture(scope="module")
def flink(tmp_path_factory):
    """A Flink session cluster of two TaskManagers and an SDK worker pool, in a network namespace of its own,
    stopped once the module's tests are done; skipped with the reason where Java, Maven, the downloads or root are
    missing."""
    with running_cluster("flink", tmp_path_factory.mktemp("flink")) as cluster:
        yield cluster


def flink_job_ids(flink: Cluster) -> set[str]:
    return {job["jid"] for job in flink.get("http://127.0.0.1:8081/jobs/overview")["jobs"]}


def task_managers_used(flink: Cluster, jid: str) -> dict[str, int]:
    """Subtasks per TaskManager over every vertex of the job, from Flink's REST API."""
    vertices = flink.get(f"http://127.0.0.1:8081/jobs/{jid}")["vertices"]
    used: dict[str, int] = {}
    for listing in flink.get_all(
        [f"http://127.0.0.1:8081/jobs/{jid}/vertices/{v['id']}/taskmanagers" for v in vertices]
    ):
        for manager in listing["taskmanagers"]:
            used[manager["taskmanager-id"]] = used.get(manager["taskmanager-id"], 0) + 1
    return used


def worker_pids(flink: Cluster) -> list[str]:
    return re.findall(r"started worker \S+ pid (\d+)", flink.pool_log())


def run_on_both(flink: Cluster, capsys, command: str, args: list, local: Path, remote: Path) -> None:
    """The job in memory into local, then on the cluster into remote: same bytes, same summary, and the cluster's
    run spread over both TaskManagers and at least two SDK worker processes."""
    assert run_cli(command, *args, "--output", local, *LOCAL) == 0
    local_summary = summary_lines(capsys.readouterr().out, local)
    jobs_before, workers_before = flink_job_ids(flink), len(worker_pids(flink))
    done = flink.run(command, *args, "--output", remote)
    assert done.returncode == 0, done.stderr[-3000:]
    assert summary_lines(done.stdout, remote) == local_summary
    assert re.search(r"^\s+runner restarts\s+\d+", done.stdout, re.M), done.stdout  # how often Flink restarted it
    assert_same_tree(remote, local)
    (jid,) = flink_job_ids(flink) - jobs_before
    used = task_managers_used(flink, jid)
    assert len(used) == 2 and min(used.values()) > 0, used
    assert len(set(worker_pids(flink)[workers_before:])) >= 2


def test_create_static_on_flink(flink, capsys, tmp_path):
    run_on_both(flink, capsys, "create", CREATE, tmp_path / "local", tmp_path / "flink")


def test_create_dynamic_sop_binned_on_flink(flink, capsys, tmp_path):
    args = [*CREATE, "--masking", "dynamic", "--pair-objective", "sop", "--bin-size", "64"]
    run_on_both(flink, capsys, "create", args, tmp_path / "local", tmp_path / "flink")


def test_create_languages_sampled_with_whole_words_on_flink(flink, capsys, tmp_path):
    """Five Wikipedias' articles mixed at smoothed shares, with whole-word masks from the segmenter on the workers."""
    corpus = write_language_articles(tmp_path / "articles.jsonl")
    args = ["--input", corpus, "--vocab", VOCAB, "--masking", "dynamic", "--whole-word-mask"]
    args += ["--language-sampling-alpha", "0.7", "--eval-fraction", "0.1"]
    run_on_both(flink, capsys, "create", args, tmp_path / "local", tmp_path / "flink")


def test_create_megatron_files_by_language_on_flink(flink, capsys, tmp_path):
    """Megatron's indexed datasets, a file per language merged from the buckets' parts on the workers."""
    corpus = write_language_articles(tmp_path / "articles.jsonl")
    args = ["--input", corpus, "--vocab", VOCAB, "--record-format", "megatron", "--language-sampling-alpha", "0.3"]
    run_on_both(flink, capsys, "create", args, tmp_path / "local", tmp_path / "flink")


def test_extract_wiki_byte_ranges_on_flink(flink, capsys, tmp_path):
    dump, index = build_multistream(ENWIKI_SMALL, tmp_path, pages_per_stream=1)
    args = ["--input", dump, "--index", index, "--range-mb", "0.005", "--num-shards", "2"]
    run_on_both(flink, capsys, "extract-wiki", args, tmp_path / "local", tmp_path / "flink")


def test_extract_books_on_flink(flink, capsys, tmp_path):
    args = ["--input", BOOKS, "--num-shards", "2"]
    run_on_both(flink, capsys, "extract-books", args, tmp_path / "local", tmp_path / "flink")


def test_vocab_counted_on_flink(flink, capsys, tmp_path):
    args = ["--input", BOOKS, "--vocab-size", "2000", "--count-with-beam"]
    local, remote = tmp_path / "local", tmp_path / "flink"
    assert run_cli("vocab", *args, "--counts-dir", local / "counts", "--output", local / "vocab.txt", *LOCAL) == 0
    local_summary = summary_lines(capsys.readouterr().out, local)
    jobs_before = flink_job_ids(flink)
    done = flink.run("vocab", *args, "--counts-dir", remote / "counts", "--output", remote / "vocab.txt")
    assert done.returncode == 0, done.stderr[-3000:]
    assert summary_lines(done.stdout, remote) == local_summary
    assert_same_tree(remote, local, ignore=("counts",))  # the word counts' shards are the engine's own
    (jid,) = flink_job_ids(flink) - jobs_before
    assert len(task_managers_used(flink, jid)) == 2


@pytest.mark.slow  # one more job of a minute: in .ci/run's slow step, with a cluster of its own
def test_dedup_with_decontamination_on_flink(flink, capsys, books_jsonl, tmp_path):
    """Two sources (the books, and a revision of them with case and word edits, so near copies) and a SQuAD file
    holding one of their paragraphs: the workers read them again for the candidate pairs and the n-gram index."""
    books = [json.loads(line) for line in books_jsonl.open()]
    revision = tmp_path / "revision.jsonl"
    with revision.open("w") as f:
        for i, doc in enumerate(books):
            paragraphs = doc["text"].split("\n\n")
            if i % 2:
                paragraphs[0] = paragraphs[0].swapcase()
            paragraphs = [" ".join(["also", *p.split(" ")[1:]]) if n % 6 == 0 else p for n, p in enumerate(paragraphs)]
            f.write(json.dumps({"id": doc["id"], "text": "\n\n".join(paragraphs)}) + "\n")
    context = next(p for p in books[5]["text"].split("\n\n") if len(p.split()) > 40)
    squad = tmp_path / "dev-v2.0.json"
    squad.write_text(
        json.dumps({"data": [{"paragraphs": [{"context": context, "qas": [{"id": "q", "question": "?"}]}]}]})
    )
    args = ["--input", books_jsonl, revision, "--decontaminate", squad, "--num-shards", "2"]
    run_on_both(flink, capsys, "dedup", args, tmp_path / "local", tmp_path / "flink")
    (contaminated,) = (tmp_path / "flink").glob("contaminated-*.jsonl")
    assert contaminated.read_text().strip()  # the SQuAD example the books hold


def with_option(options: list[str], name: str, value) -> list[str]:
    """The options with one flag's value replaced (the cluster prints them as --flag value pairs)."""
    at = options.index(name)
    return [*options[: at + 1], str(value), *options[at + 2 :]]


def refused_on_the_cluster(flink: Cluster, tmp_path: Path, options: list[str]) -> str:
    done = flink.run("create", *CREATE, "--output", tmp_path / "out", options=options, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert not (tmp_path / "out").exists()
    return done.stderr.strip()


def test_a_cluster_of_another_flink_version_is_refused(flink, tmp_path):
    options = with_option(flink.options, "--flink_version", "1.20")
    options = with_option(options, "--flink_job_server_jar", flink_jar(tmp_path, "1.20"))
    error = refused_on_the_cluster(flink, tmp_path, options)
    assert "the Flink cluster at 127.0.0.1:8081 runs Flink 1.19.3, but --flink_version is for Flink 1.20" in error


def test_no_worker_pool_at_the_environment_config_is_refused(flink, tmp_path):
    options = with_option(flink.options, "--environment_config", "127.0.0.1:50001")
    error = refused_on_the_cluster(flink, tmp_path, options)
    assert "no SDK worker pool answers at --environment_config 127.0.0.1:50001" in error
