"""Pieces of document text → ids, exactly as a tokenizer.json's `Tokenizer.encode` gives them for each piece, fast.

Most tokenizers treat text one pre-token at a time, and their pre-tokens never reach across a single space that
stands between two other characters (`word.␣Next`): GPT-2's and Llama-3's byte-level patterns, Metaspace,
WordPiece's. A piece's ids are then the ids of its units, each unit being the text from such a space (itself
included) to the next, so they come from a table of the units seen before (wordpiece/chunk_table.py), and only
unseen units reach the tokenizer. Whether a tokenizer is of that kind is decided once, before any text: its
normaliser and pre-tokeniser must be of the kinds known to keep to their pre-tokens, and a probe of varied text
must give the same ids unit by unit as whole. Any other tokenizer (one without a pre-tokeniser, as Gemma's, where
BPE merges run over a whole piece) encodes every piece whole, in one batch.
"""

from __future__ import annotations

import os
import re
from itertools import chain

import numpy as np

from bertcorpus.wordpiece.chunk_table import CHUNK_LIMIT, ChunkTable
from bertcorpus.wordpiece.tokenizer_file import TokenizerFile

# A unit boundary: a single space between two characters that are not whitespace.
_UNIT_BOUNDARY = re.compile(r"(?<=\S) (?=\S)")
# The normalisers that work character by character, and the pre-tokenisers that split at spaces or within the
# pieces between them. A sequence qualifies where every step of it does.
LOCAL_NORMALIZERS = {
    "NFC",
    "NFD",
    "NFKC",
    "NFKD",
    "Lowercase",
    "StripAccents",
    "BertNormalizer",
    "Precompiled",
    "Nmt",
    "Replace",
}
SPLITTING_PRE_TOKENIZERS = {"Whitespace", "WhitespaceSplit", "BertPreTokenizer", "Metaspace", "Split"}
INNER_PRE_TOKENIZERS = {"ByteLevel", "Digits", "Punctuation", "UnicodeScripts"}
# Text the probe encodes unit by unit and whole: words, numbers, contractions, punctuation runs, spaces before
# punctuation, several scripts, soft and hard line breaks, double spaces.
PROBE = (
    "The year 1996 saw 12,345.67 people; they're (mostly) fine. Don't! ... “Quoted,” he said - and left.\n"
    "Second line  with  double spaces\tand a tab. 量子力学是物理学的分支。中文 English 混合, 日本語のテキスト。\n\n"
    "Ελληνικά κείμενα. Українська мова! Tiếng Việt có dấu. বাংলা লেখা। a-b_c/d\\e e.g. U.S.A. 3.14 x²\n"
    " leading space, trailing space ; ! ? ;; !! 'single' \"double\" #hash @at $5 100% <tag> [bracket] {brace}"
)


class PieceEncoder:
    """Ids of pieces of text through a TokenizerFile, and where each token starts in its piece (a character
    offset) where asked: the same as `Tokenizer.encode(piece, add_special_tokens=False)` piece by piece."""

    def __init__(self, tokenizer: TokenizerFile, cache_limit: int = CHUNK_LIMIT):
        # create's workers are processes: each tokenises on one thread, as the reference does.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.tokenizer = tokenizer
        self._hf = tokenizer.tokenizer
        self.cached = unit_local(tokenizer)
        self._table = ChunkTable({"offset": np.int32}, cache_limit)

    def encode(self, text: str) -> np.ndarray:
        return self.encode_pieces([text])[0]

    def encode_pieces(self, pieces: list[str], offsets: bool = False):
        """(ids int32, tokens per piece int32), and with offsets=True the character where each token starts in
        its piece (int64)."""
        if not pieces:
            empty = np.zeros(0, np.int32)
            return (empty, empty, np.zeros(0, np.int64)) if offsets else (empty, empty)
        if not self.cached:
            return self._whole(pieces, offsets)
        units_per_piece = [_units(piece) for piece in pieces]
        units = list(chain.from_iterable(units_per_piece))
        where, per_unit = self._table.where(units, self._learn)
        per_piece = np.fromiter(map(len, units_per_piece), np.int64, len(pieces))
        piece_of_unit = np.repeat(np.arange(len(pieces)), per_piece)
        lengths = np.bincount(piece_of_unit, weights=per_unit, minlength=len(pieces)).astype(np.int32)
        ids = self._table.ids[where]
        if not offsets:
            return ids, lengths
        unit_lengths = np.fromiter(map(len, units), np.int64, len(units))
        unit_starts = np.cumsum(unit_lengths) - unit_lengths  # from the first piece's start
        piece_starts = unit_starts[np.cumsum(per_piece) - per_piece]
        in_piece = unit_starts - np.repeat(piece_starts, per_piece)
        return ids, lengths, np.repeat(in_piece, per_unit) + self._table.columns["offset"][where]

    def _whole(self, pieces: list[str], offsets: bool):
        if offsets:
            encodings = self._hf.encode_batch(pieces, add_special_tokens=False)
        else:
            encodings = self._hf.encode_batch_fast(pieces, add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), np.int32, len(encodings))
        ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), np.int32, int(lengths.sum()))
        if not offsets:
            return ids, lengths
        starts = np.fromiter((o[0] for e in encodings for o in e.offsets), np.int64, len(ids))
        return ids, lengths, starts

    def _learn(self, missing: list[str]) -> None:
        encodings = self._hf.encode_batch(missing, add_special_tokens=False)
        counts = np.fromiter((len(e.ids) for e in encodings), np.int64, len(encodings))
        ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), np.int32, int(counts.sum()))
        starts = np.fromiter((o[0] for e in encodings for o in e.offsets), np.int32, len(ids))
        self._table.add(missing, counts, ids, offset=starts)


def _units(piece: str) -> list[str]:
    """A piece as its units: the text up to the first unit boundary, then each boundary's space with the text
    after it up to the next."""
    parts = _UNIT_BOUNDARY.split(piece)
    return [parts[0], *(" " + p for p in parts[1:])] if len(parts) > 1 else parts


def unit_local(tokenizer: TokenizerFile) -> bool:
    """Whether the tokenizer's ids of a text are its units' ids, one after the other (see the module's
    docstring): by the kinds of its normaliser and pre-tokeniser, then by the probe."""
    config = tokenizer.config
    normalizer, pre_tokenizer = config.get("normalizer"), config.get("pre_tokenizer")
    normalizers = _steps(normalizer, "normalizers")
    pre_tokenizers = _steps(pre_tokenizer, "pretokenizers")
    if any(step.get("type") not in LOCAL_NORMALIZERS and not _strips_right_only(step) for step in normalizers):
        return False
    kinds = [step.get("type") for step in pre_tokenizers]
    splits = any(
        kind in SPLITTING_PRE_TOKENIZERS or (kind == "ByteLevel" and step.get("use_regex", True))
        for kind, step in zip(kinds, pre_tokenizers)
    )
    if not splits or any(kind not in SPLITTING_PRE_TOKENIZERS | INNER_PRE_TOKENIZERS for kind in kinds):
        return False
    if any(step.get("type") == "Metaspace" and step.get("split") is False for step in pre_tokenizers):
        return False  # Metaspace that keeps a text whole: a Unigram lattice over all of it
    hf = tokenizer.tokenizer
    for text in (PROBE, *PROBE.split("\n")):
        whole = hf.encode(text, add_special_tokens=False).ids
        by_unit = [i for unit in _units(text) for i in hf.encode(unit, add_special_tokens=False).ids]
        if whole != by_unit:
            return False
    return True


def _strips_right_only(step: dict) -> bool:
    """A Strip of trailing whitespace alone: a unit never ends in whitespace but where its piece does."""
    return step.get("type") == "Strip" and not step.get("strip_left", True) and step.get("strip_right", True)


def _steps(component: dict | None, key: str) -> list[dict]:
    """A normaliser's or pre-tokeniser's steps: those of a Sequence, or itself alone."""
    if not component:
        return []
    if component.get("type") == "Sequence":
        return [s for step in component.get(key) or [] for s in _steps(step, key)]
    return [component]
