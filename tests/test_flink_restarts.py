"""A Flink job's restarts in its summary, read from Flink's REST API (here a stand-in on the loopback that answers as
Flink 1.19 does), and heartbeat settings under which a busy host's TaskManagers are not taken for lost while a
killed one still is within seconds. The runs on a real cluster are in tests/test_engines_flink.py and
tests/test_engine_faults.py."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from bertcorpus.pipeline.engines.flink_cluster import FlinkSettings, flink_configuration
from bertcorpus.pipeline.engines.flink_restarts import FlinkRestarts, restarts_value

HEARTBEAT_TIMEOUT = (
    "java.util.concurrent.TimeoutException: Heartbeat of TaskManager with id 127.0.0.1:40125-4a5c1d timed out.\n"
    "\tat org.apache.flink.runtime.jobmaster.JobMaster$TaskManagerHeartbeatListener.notifyHeartbeatTimeout("
    "JobMaster.java:1427)\n"
)
LOST = (
    "org.apache.flink.runtime.jobmaster.JobMasterException: TaskManager with id 127.0.0.1:40125-4a5c1d is no longer "
    "reachable.\n\tat org.apache.flink.runtime.jobmaster.JobMaster.disconnectTaskManager(JobMaster.java:520)\n"
)


def failure(stacktrace: str, timestamp: int) -> dict:
    """An entry of Flink 1.19's exception history, as GET /jobs/<id>/exceptions gives it."""
    return {
        "exceptionName": stacktrace.split(":", 1)[0],
        "stacktrace": stacktrace,
        "timestamp": timestamp,
        "taskName": None,
        "location": None,
        "endpoint": None,
        "taskManagerId": None,
        "failureLabels": {},
        "concurrentExceptions": [],
    }


def exceptions_reply(*entries: dict, truncated: bool = False) -> dict:
    return {
        "root-exception": entries[0]["stacktrace"] if entries else None,
        "timestamp": entries[0]["timestamp"] if entries else None,
        "all-exceptions": [],
        "truncated": False,
        "exceptionHistory": {"entries": list(entries), "truncated": truncated},
    }


def test_the_restarts_and_the_first_cause_are_the_summarys_value():
    assert restarts_value(exceptions_reply()) == "0"
    # Newest first, as Flink lists them: the first failure is the oldest.
    reply = exceptions_reply(failure(LOST, 1_700_000_090_000), failure(HEARTBEAT_TIMEOUT, 1_700_000_000_000))
    assert restarts_value(reply) == (
        "2 (the first: TimeoutException: Heartbeat of TaskManager with id 127.0.0.1:40125-4a5c1d timed out.)"
    )
    entries = [failure(LOST, 1_700_000_000_000 + n) for n in range(16)]
    assert restarts_value(exceptions_reply(*entries, truncated=True)).startswith(
        "16+ (the first: JobMasterException: TaskManager with id 127.0.0.1:40125-4a5c1d is no longer reachable.)"
    )


class FlinkRest(http.server.BaseHTTPRequestHandler):
    """GET /jobs/overview and /jobs/<id>/exceptions from the replies in `self.server.replies`."""

    def do_GET(self):
        reply = self.server.replies.get(self.path)
        body = json.dumps(reply if reply is not None else {"errors": ["Not found: " + self.path]}).encode()
        self.send_response(200 if reply is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def flink_rest():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FlinkRest)
    server.replies = {}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def overview(*jids: str) -> dict:
    return {"jobs": [{"jid": jid, "name": f"BeamApp-root-{jid}", "state": "FINISHED"} for jid in jids]}


def options(master: str) -> PipelineOptions:
    return PipelineOptions(["--runner", "FlinkRunner", "--flink_master", master])


def test_the_job_that_came_during_the_run_is_the_one_counted(flink_rest):
    master = f"127.0.0.1:{flink_rest.server_port}"
    flink_rest.replies["/jobs/overview"] = overview("aa11")
    restarts = FlinkRestarts.watching(options(master))
    flink_rest.replies["/jobs/overview"] = overview("aa11", "bb22")
    flink_rest.replies["/jobs/bb22/exceptions"] = exceptions_reply(failure(HEARTBEAT_TIMEOUT, 1_700_000_000_000))
    flink_rest.replies["/jobs/aa11/exceptions"] = exceptions_reply()
    assert restarts.rows() == [
        (
            "runner restarts",
            "1 (the first: TimeoutException: Heartbeat of TaskManager with id 127.0.0.1:40125-4a5c1d timed out.)",
        )
    ]
    flink_rest.replies["/jobs/overview"] = overview("aa11", "bb22", "cc33")
    assert restarts.rows() == [("runner restarts", "unknown: 2 jobs came to the cluster during the run, not one")]


def test_no_answer_is_said_in_the_row_and_only_flink_clusters_are_asked(flink_rest):
    port = flink_rest.server_port
    flink_rest.server_close()  # nothing listens there now
    (row,) = FlinkRestarts.watching(options(f"127.0.0.1:{port}")).rows()
    assert row[0] == "runner restarts" and row[1].startswith(f"unknown: Flink's REST API at http://127.0.0.1:{port}")
    assert FlinkRestarts.watching(options("[auto]")) is None  # Beam's embedded Flink: gone with the run
    assert FlinkRestarts.watching(PipelineOptions(["--runner", "SparkRunner"])) is None


def test_a_busy_host_keeps_its_task_managers_and_a_killed_one_is_found_in_seconds(tmp_path):
    home = tmp_path / "flink"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "config.yaml").write_text("env:\n  java:\n    opts:\n      all: -Dx=1\n")
    config = flink_configuration(Path(home), FlinkSettings(), tmp_path / "state")
    # Unanswered heartbeats: a TaskManager that a load of 30 on 2 cores delayed past 10 s was taken for lost.
    assert config["heartbeat.timeout"] >= 60_000
    # Heartbeats that cannot reach a TaskManager at all (its process is gone): lost after interval × threshold.
    assert config["heartbeat.interval"] * config["heartbeat.rpc-failure-threshold"] <= 5_000
