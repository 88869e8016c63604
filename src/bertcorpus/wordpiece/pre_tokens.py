"""The normalisation and pre-tokenisation of the tokenizers that `vocab --model bpe|unigram` trains, defined once for
the tokenizer.json they are written as and for the counting that feeds their trainers; and that counting.

    bpe      byte-level BPE as RoBERTa and ModernBERT have it: NFC, then GPT-2's pattern and the bytes of each
             pre-token as printable characters (ByteLevel, add_prefix_space false as OLMo's and ModernBERT's: a
             text's first word has no Ġ, a word after a space has one)
    unigram  SentencePiece's Unigram as XLM-R has it: SentencePiece's nmt rules (control characters out, every kind
             of whitespace a space; HF's Nmt) and NFKC, as its nmt_nfkc normalisation does, runs of spaces made one
             and trailing ones dropped; then Metaspace: each space a ▁ that starts a pre-token, ▁ before the first

create encodes each sentence apart, with the whitespace before it (transforms/sentence_spans.py), so the counting
takes the same pieces of text. Both pre-tokenisers keep to the units of a piece, the text from a single space that
stands between two other characters to the next (wordpiece/piece_encoder.py): a unit's pre-tokens are the same
alone as in its piece. So a batch counts units in C (Counter), and only its distinct units are normalised and
pre-tokenised, all in one call, joined and cut apart again at a character they do not hold.

For training, a batch gives the pre-tokens (`Ġthe`, `▁the`); for the held-out measure, the units themselves, which
the trained tokenizer encodes as create would.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import numpy as np
from tokenizers import PreTokenizedString, Regex, decoders, normalizers, pre_tokenizers

BPE, UNIGRAM = "bpe", "unigram"
METASPACE = "\u2581"
# Pre-tokens longer than this (characters; a byte-level pre-token's are its bytes) are not trained on: a URL, a
# blob of base64 or 300 ideographs without punctuation, rare and costly to the trainers (each merge or lattice
# grows with them); create still encodes them, and the held-out measure counts them.
MAX_PRE_TOKEN_CHARS = 1000
_UNIT_BOUNDARY = re.compile(r"(?<=\S) (?=\S)")


def normalizer(model: str, lowercase: bool) -> normalizers.Normalizer:
    if model == BPE:
        steps = [normalizers.NFC()]
    else:
        steps = [
            normalizers.Nmt(),
            normalizers.NFKC(),
            normalizers.Replace(Regex(" {2,}"), " "),
            normalizers.Strip(left=False, right=True),
        ]
    return normalizers.Sequence([*steps, normalizers.Lowercase()] if lowercase else steps)


def pre_tokenizer(model: str) -> pre_tokenizers.PreTokenizer:
    if model == BPE:
        return pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    return pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)


def decoder(model: str, byte_fallback: bool = False) -> decoders.Decoder:
    """Ids back to text; a Unigram model's byte pieces (<0xE8><0xAF><0xAD>) back to their character first."""
    if model == BPE:
        return decoders.ByteLevel()
    metaspace = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    return decoders.Sequence([decoders.ByteFallback(), metaspace]) if byte_fallback else metaspace


def units(piece: str) -> list[str]:
    """A piece as its units: the text up to its first unit boundary, then each boundary's space with the text after
    it up to the next."""
    parts = _UNIT_BOUNDARY.split(piece)
    return [parts[0], *(" " + part for part in parts[1:])]


class PreTokenBatch:
    """Text waiting to become counts: cut into the pieces create encodes (`pieces_of`), then into units, counted as
    text arrives; on drain, the pre-tokens of those units (pre_tokens=True), else the units."""

    def __init__(
        self,
        model: str,
        lowercase: bool,
        pieces_of: Callable[[str], list[str]],
        pre_tokens: bool,
        max_chars: int = 1 << 25,
    ):
        self.pieces_of = pieces_of
        self.pre_tokens = pre_tokens
        self.max_chars = max_chars
        self._normalizer = normalizer(model, lowercase)
        self._pre_tokenizer = pre_tokenizer(model)
        self._units: Counter = Counter()
        self._chars = 0

    def add(self, text: str) -> bool:
        """Count the units of text; True once the batch is big enough to drain."""
        for piece in self.pieces_of(text):
            self._units.update(units(piece))
        self._chars += len(text)
        return self._chars >= self.max_chars

    def drain(self) -> Counter:
        counted, self._units, self._chars = self._units, Counter(), 0
        return self.pre_token_counts(counted) if self.pre_tokens else counted

    def pre_token_counts(self, counted: Counter) -> Counter:
        """The pre-tokens of counted units, each counted as often as its unit: the units joined into one text by a
        character none of them holds and cut back apart at it before normalising, so that each is normalised and
        pre-tokenised as if alone, in one call; each pre-token goes to its unit by where it starts."""
        distinct = [unit for unit in counted if unit]
        if not distinct:
            return Counter()
        separator = _separator(distinct)
        lengths = np.fromiter(map(len, distinct), np.int64, len(distinct)) + 1
        starts = np.cumsum(lengths) - lengths
        text = PreTokenizedString(separator.join(distinct))
        text.split(lambda _, whole: whole.split(separator, "removed"))
        text.normalize(self._normalizer.normalize)
        self._pre_tokenizer.pre_tokenize(text)
        splits = text.get_splits(offset_referential="original", offset_type="char")
        found = np.fromiter((start for _, (start, _), _ in splits), np.int64, len(splits))
        owners = np.searchsorted(starts, found, side="right") - 1
        words: Counter = Counter()
        for (token, _, _), owner in zip(splits, owners.tolist()):
            words[token] += counted[distinct[owner]]
        return words


def _separator(texts: list[str]) -> str:
    """A character that none of the texts holds: the first of Unicode's noncharacters (U+FDD0 on) not in them."""
    for code in range(0xFDD0, 0xFDF0):
        if not any(chr(code) in text for text in texts):
            return chr(code)
    raise ValueError("the text holds every noncharacter from U+FDD0 to U+FDEF")
