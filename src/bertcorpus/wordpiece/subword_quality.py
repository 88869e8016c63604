"""A tokenizer of `vocab --model bpe|unigram` measured on held-out text, from counts of its units (pre_tokens.py): a
unit's ids are the same alone as in its sentence, so encoding each distinct unit once and weighing it by its count
gives the tokens of all the held-out text, as create would encode it.

Pieces are counted per word (whitespace-separated) and per character (other than whitespace): a CJK text has no
spaces, its words are whole sentences, so it is measured per character. Two shares say what the tokenizer could not
cover: pieces that are its unknown token, and pieces that stand for part of a character, the bytes a character is
split into where no token holds it whole. A Unigram model with byte fallback has pieces for them (<0xE4>); byte-level
BPE's are ordinary tokens, known by their spans: the tokens of one character all carry that character's span, so a
token whose span overlaps its neighbour's is part of a character. (Metaspace's prepended ▁ shares the first
character's span too, so a Unigram model's are known by their ids only.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from tokenizers import Tokenizer

from bertcorpus.wordpiece.cjk import IDEOGRAPH_RANGES

# CJK ideographs (the reference's ranges) and kana: the characters of text written without spaces between words.
_CJK = re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in IDEOGRAPH_RANGES) + "\u3040-\u30ff]")


@dataclass
class PieceQuality:
    units: int = 0  # held-out unit occurrences measured
    words: int = 0
    characters: int = 0
    cjk_characters: int = 0
    pieces: int = 0
    unknown: int = 0
    partial: int = 0  # pieces that stand for part of a character

    @property
    def measured(self) -> bool:
        return self.pieces > 0

    @property
    def cjk(self) -> bool:
        """Whether most of the characters are CJK: then pieces per character, not per word, say how it is served."""
        return self.cjk_characters * 2 > self.characters

    @property
    def pieces_per_word(self) -> float:
        return self.pieces / self.words if self.words else 0.0

    @property
    def pieces_per_character(self) -> float:
        return self.pieces / self.characters if self.characters else 0.0

    @property
    def unk_token_share(self) -> float:
        return self.unknown / self.pieces if self.pieces else 0.0

    @property
    def byte_fallback_share(self) -> float:
        return self.partial / self.pieces if self.pieces else 0.0

    def record(self) -> dict:
        """The manifest's figures (None where nothing was measured)."""
        if not self.measured:
            return dict.fromkeys(
                ("pieces_per_word", "pieces_per_character", "unk_token_share", "byte_fallback_share", "cjk")
            )
        return {
            "pieces_per_word": round(self.pieces_per_word, 4),
            "pieces_per_character": round(self.pieces_per_character, 4),
            "unk_token_share": round(self.unk_token_share, 6),
            "byte_fallback_share": round(self.byte_fallback_share, 6),
            "cjk": self.cjk,
        }


def measure_units(
    tokenizer: Tokenizer,
    units: dict[str, int],
    unk_id: int | None,
    byte_pieces: frozenset[int] | None = None,
    batch: int = 20_000,
) -> PieceQuality:
    """The pieces of held-out units (weighted by their counts) under a tokenizer, a special token's text encoded as
    the characters it is, as create encodes it. `byte_pieces`: the ids of a Unigram model's byte pieces; None for
    byte-level BPE, whose tokens of part of a character are known by their spans."""
    encoder = Tokenizer.from_str(tokenizer.to_str())
    encoder.encode_special_tokens = True
    quality = PieceQuality()
    distinct = list(units)
    for start in range(0, len(distinct), batch):
        part = distinct[start : start + batch]
        counts = np.fromiter((units[u] for u in part), np.int64, len(part))
        encodings = encoder.encode_batch(part, add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), np.int64, len(part))
        ids = np.fromiter((i for e in encodings for i in e.ids), np.int64, int(lengths.sum()))
        owner = np.repeat(np.arange(len(part)), lengths)
        words = np.fromiter((len(u.split()) for u in part), np.int64, len(part))
        characters = np.fromiter((len(u) - sum(1 for c in u if c.isspace()) for u in part), np.int64, len(part))
        cjk = np.fromiter((len(_CJK.findall(u)) for u in part), np.int64, len(part))
        quality.units += int(counts.sum())
        quality.words += int((words * counts).sum())
        quality.characters += int((characters * counts).sum())
        quality.cjk_characters += int((cjk * counts).sum())
        quality.pieces += int((lengths * counts).sum())
        if unk_id is not None:
            quality.unknown += int(counts[owner[ids == unk_id]].sum())
        if byte_pieces is None:
            spans = np.fromiter((x for e in encodings for o in e.offsets for x in o), np.int64, 2 * len(ids))
            partial = _overlapping(spans.reshape(-1, 2), owner)
        else:
            partial = np.isin(ids, np.fromiter(byte_pieces, np.int64, len(byte_pieces)))
        quality.partial += int(counts[owner[partial]].sum())
    return quality


def _overlapping(spans: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Per token, whether its span overlaps the span of the token before or after it in the same unit."""
    overlap = np.zeros(len(spans), bool)
    if len(spans) > 1:
        overlap[1:] = (spans[1:, 0] < spans[:-1, 1]) & (owner[1:] == owner[:-1])
    return overlap | np.append(overlap[1:], False)
