"""How often a job restarted on a Flink cluster, for the job's summary.

A restart is silent: a job that lost a TaskManager (or whose TaskManager a busy host kept from answering its
heartbeats) restarts from its start and still finishes with the same bytes, only later. So the summary of a run on
Flink says how often it restarted, and why the first time: Flink's REST API keeps each failure that restarted the
job in its exception history (GET /jobs/<id>/exceptions), also after the job finished. The job is the one that
appeared in GET /jobs/overview while the command ran.
"""

from __future__ import annotations

import re

from bertcorpus.pipeline.engines.daemons import http_json

REST_SECONDS = 5.0
ROW = "runner restarts"
_FIRST_LINE_CAUSE = re.compile(r"^(?:[a-z_$][\w$]*\.)*([A-Z][\w$]*): ?(.*)$")
_CAUSE_CHARACTERS = 200


def job_ids(overview: dict) -> set[str]:
    """The ids of the jobs in a GET /jobs/overview reply."""
    return {job["jid"] for job in overview.get("jobs") or []}


def failure_cause(entry: dict) -> str:
    """One failure of an exception history: its exception's short name and message, from the stack trace's first
    line (`TimeoutException: Heartbeat of TaskManager with id ... timed out.`)."""
    first = (entry.get("stacktrace") or entry.get("exceptionName") or "").strip().splitlines()
    found = _FIRST_LINE_CAUSE.match(first[0]) if first else None
    cause = f"{found.group(1)}: {found.group(2)}".rstrip(": ") if found else (first[0] if first else "no cause given")
    return cause if len(cause) <= _CAUSE_CHARACTERS else cause[:_CAUSE_CHARACTERS] + "..."


def restarts_value(exceptions: dict) -> str:
    """The summary's value from a GET /jobs/<id>/exceptions reply of a job that finished: every failure in its
    history restarted it. Flink keeps the latest 16 by default (web.exception-history-size): "16+" past that."""
    history = exceptions.get("exceptionHistory") or {}
    entries = history.get("entries") or []
    if not entries:
        return "0"
    count = f"{len(entries)}{'+' if history.get('truncated') else ''}"
    oldest = min(entries, key=lambda entry: entry.get("timestamp") or 0)
    return f"{count} (the first: {failure_cause(oldest)})"


class FlinkRestarts:
    """The jobs a Flink cluster listed before a submission; after the run, the summary row of the job it made."""

    def __init__(self, url: str, before: set[str] | None):
        self.url, self.before = url, before

    @staticmethod
    def watching(options) -> FlinkRestarts | None:
        """Before a submission: None unless it goes to a Flink cluster (not one Beam embeds in the launcher)."""
        from bertcorpus.pipeline.engines.engine_checks import FLINK_LOCAL_MASTERS, runner_name

        master = options.get_all_options().get("flink_master") or "[auto]"
        if runner_name(options) != "FlinkRunner" or master in FLINK_LOCAL_MASTERS:
            return None
        url = (master if re.match(r"^https?://", master) else f"http://{master}").rstrip("/")
        try:
            before = job_ids(http_json(f"{url}/jobs/overview", timeout=REST_SECONDS))
        except (OSError, KeyError, TypeError):
            before = None  # said in the row
        return FlinkRestarts(url, before)

    def rows(self) -> list[tuple[str, str]]:
        try:
            if self.before is None:
                raise OSError("no job list before the run")
            new = sorted(job_ids(http_json(f"{self.url}/jobs/overview", timeout=REST_SECONDS)) - self.before)
            if len(new) != 1:
                return [(ROW, f"unknown: {len(new)} jobs came to the cluster during the run, not one")]
            exceptions = http_json(f"{self.url}/jobs/{new[0]}/exceptions", timeout=REST_SECONDS)
            return [(ROW, restarts_value(exceptions))]
        except (OSError, KeyError, TypeError, AttributeError) as e:
            return [(ROW, f"unknown: Flink's REST API at {self.url} did not say ({e})")]
