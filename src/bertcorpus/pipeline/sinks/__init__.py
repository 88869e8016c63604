"""Atomic outputs on any filesystem, and the documents sink the extraction jobs share."""
