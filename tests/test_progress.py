"""Progress while a long job runs: a local Beam run's line (read, written, stage), fed by the counts of every process
that works on it; plain lines in a log, one redrawn line on a terminal; the time of each stage in the summary; a
Dataflow job's id and console page as soon as it is submitted.

The interval between plain lines is 30 s, which a user may change with BERTCORPUS_PROGRESS_INTERVAL; the tests lower
it rather than run a job for minutes (conftest.py raises it for every other test)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading

from apache_beam.options.pipeline_options import PipelineOptions

from bertcorpus.pipeline.engines.live_counts import ENV, LiveCounts
from bertcorpus.pipeline.engines.run_and_wait import dataflow_job
from bertcorpus.pipeline.engines.run_progress import (
    ProgressPlan,
    RunProgress,
    busiest,
    progress_line,
    short_stage,
    stage_time_rows,
)

from conftest import BOOKS, SAMPLE_TEXT, TESTS, VOCAB

LINE = re.compile(
    r"^create: \d+:\d\d read [\d.,]+ (kB|MB) of (?P<total>[\d.,]+ (kB|MB)) \(\d+%\), [\d,]+ documents; "
    r"wrote [\d,]+ instances(; at .+)?$"
)


def test_a_piped_create_prints_progress_lines_from_its_worker_processes_before_it_finishes(tmp_path):
    """A log gets plain lines (no carriage returns), the first after one interval: here lowered from 30 s."""
    inputs = [SAMPLE_TEXT, *BOOKS]
    done = subprocess.run(
        [sys.executable, "-m", "bertcorpus", "create", "--input", *inputs, "--vocab", VOCAB]
        + ["--output", tmp_path / "out", "--dupe-factor", "1", "--eval-fraction", "0"]
        + ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"],
        cwd=TESTS.parent,
        env={**os.environ, "BERTCORPUS_PROGRESS_INTERVAL": "0.2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream, in the order the lines were written
        timeout=600,
    )
    text = done.stdout.decode()
    assert done.returncode == 0, text[-3000:]
    assert "\r" not in text
    lines = text.splitlines()
    finished = next(i for i, line in enumerate(lines) if line.startswith("create: finished in "))
    progress = [LINE.match(line) for line in lines[:finished] if line.startswith("create: ") and " read " in line]
    assert progress and all(progress), lines[:finished]
    total = sum(os.path.getsize(p) for p in inputs)
    assert {m.group("total") for m in progress} == {f"{total / 1e3:,.1f} kB"}
    assert not any(line.startswith("create: ") and " read " in line for line in lines[finished:])
    # The summary gives the time of each stage, named by the job's steps in it.
    times = [line.split() for line in lines[finished:] if line.startswith("  time in ")]
    assert any(words[2:4] == ["tokenize", "buckets"] for words in times), lines[finished:]
    assert all(words[-1] == "s" and float(words[-2]) >= 0 for words in times)


def test_the_launcher_sums_the_counts_that_every_process_of_the_run_wrote(tmp_path):
    """What a worker process counts reaches the launcher through the run's directory, also when it ends before its
    next regular write; a process outside the run keeps nothing."""
    script = "from bertcorpus.pipeline import tally; tally.progress('bytes_read', 5); tally.progress('bytes_read', 2)"
    with LiveCounts(str(tmp_path / "counts")) as counts:
        assert os.environ[ENV] == str(tmp_path / "counts")
        for _ in range(2):
            subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
        assert counts.totals() == {"progress/bytes_read": 14}
    assert ENV not in os.environ
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert LiveCounts(str(tmp_path / "counts")).totals() == {"progress/bytes_read": 14}


def test_the_line_says_what_was_read_and_written_and_where_the_run_is():
    plan = ProgressPlan(40_000_000, ("create/documents_read", "documents"), ("progress/instances_written", "instances"))
    totals = {"progress/bytes_read": 12_345_678, "create/documents_read": 1234, "progress/instances_written": 45_678}
    assert progress_line("create", plan, totals, "tokenize buckets", 62.4) == (
        "create: 1:02 read 12.3 MB of 40.0 MB (31%), 1,234 documents; wrote 45,678 instances; at tokenize buckets"
    )
    # Before any count came, and past an hour; a reader's last line past its span is not more than all of it.
    assert progress_line("x", ProgressPlan(1000), {}, None, 3725) == "x: 1:02:05 read 0.0 kB of 1.0 kB (0%)"
    assert progress_line("x", ProgressPlan(1000), {"progress/bytes_read": 1010}, None, 1).endswith("(100%)")


def test_a_stage_is_named_by_the_steps_that_work_in_it():
    readable = (
        "create pretraining data/group into buckets + create pretraining data/tokenize buckets + Write"
        " + create pretraining data/gather the outcome"
    )
    movers = {"create pretraining data/group into buckets", "create pretraining data/gather the outcome"}
    assert short_stage(readable, movers) == "tokenize buckets"
    assert short_stage("create pretraining data/group into buckets + Write", movers) == "group into buckets"
    assert short_stage("Write", movers) == "Write"
    # The progress line names two at most; the summary those that worked most, as Beam measured them; each
    # counts the rest.
    read = "x/drop duplicate files + x/read pages + x/publish + x/clean text + x/write documents"
    assert short_stage(read, set(), most=2) == "drop duplicate files + read pages + 3 more"
    worked = {"x/read pages": 9.0, "x/clean text": 4.0, "x/publish": 0.1, "x/drop duplicate files": 0.2}
    assert busiest(read, set(), worked) == "read pages + clean text"
    assert busiest(read, set(), {}) == "drop duplicate files + read pages + 3 more"


def test_a_stage_of_long_step_names_gets_a_short_label():
    """Three of dedup's steps merged into one stage once made a summary row of a hundred columns."""
    merged = " + ".join(
        f"dedup/{step}"
        for step in ("merge twins and measured pairs", "shingles of paired documents", "merge twins and edges")
    )
    assert busiest(merged, set(), {}) == "merge twins and measured pairs + 2 more"
    rows = stage_time_rows([(busiest(merged, set(), {}), 4.0), ("publish", 1.0)])
    assert rows[0] == ("time in merge twins and measured pairs + 2 more", "4.0 s")
    assert max(len(label) for label, _ in rows) <= len("time in ") + 40


def test_the_summary_rows_give_each_stage_its_time_and_the_small_ones_together():
    times = [("read documents", 2.0), ("tokenize buckets", 90.0), ("list buckets", 0.5), ("read documents", 1.0)]
    times += [("publish", 0.4), ("write shards", 6.0)]
    assert stage_time_rows(times) == [
        ("time in read documents", "3.0 s"),
        ("time in tokenize buckets", "90.0 s"),
        ("time in write shards", "6.0 s"),
        ("time in 2 other stages", "0.9 s"),
    ]


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_one_line_redrawn_in_place_and_cleared_at_the_end(tmp_path):
    terminal, drawn = Terminal(), threading.Event()

    def stage():
        drawn.set()  # asked for at every redraw
        return "read documents"

    plan = ProgressPlan(2_000_000, ("create/documents_read", "documents"))
    with LiveCounts(str(tmp_path)) as counts:
        (tmp_path / "1.json").write_text('{"progress/bytes_read": 1000000, "create/documents_read": 7}')
        with RunProgress("create", plan, counts, stage, terminal):
            assert drawn.wait(60)
    shown = terminal.getvalue()
    assert shown.startswith("\r") and shown.endswith("\r\x1b[K") and "\n" not in shown
    assert "read 1.0 MB of 2.0 MB (50%), 7 documents; at read documents\x1b[K" in shown


def test_a_dataflow_job_is_named_with_its_console_page_as_soon_as_it_is_submitted():
    from apache_beam.runners.dataflow.dataflow_runner import DataflowPipelineResult
    from google.cloud import dataflow

    submitted = DataflowPipelineResult(dataflow.Job(id="2026-05-01_01_02_03-1234"), runner=None)
    options = PipelineOptions(["--runner", "DataflowRunner", "--project", "proj", "--region", "europe-west4"])
    assert dataflow_job(submitted, options) == (
        "Dataflow job 2026-05-01_01_02_03-1234: https://console.cloud.google.com/dataflow/jobs/europe-west4/"
        "2026-05-01_01_02_03-1234?project=proj"
    )
    assert dataflow_job(submitted, PipelineOptions(["--runner", "DirectRunner"])) is None


def test_each_input_byte_is_counted_once_however_often_it_is_read(tmp_path, monkeypatch):
    """Two JSONL lines of 1.8 MB each (whole books, the second a near copy of the first) cross several of the
    readers' 1 MiB byte spans: every reader of a span inside one reads back to its start and on to its end, and
    dedup reads the documents of a candidate pair a second time. None of it is progress: the bytes read add up to
    the input's size, in create and in dedup alike."""
    from bertcorpus.pipeline import tally

    from conftest import DATA, run_cli

    books = [BOOKS[0], BOOKS[1], DATA / "books_more" / "2701-0.txt"]
    whole = "\n\n".join(path.read_text(encoding="utf-8") for path in books)
    short = [p for p in (DATA / "books_more" / "1342-0.txt").read_text(encoding="utf-8").split("\n\n") if p.strip()]
    rows = [{"id": f"short-{n}", "text": p} for n, p in enumerate(short)]
    rows[len(rows) // 3 : len(rows) // 3] = [{"id": "whole", "text": whole}]
    rows[2 * len(rows) // 3 : 2 * len(rows) // 3] = [{"id": "copy", "text": whole.replace(" the ", " a ", 20)}]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert corpus.stat().st_size > 4 * len(whole.encode()) / 2

    counted = []
    monkeypatch.setattr(tally, "progress", lambda name, n: counted.append(n) if name == "bytes_read" else None)
    assert run_cli("dedup", "--input", corpus, "--output", tmp_path / "dedup") == 0
    assert json.loads((tmp_path / "dedup" / "manifest.json").read_text())["duplicates"]["pairs_measured"] >= 1
    assert sum(counted) == corpus.stat().st_size
    counted.clear()
    create = ["--vocab", VOCAB, "--output", tmp_path / "create", "--dupe-factor", "1", "--pair-objective", "none"]
    assert run_cli("create", "--input", corpus, *create) == 0
    assert sum(counted) == corpus.stat().st_size
