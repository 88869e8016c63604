"""Named jobs and runner profiles from beam_jobs.yaml: the file found and checked, and a job's command line made from
its entry, a profile and the --set overrides (for `bertcorpus run`, `graph` and `plan run`)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from bertcorpus.pipeline.errors import UserError
from bertcorpus.transforms.local_files import special_file_problem

DEFAULT_FILE = "beam_jobs.yaml"


def load_jobs_file(path: str | None) -> dict:
    # ./beam_jobs.yaml, else the checkout's own (src/bertcorpus/pipeline/cli/ is four folders below it)
    candidates = [path] if path else [DEFAULT_FILE, str(Path(__file__).resolve().parents[4] / DEFAULT_FILE)]
    for candidate in candidates:
        if candidate and os.path.exists(candidate):
            if problem := special_file_problem(candidate, "--jobs-file"):
                raise UserError(problem)
            data = _read_yaml(candidate)
            if (
                not isinstance(data, dict)
                or not isinstance(data.get("jobs"), dict)
                or not isinstance(data.get("profiles"), dict)
            ):
                raise UserError(f"{candidate} needs top-level 'jobs' and 'profiles' mappings")
            return data
    raise UserError(f"no jobs file found (looked for {', '.join(c for c in candidates if c)})")


def _read_yaml(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f) or {}
    except UnicodeDecodeError as e:
        raise UserError(f"{path} is not UTF-8 text (byte {e.start:,})") from None
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        line = f", line {where.line + 1}" if where is not None else ""
        raise UserError(f"{path} is not valid YAML{line}: {getattr(e, 'problem', None) or e}") from None


def _job(spec: dict, name: str) -> dict:
    """The job's entry, checked: a mapping with a command this tool has and, if any, a mapping of args."""
    from bertcorpus.pipeline.cli import commands

    job = spec["jobs"][name]
    if not isinstance(job, dict) or job.get("command") not in commands.job_commands():
        raise UserError(f"job {name!r} in the jobs file needs a 'command', one of {', '.join(commands.job_commands())}")
    if not isinstance(job.get("args") or {}, dict):
        raise UserError(f"job {name!r} in the jobs file: 'args' must be a mapping of flag: value")
    return job


def _kebab(key: str) -> str:
    """Our flags are kebab-case; --set and the jobs file may also spell them in snake_case."""
    return key.replace("_", "-")


def _flag(key: str, value) -> list[str]:
    """A YAML entry → command-line words. Lists repeat the value; booleans become --x / --no-x."""
    if isinstance(value, bool):
        return [f"--{key}" if value else f"--no-{key}"]
    if isinstance(value, list):
        return [f"--{key}", *map(str, value)]
    return [f"--{key}", str(value)]


def command_line(spec: dict, job: str, profile: str, overrides: list[str], extra: list[str]) -> list[str]:
    jobs, profiles = spec["jobs"], spec["profiles"]
    if job not in jobs:
        raise UserError(f"unknown job {job!r}; jobs: {', '.join(sorted(jobs))}")
    if profile not in profiles:
        raise UserError(f"unknown profile {profile!r}; profiles: {', '.join(sorted(profiles))}")
    command = _job(spec, job)["command"]
    job_args = {_kebab(str(k)): v for k, v in (jobs[job].get("args") or {}).items()}
    if not isinstance(profiles[profile] or {}, dict):
        raise UserError(f"profile {profile!r} in the jobs file must be a mapping of Beam option: value")
    beam_opts = {k: v for k, v in (profiles[profile] or {}).items()}
    own_flags = None
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"--set wants KEY=VALUE, got {item!r}")
        parsed = yaml.safe_load(value) if value else ""
        if own_flags is None:
            from bertcorpus.pipeline.cli import commands

            own_flags = commands.command_flags(command)
        if key not in beam_opts and f"--{_kebab(key)}" in own_flags:
            job_args[_kebab(key)] = parsed  # the job's own flag, in either spelling, replaced
        else:
            beam_opts[key] = parsed  # a Beam option; the command refuses a name that is neither
    words = [command]
    for key, value in job_args.items():
        words += _flag(key, value)
    for key, value in beam_opts.items():
        if isinstance(value, str) and value.startswith("<"):
            raise UserError(
                f"profile {profile!r} still has the placeholder {key}: {value}; "
                f"set it in the jobs file or with --set {key}=..."
            )
        words.append(f"--{key}={value}")
    return words + extra
