"""`bertcorpus plan`: a run sized and priced before it runs, from the same words as the job. On the bundled samples
its numbers are sane and the same every time; its buckets and shards are the ones the job decides; --json has its
schema; a dry run on Dataflow ends with the plan; bad flags get one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import DATAFLOW_OFFLINE, SAMPLE_TEXT, VOCAB, exit_status, run_cli

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
DUMP = DATA / "wiki" / "enwiki-2014-sample-truncated.xml.bz2"
CHAIN = ["chain", "--wiki", DUMP, "--books", DATA / "books", "--dedup", "--seq-configs", "128:20,512:80"]
DATAFLOW = DATAFLOW_OFFLINE


def planned(capsys, *words) -> dict:
    assert run_cli("plan", *words, "--json") == 0
    return json.loads(capsys.readouterr().out)


def test_the_chain_on_the_bundled_samples_is_planned_stage_by_stage_the_same_each_time(capsys):
    plan = planned(capsys, *CHAIN)
    assert [s["name"] for s in plan["stages"]] == ["extract-wiki", "extract-books", "dedup", "vocab", "create"]
    assert plan == planned(capsys, *CHAIN)
    for stage in plan["stages"]:
        assert stage["cpu_seconds"] > 0 and stage["output_bytes"] > 0, stage
        assert 100e6 < stage["peak_memory_bytes"] < 4e9, stage
    wiki, books, _, _, create = plan["stages"]
    assert wiki["input_files"] == 1 and wiki["input_bytes"] == DUMP.stat().st_size
    assert books["input_files"] == 8 and books["documents"] == 8
    # The sample's text at dupe factor 10: some hundred thousand instances at 128, fewer at 512.
    seq128, seq512 = (sum(create["instances"][name].values()) for name in ("seq128", "seq512"))
    assert 50_000 < seq128 < 500_000 and seq512 < seq128
    assert plan["cpu_seconds"] == pytest.approx(sum(s["cpu_seconds"] for s in plan["stages"]), abs=0.5)
    assert plan["cost"]["usd"] == 0  # this machine bills nothing


def test_the_json_has_a_stage_list_with_cpu_memory_and_output(capsys):
    plan = planned(capsys, "create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", "out")
    [stage] = plan["stages"]
    assert {"name", "cpu_seconds", "peak_memory_bytes", "output_bytes", "shuffle_bytes", "documents"} <= set(stage)
    assert stage["name"] == "create"
    assert isinstance(stage["cpu_seconds"], float) and isinstance(stage["peak_memory_bytes"], int)
    assert isinstance(stage["output_bytes"], int) and stage["output_bytes"] > 0
    assert plan["inputs"] == {"files": 1, "bytes": SAMPLE_TEXT.stat().st_size, "listed": [[str(SAMPLE_TEXT), 4394]]}


def test_buckets_and_shards_are_those_the_job_decides(tmp_path, capsys):
    words = ["create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", tmp_path / "out", "--num-shards", "3"]
    [stage] = planned(capsys, *words)["stages"]
    assert run_cli(*words) == 0
    config = json.loads((tmp_path / "out" / "manifest.json").read_text())["config"]
    eval_shards = 1 if config["eval_fraction"] else 0
    assert stage["shards"] == config["num_shards"] + eval_shards and stage["buckets"] >= config["num_buckets"]


def test_dataflow_workers_give_wall_time_and_a_cost_at_the_prices_given(capsys):
    words = [*CHAIN, *DATAFLOW, "--machine_type", "n2-standard-8", "--max_num_workers", "16"]
    plan = planned(capsys, *words)
    assert plan["workers"] == {
        "engine": "dataflow",
        "count": 16,
        "vcpus": 8,
        "memory_gb": 32.0,
        "machine": "n2-standard-8",
    }
    cost = plan["cost"]
    assert cost["usd"] > 0 and cost["prices"]["source"].startswith("Dataflow batch list prices")
    assert cost["vcpu_hours"] == pytest.approx(16 * 8 * plan["wall_seconds"] / 3600, rel=0.01)
    doubled = planned(capsys, *words, "--price-vcpu-hour", str(2 * cost["prices"]["vcpu_hour"]))["cost"]
    assert doubled["usd"] == pytest.approx(cost["usd"] + cost["vcpu_hours"] * cost["prices"]["vcpu_hour"], rel=0.01)
    # Twice the workers: on so small an input the workers' start is all the wall time, so twice the bill.
    more = planned(capsys, *words, "--workers", "32")
    assert more["workers"]["count"] == 32 and more["wall_seconds"] <= plan["wall_seconds"]
    assert more["cost"]["vcpu_hours"] == pytest.approx(2 * cost["vcpu_hours"], rel=0.01)


def test_the_table_names_the_inputs_stages_wall_time_and_cost(capsys):
    assert run_cli("plan", *CHAIN, *DATAFLOW, "--machine_type", "n2-standard-8", "--max_num_workers", "4") == 0
    printed = capsys.readouterr().out
    assert printed.startswith("plan: extract-wiki → extract-books → dedup → vocab → create, dataflow, 4 workers")
    assert "inputs: 9 files" in printed and "enwiki-2014-sample-truncated.xml.bz2" in printed
    assert "\nwall time ≈ " in printed and "\ncost ≈ $" in printed and "CPU-s per MB of ordinary text" in printed


def test_a_named_job_is_planned_with_its_profile(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the jobs file is ./beam_jobs.yaml
    plan = planned(capsys, "run", "sample", "--profile", "local-in-memory")
    assert plan["plan"] == "sample (create, profile local-in-memory)"
    assert plan["stages"][0]["input_bytes"] == SAMPLE_TEXT.stat().st_size


def test_a_dataflow_dry_run_ends_with_the_plan_of_what_it_can_list(capsys):
    words = ["create", "--input", SAMPLE_TEXT, "gs://some-bucket/docs/*.parquet", "--vocab", VOCAB]
    assert run_cli(*words, "--output", "gs://some-bucket/out", *DATAFLOW, "--dry_run=True") == 0
    printed = capsys.readouterr().out
    validated = printed.index("nothing ran and nothing was written")
    assert printed.index("plan: create, dataflow, 1 workers") > validated
    assert "inputs: 1 file, 4.39 kB" in printed
    assert "gs://some-bucket/docs/*.parquet: not listed (a dry run works offline" in printed


def test_a_dry_run_says_its_note_of_the_paths_left_out_once(tmp_path, capsys):
    folder = tmp_path / "dumps"
    (folder / "old").mkdir(parents=True)
    (folder / "new").mkdir()
    (folder / DUMP.name).write_bytes(DUMP.read_bytes())
    assert run_cli("extract-wiki", "--input", folder, "--output", tmp_path / "out", "--dry_run=True") == 0
    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if line.startswith("note: left out 2 folders")]
    assert len(notes) == 1, captured.err
    assert "plan: extract-wiki, this machine" in captured.out and f"{DUMP.name}  " in captured.out


def test_local_worker_processes_share_this_machines_cores(capsys):
    words = ["create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", "out"]
    cores = os.cpu_count()
    for workers in (cores, 1_000_000_000):
        plan = planned(capsys, "--workers", str(workers), *words)
        # More processes than cores run no faster; each one's start is CPU too.
        assert plan["wall_seconds"] == pytest.approx(plan["cpu_seconds"] / cores, abs=0.1), plan
    assert plan["cpu_seconds"] > 1_000_000_000  # a billion processes started
    assert run_cli("plan", "--workers", "1000000000", *words) == 0
    printed = capsys.readouterr().out
    assert "this machine, 1,000,000,000 worker processes" in printed and "e+" not in printed


def test_sizes_and_times_near_a_unit_are_written_in_the_next_one(tmp_path, capsys):
    text = (DATA / "books" / "gutenberg_utf8" / "1661-0.txt").read_bytes()
    near = tmp_path / "near-a-megabyte.txt"
    near.write_bytes((text * (999_957 // len(text) + 1))[:999_957])
    assert run_cli("plan", "create", "--input", near, "--vocab", VOCAB, "--output", tmp_path / "out") == 0
    printed = capsys.readouterr().out
    assert "inputs: 1 file, 1 MB as stored" in printed and f"{near.name}  1 MB" in printed, printed
    assert "e+" not in printed


SAMPLE_CREATE = ["create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", "o"]


@pytest.mark.parametrize(
    "words, message",
    [
        (["nosuchjob"], "argument JOB: invalid choice: 'nosuchjob'"),
        ([*SAMPLE_CREATE, "--dupe-factr", "3"], "--dupe-factr"),
        ([*SAMPLE_CREATE, "--workers", "0"], "--workers"),
        ([*SAMPLE_CREATE, "--price-vcpu-hour", "-1"], "--price-vcpu-hour: must be 0 or more"),
        (["create", "--input", "no-such-file.txt", "--vocab", VOCAB, "--output", "o"], "no input files match"),
        (["chain", "--dedup"], "give --wiki dumps, --books, or both"),
        (["run", "no-such-job"], "unknown job 'no-such-job'"),
        (
            [*SAMPLE_CREATE, "--runner", "DataflowRunner", "--machine_type", "custom-6-20480"],
            "--machine_type custom-6-20480: not a machine type the plan knows",
        ),
    ],
)
def test_bad_flags_get_one_line(capsys, monkeypatch, words, message):
    monkeypatch.chdir(ROOT)
    code = exit_status("plan", *words)
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
