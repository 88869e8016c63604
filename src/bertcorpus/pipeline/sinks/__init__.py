"""Atomic outputs on any filesystem, the documents sink the extraction jobs share, and whether a finished output is
up to date (--reuse)."""
