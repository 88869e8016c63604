"""Paths as the data card shows them: relative to the output it describes, or by name where they lie outside it,
so that the card says nothing of the machine that made it and stays true when the folder moves."""

from __future__ import annotations

import os
import re

# An absolute path inside a text: a slash after a space, a quote, a bracket or the start, then two parts or more; a
# full stop or colon after it ends the sentence, not the path.
_PART = r"[^/\s'\"<>()\[\],;]*[^/\s'\"<>()\[\],;.:]"
_ABSOLUTE = re.compile(rf"(?<![\w.:/~-])(?:/{_PART}){{2,}}")
# What the card holds of the documents themselves (words, titles, ids), which is text, not paths.
DOCUMENT_TEXT = {"top", "largest", "smallest"}


def shown_path(path: str, root: str) -> str:
    """`path` relative to `root` when inside it (`root` itself by its name), else the file's name alone."""
    relative = os.path.relpath(path, root)
    if relative == ".":
        return os.path.basename(root.rstrip("/")) or "/"
    return os.path.basename(path.rstrip("/")) if relative.startswith("..") else relative


def portable(value, root: str):
    """A copy of the card (any JSON value) with every absolute path in it shown as shown_path shows it; the text of
    the documents is left as it is."""
    if isinstance(value, dict):
        return {key: item if key in DOCUMENT_TEXT else portable(item, root) for key, item in value.items()}
    if isinstance(value, list):
        return [portable(item, root) for item in value]
    if isinstance(value, str):
        return _ABSOLUTE.sub(lambda found: shown_path(found.group(), root), value)
    return value
