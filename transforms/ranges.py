"""The index arithmetic of wordpiece/ranges.py, under the name the transforms import it by.

It lives in wordpiece/ because the tokenizer needs it and wordpiece/ imports nothing from the layers above it.
"""
from __future__ import annotations

from wordpiece.ranges import concat_ranges

__all__ = ["concat_ranges"]
