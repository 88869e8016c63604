"""What every run of `bertcorpus vocab` reports of its counting, whatever it trained: the manifest's config, inputs,
documents and held-out sample, and the summary's rows of the input, the documents and the held-out lines.
pipeline/vocab/wordpiece_run.py and pipeline/vocab/subword_run.py add what their model learned and how it measures."""

from __future__ import annotations

from collections import Counter

from bertcorpus.pipeline.errors import UserError
from bertcorpus.pipeline.vocab.counting import CorpusCounts, VocabConfig


def set_aside(counts: CorpusCounts, kind: str) -> Counter:
    """Records of the input files that were not documents, by reason: skipped (a null text), or errors (records
    that could not be read)."""
    total = Counter()
    for f in counts.files:
        total.update(f.get(kind, {}))
    return total


def no_words(cfg: VocabConfig, counts: CorpusCounts) -> UserError:
    """The one line for a corpus without a word to train on: the documents read and what was set aside."""
    skipped = "".join(
        f"; {n:,} {kind} {reason}"
        for kind, aside in (("skipped as", "skipped"), ("unreadable:", "errors"))
        for reason, n in sorted(set_aside(counts, aside).items())
    )
    return UserError(
        f"no words to train on: {counts.tallies['documents_read']:,} documents read from "
        f"{', '.join(cfg.inputs)} ({counts.tallies['documents_sampled']:,} for training{skipped}); "
        "nothing was written"
    )


def counting_record(cfg: VocabConfig, counts: CorpusCounts) -> dict:
    """The manifest's settings, inputs and documents."""
    tallies = counts.tallies
    return {
        "config": cfg.describe(),
        "inputs": counts.files,
        "documents": {
            "read": tallies["documents_read"],
            "sampled": tallies["documents_sampled"],
            "not_sampled": tallies["documents_unsampled"],
            "skipped": dict(set_aside(counts, "skipped")),
            "errors": dict(set_aside(counts, "errors")),
            "files_not_read": counts.files_not_read,
        },
    }


def held_out_record(cfg: VocabConfig, counts: CorpusCounts, counted: str = "words") -> dict:
    """The manifest's held-out sample: its lines and documents, and the occurrences of what was `counted`."""
    return {
        "fraction_of_lines": cfg.holdout_fraction,
        "lines": counts.tallies["heldout_lines"],
        "documents": counts.tallies["heldout_documents"],
        counted: counts.held_out.words,
        f"distinct_{counted}_sampled": counts.held_out.sampled,
    }


def input_rows(cfg: VocabConfig, counts: CorpusCounts) -> list[tuple[str, str]]:
    """The summary's rows of the input files and every document read, not sampled, skipped or unreadable."""
    tallies = counts.tallies
    replaced = sum(f.get("replaced_chars", 0) for f in counts.files)
    rows = [
        ("input", f"{len(counts.files):,} files, {sum(f['size'] for f in counts.files) / 1e6:,.1f} MB"),
        ("documents read", f"{tallies['documents_read']:,}"),
    ]
    if tallies["documents_unsampled"]:
        rows.append(("  not sampled", f"{tallies['documents_unsampled']:,}"))
    rows += [(f"  skipped ({reason})", f"{n:,}") for reason, n in sorted(set_aside(counts, "skipped").items())]
    rows += [
        (f"  unreadable records ({reason})", f"{n:,}") for reason, n in sorted(set_aside(counts, "errors").items())
    ]
    if cfg.max_documents and tallies["documents_sampled"] >= cfg.max_documents:
        rows.append(
            ("stopped", f"at --max-documents {cfg.max_documents:,}; {counts.files_not_read:,} files not opened")
        )
    if replaced:
        rows.append(("invalid UTF-8", f"{replaced:,} characters replaced by U+FFFD"))
    if unknown := sum(f.get("unknown_language_tags", 0) for f in counts.files):
        rows.append(("language tags", f"{unknown:,} unknown, read as und"))
    return rows


def held_out_sample(cfg: VocabConfig, counts: CorpusCounts, what: str) -> str:
    """The held-out sample in words: its lines, documents and `what` it holds."""
    tallies = counts.tallies
    return (
        f"{tallies['heldout_lines']:,} lines ({cfg.holdout_fraction:.2%} of the lines, drawn per document) "
        f"from {tallies['heldout_documents']:,} documents, {what}"
    )
