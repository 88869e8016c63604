"""inspect --provenance: the source text of each segment of an instance, with its document's title and source, from
the input files its create output's manifest lists (read again, as create read them: a document longer than
--max-document-mb is found as the piece create made of it)."""

from __future__ import annotations

import textwrap

from bertcorpus.pipeline.errors import UserError
from bertcorpus.pipeline.inputs.formats import ReadStats, SourceDocument
from bertcorpus.pipeline.inputs.reads import read_documents

SHOWN_CHARS = 300  # of a piece's text, at each end of a longer one


def documents_named(manifest: dict, wanted: set[str]) -> dict[str, SourceDocument]:
    """The documents of these ids, from the inputs the manifest lists (with their title and source where the
    inputs carry them); UserError where one of them is not there any more."""
    config = manifest.get("config") or {}
    found: dict[str, SourceDocument] = {}
    cap = int(float(config.get("max_document_mb", 4.0)) * 1e6)
    for entry in manifest.get("inputs") or []:
        if len(found) == len(wanted):
            break
        stats = ReadStats(entry["path"])
        for doc in read_documents(
            entry["path"], config.get("input_format", "auto"), stats, fields=("title", "source"), cap=cap
        ):
            if isinstance(doc, SourceDocument) and doc.id in wanted:
                found[doc.id] = doc
    if missing := sorted(wanted - set(found)):
        raise UserError(
            f"the documents {', '.join(missing[:3])}{'...' if len(missing) > 3 else ''} are not in the inputs the "
            "manifest lists any more: were they moved or changed since create read them?"
        )
    return found


def provenance_lines(pieces: list[dict], documents: dict[str, SourceDocument]) -> list[str]:
    """Each piece: its segment, document, title and source, its characters, and its text (long ones shortened)."""
    lines = []
    for piece in pieces:
        doc = documents[piece["document"]]
        fields = doc.fields or {}
        title = fields.get("title") or "(no title)"
        source = fields.get("source") or "(no source)"
        segment = "A" if piece["segment"] == 0 else "B"
        lines.append(
            f"  {segment} from {doc.id} ({title!r}, {source}), characters {piece['start']:,}–{piece['end']:,}:"
        )
        text = doc.plain_text()[piece["start"] : piece["end"]]
        if len(text) > 2 * SHOWN_CHARS:
            text = f"{text[:SHOWN_CHARS]} […{len(text) - 2 * SHOWN_CHARS:,} characters…] {text[-SHOWN_CHARS:]}"
        lines += textwrap.wrap(" ".join(text.split()), 110, initial_indent="    ", subsequent_indent="    ")
    return lines
