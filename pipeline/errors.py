"""Errors meant for the user: one line and a non-zero exit, never a traceback."""
from __future__ import annotations

import re


class UserError(Exception):
    """Something the user must fix; printed as one line, exit status 2."""


class WorkerDiedError(UserError):
    """A worker process of a local run died (killed, out of memory); the message says which stage was running."""


# Errors raised inside workers reach the launcher wrapped in runner-specific exceptions; these are the ones
# that carry a message meant for the user.
_USER_ERROR_NAMES = ("UserError", "InputError", "VocabError", "NoDocumentsError", "OutputExistsError",
                     "UnbalancedSplitError")
_WRAPPED = re.compile(r"(?:%s): (.+)" % "|".join(_USER_ERROR_NAMES))


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
    if type(error).__name__ in _USER_ERROR_NAMES or isinstance(error, (UserError, ValueError)):
        return str(error)
    if isinstance(error, OSError) and error.strerror:
        return f"{error.filename}: {error.strerror}" if error.filename else error.strerror
    text = str(error)
    found = _WRAPPED.findall(text)
    if found:
        return found[-1].strip()
    os_error = _WRAPPED_OS_ERROR.search(text)
    if os_error:
        cause, path, step = os_error.groups()
        cause = cause.strip()
        return (f"{path}: {cause}" if path else cause) + (f" (in step '{step}')" if step else "")
    return None
