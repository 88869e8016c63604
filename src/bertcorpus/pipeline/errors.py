"""Errors meant for the user: one line and a non-zero exit, never a traceback."""

from __future__ import annotations

import re
import signal
import sys


class UserError(Exception):
    """Something the user must fix; printed as one line, exit status 2."""


class WorkerDiedError(UserError):
    """A worker process of a local run died (killed, out of memory); the message says which stage was running."""


class RunnerJobFailed(UserError):
    """A job that a runner's cluster ran (Flink, Spark) ended without finishing: failed past its restarts, or
    cancelled. The job is over, so nothing of it still writes: its staging can go."""


class Terminated(KeyboardInterrupt):
    """SIGTERM: it stops a command as Ctrl-C does (the same clean-up), with its own line and exit status."""


# The signals that stop a command: each raises its exception in the main thread, and the command ends with one line
# and the exit status a shell gives a process the signal killed (128 + the signal's number).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def stop_exception(signum: int) -> KeyboardInterrupt:
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def raise_stop(signum: int, frame) -> None:
    """The handler of STOP_SIGNALS outside a run's watch."""
    raise stop_exception(signum)


def stopped(stop: KeyboardInterrupt) -> tuple[str, int]:
    """(the word for the line, the exit status) of a command a stop signal ended."""
    if isinstance(stop, Terminated):
        return "terminated", 128 + signal.SIGTERM
    return "interrupted", 128 + signal.SIGINT


# Errors raised inside workers reach the launcher wrapped in runner-specific exceptions; these are the ones
# that carry a message meant for the user.
_USER_ERROR_NAMES = (
    "UserError",
    "InputError",
    "VocabError",
    "NoDocumentsError",
    "OutputExistsError",
    "UnbalancedSplitError",
    "TrainerError",
    "LanguageIdUnavailable",
    "ConverterMarkupError",
)
_WRAPPED = re.compile(rf"(?:{'|'.join(_USER_ERROR_NAMES)}): (.+)")


# An operating system's refusal (a full disk, a read-only or missing path, no permission) as Python prints it, also
# inside the text of an error Beam brings back from a worker: "[Errno 28] No space left on device: '/out/x'".
_WRAPPED_OS_ERROR = re.compile(r"\[Errno \d+\] ([^:\n\[]+)(?:: '([^'\n]+)')?(?:.*?\[while running '([^'\n]+)'\])?")


# Where Beam adds the step that raised: the message says what to change; the step's name is noise.
_BEAM_STEP = re.compile(r"\s*\[while running '[^'\n]*'\]")


def user_message(error: BaseException) -> str | None:
    """The user-facing message inside a (possibly wrapped) exception, or None for a genuine bug."""
    message = _message(error)
    return _BEAM_STEP.sub("", message) if message is not None else None


def _message(error: BaseException) -> str | None:
    if isinstance(error, UnicodeEncodeError) and has_undecoded_bytes(error.object[error.start : error.end]):
        return not_text_message(error.object)
    if type(error).__name__ in _USER_ERROR_NAMES or isinstance(error, (UserError, ValueError)):
        return str(error)
    if isinstance(error, OSError) and error.strerror:
        return f"{error.filename}: {error.strerror}" if error.filename else error.strerror
    text = str(error)
    found = _WRAPPED.findall(text)
    if found:
        return found[-1].strip()
    # A worker's traceback holds the error as first raised and, further on, as re-raised with what the job adds to
    # it (the path, the advice on a full $TMPDIR): the fullest is the one to show.
    os_errors = list(_WRAPPED_OS_ERROR.finditer(text))
    if os_errors:
        fullest = max(os_errors, key=lambda m: (m.group(2) is not None, len(m.group(1).strip())))
        cause, path, step = fullest.groups()
        cause = cause.strip()
        return (f"{path}: {cause}" if path else cause) + (f" (in step '{step}')" if step else "")
    return None


# How Beam's portable runner reports a job that ended in another state than DONE; the text is the job service's
# last error message, often a Java stack trace with its causes.
_RUNNER_JOB_ENDED = re.compile(r"Pipeline (\S+) failed in state (\w+): (.*)", re.S)
_JAVA_EXCEPTION = re.compile(r"^(?:Caused by: )?(?:[a-z_$][\w$]*\.)*([A-Z][\w$]*(?:Exception|Error)): (.+)$")
_RESTARTS = re.compile(r"Recovery is suppressed by (\w+?)BackoffTimeStrategy(?:\(maxNumberRestartAttempts=(\d+))?")


def runner_job_failure(error: BaseException) -> RunnerJobFailed | None:
    """The one line for a runner's job that ended unfinished (None for any other error): the job, its state, the
    innermost cause the runner names, and whether restarts ran out."""
    ended = _RUNNER_JOB_ENDED.match(str(error))
    if ended is None:
        return None
    job, state, text = ended.groups()
    lines = [line.strip() for line in text.strip().splitlines()]
    causes = [m.groups() for m in map(_JAVA_EXCEPTION.match, lines) if m]
    cause = f"{causes[-1][0]}: {causes[-1][1]}" if causes else (lines[0] if lines and lines[0] else "no reason given")
    if len(cause) > 300:
        cause = cause[:300] + "..."
    restarts = _RESTARTS.search(text)
    if restarts:
        strategy, attempts = restarts.groups()
        none = strategy == "NoRestart" or attempts == "0"
        cause += " (no restarts configured)" if none else f" (after {attempts} restarts)"
    return RunnerJobFailed(
        f"the runner's job {job} ended {state} before it finished: {cause}; nothing was published, and a rerun "
        "of the same command starts afresh"
    )


def has_undecoded_bytes(text: str) -> bool:
    """Whether text (an argument, a file name) holds bytes that Python could not decode: it carries them as lone
    surrogates (PEP 383), which cannot be written as UTF-8."""
    return any("\udc80" <= c <= "\udcff" for c in text)


def not_text_message(name: str) -> str:
    """The one line for a name (a path, an argument) that holds undecoded bytes: outputs record names as UTF-8 text,
    which such a name is not. Under a locale that is not UTF-8, Python leaves even UTF-8 names undecoded."""
    try:
        raw = name.encode("utf-8", "surrogateescape")  # the name's own bytes
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        raw = name.encode("utf-8", "backslashreplace")
    shown = raw.decode("utf-8", "backslashreplace")
    if len(shown) > 200:
        shown = shown[:200] + "..."
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return (
            f"'{shown}' is not UTF-8 text (it has the byte 0x{raw[e.start]:02x}); bertcorpus writes the names "
            "it reads into its outputs as UTF-8: rename the file"
        )
    return (
        f"'{shown}' cannot be read as text here: Python decodes names as "
        f"{sys.getfilesystemencoding().upper()} under this locale (C or POSIX, with PYTHONUTF8=0); set a UTF-8 "
        "locale (LC_ALL=C.UTF-8) or PYTHONUTF8=1"
    )
