"""Errors meant for the user: one line and a non-zero exit, never a traceback."""
from __future__ import annotations

import re


class UserError(Exception):
    """Something the user must fix; printed as one line, exit status 2."""


# Errors raised inside workers reach the launcher wrapped in runner-specific exceptions; these are the ones
# that carry a message meant for the user.
_USER_ERROR_NAMES = ("UserError", "InputError", "VocabError", "NoDocumentsError", "OutputExistsError")
_WRAPPED = re.compile(r"(?:%s): (.+)" % "|".join(_USER_ERROR_NAMES))


def user_message(error: BaseException) -> str | None:
    """The user-facing message inside a (possibly wrapped) exception, or None for a genuine bug."""
    if type(error).__name__ in _USER_ERROR_NAMES or isinstance(error, (UserError, ValueError, FileNotFoundError)):
        return str(error)
    found = _WRAPPED.findall(str(error))
    return found[-1].strip() if found else None
