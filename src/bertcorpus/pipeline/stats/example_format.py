"""How `bertcorpus inspect` prints an example: a record in the reference layout (tokens as the model sees them,
segments, label, masked positions), an instance of the unmasked forms, and the loader's masks for one epoch. Tokens
in the masked positions' list are JSON strings, so that a punctuation token such as "," reads as itself."""

from __future__ import annotations

import json

# What labels 0 and 1 mean, by the manifest form's label; without a pair objective the slot is unused.
LABEL_MEANINGS = {"random_next": ("actual next", "random next"), "swapped": ("in order", "swapped")}


def _tokens_line(ids: list[int], segments: list[int], tokens: tuple[str, ...], lead: str) -> str:
    seg_a = " ".join(tokens[i] for i, s in zip(ids, segments) if s == 0)
    if 1 not in segments:
        return f"  {lead}: {seg_a}"
    seg_b = " ".join(tokens[i] for i, s in zip(ids, segments) if s == 1)
    return f"  {lead}: {seg_a} || {seg_b}"


def _segments_line(segments: list[int]) -> str:
    if 1 not in segments:
        return f"  one segment of {len(segments)} tokens"
    return f"  segment A {segments.count(0)} tokens, segment B {segments.count(1)} tokens"


def _label_line(label: int, label_kind: str) -> str:
    meanings = LABEL_MEANINGS.get(label_kind)
    if meanings is None:
        return f"  next_sentence_label: {label} (unused: no pair objective)"
    return f"  next_sentence_label: {label} ({meanings[1] if label == 1 else meanings[0]})"


def _masked_line(features: dict[str, list], tokens: tuple[str, ...], length: int) -> str:
    ids, weights = features["input_ids"][:length], features["masked_lm_weights"]
    positions = [p for p, w in zip(features["masked_lm_positions"], weights) if w > 0]
    originals = [tokens[i] for i, w in zip(features["masked_lm_ids"], weights) if w > 0]
    predictions = ", ".join(f"{p}:{_quoted(tokens[ids[p]])}→{_quoted(o)}" for p, o in zip(positions, originals))
    return f"  masked ({len(positions)}): {predictions}"


def _quoted(token: str) -> str:
    """A token as a JSON string: "," and "history" are told apart from the list's own commas."""
    return json.dumps(token, ensure_ascii=False)


def format_example(features: dict[str, list], tokens: tuple[str, ...], label_kind: str = "random_next") -> str:
    """A record in the reference feature layout: tokens as the model sees them, segments, label, masked positions."""
    length = sum(features["input_mask"])
    ids, segments = features["input_ids"][:length], features["segment_ids"][:length]
    return "\n".join(
        [
            _tokens_line(ids, segments, tokens, f"tokens ({length})"),
            _segments_line(segments),
            _label_line(features["next_sentence_labels"][0], label_kind),
            _masked_line(features, tokens, length),
        ]
    )


def format_instance(row: dict, tokens: tuple[str, ...], label_kind: str) -> str:
    """A row of the Parquet form, unmasked: its tokens, segments (B from segment_b_start on) and label."""
    ids, length = row["input_ids"], row["length"]
    segments = [int(p >= row["segment_b_start"]) for p in range(length)]
    return "\n".join(
        [
            _tokens_line(ids, segments, tokens, f"tokens ({length})"),
            _segments_line(segments),
            _label_line(row["next_sentence_label"], label_kind),
        ]
    )


def format_masks(features: dict[str, list], tokens: tuple[str, ...], epoch: int, seed: int) -> str:
    """The loader's masks for one instance: its tokens as the model sees them that epoch, and what they hide."""
    length = sum(features["input_mask"])
    ids, segments = features["input_ids"][:length], features["segment_ids"][:length]
    return "\n".join(
        [_tokens_line(ids, segments, tokens, f"epoch {epoch}, seed {seed}"), _masked_line(features, tokens, length)]
    )
