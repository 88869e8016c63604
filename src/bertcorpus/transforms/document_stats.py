"""Statistics of documents in one bounded-memory pass: size histograms, extremes, and words that become [UNK].

Document sizes span six orders of magnitude (a two-sentence stub to a whole novel), so sizes are counted in
fixed logarithmic bins: ten per decade from 1 to 10^10, plus one bin for 0. Means, minima and maxima are exact;
medians are read off the bins and so are approximate.

The [UNK] word list needs every whitespace-separated chunk of the text, which is far too many to count one by
one: chunks are tokenised once each (a bounded cache remembers which ones yield [UNK]), and only those that do
are counted, in a counter pruned to its most frequent entries whenever it grows past a bound.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter

import numpy as np

from bertcorpus.transforms.unspaced_scripts import spaced_unspaced_scripts
from bertcorpus.wordpiece.piece_encoder import PieceEncoder
from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer, prepared_chunks
from bertcorpus.wordpiece.tokenizer_file import TokenizerFile
from bertcorpus.wordpiece.vocab import UNK, Vocab

BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")  # a byte-fallback piece of a SentencePiece-style vocabulary

BINS_PER_DECADE = 10
DECADES = 10
# Edges of the size bins: [0, 1), [1, 10^0.1), ..., [10^9.9, 10^10), and the last bin takes everything above.
EDGES = np.concatenate(([0.0], 10.0 ** (np.arange(DECADES * BINS_PER_DECADE + 1) / BINS_PER_DECADE)))
EXTREMES = 5  # largest and smallest documents kept
MAX_SOURCES = 1000  # distinct source labels counted one by one; more are lumped together
OTHER_SOURCES = "(other sources)"


def bin_index(values: np.ndarray) -> np.ndarray:
    return np.minimum(np.searchsorted(EDGES, values, side="right") - 1, len(EDGES) - 2)


class SizeHistogram:
    """Counts of non-negative sizes in the fixed logarithmic bins, with exact count, total, min and max."""

    def __init__(self):
        self.counts = np.zeros(len(EDGES) - 1, np.int64)
        self.total = 0
        self.min: int | None = None
        self.max: int | None = None

    def add(self, values: np.ndarray) -> None:
        if not len(values):
            return
        self.counts += np.bincount(bin_index(values), minlength=len(self.counts))
        self.total += int(values.sum())
        low, high = int(values.min()), int(values.max())
        self.min = low if self.min is None else min(self.min, low)
        self.max = high if self.max is None else max(self.max, high)

    def summary(self) -> dict:
        n = int(self.counts.sum())
        median = None
        if n:
            b = int(np.searchsorted(np.cumsum(self.counts), (n + 1) // 2))
            median = [float(EDGES[b]), float(EDGES[b + 1])]
        return {
            "documents": n,
            "total": self.total,
            "mean": self.total / n if n else None,
            "min": self.min,
            "max": self.max,
            "median_bin": median,
            "counts": self.counts.tolist(),
        }


class DocumentStats:
    """Per-source counts and sizes of documents, and the largest and smallest of them."""

    def __init__(self):
        self.by_source: Counter = Counter()
        self.chars: dict[str, SizeHistogram] = {}
        self.words: dict[str, SizeHistogram] = {}
        self.largest: list[dict] = []
        self.smallest: list[dict] = []

    def add(self, ids: list[str], sources: list[str], titles: list[str | None], texts: list[str]) -> None:
        chars = np.fromiter(map(len, texts), np.int64, len(texts))
        words = np.fromiter((len(spaced_unspaced_scripts(t).split()) for t in texts), np.int64, len(texts))
        labels = [s if s in self.by_source or len(self.by_source) < MAX_SOURCES else OTHER_SOURCES for s in sources]
        self.by_source.update(labels)
        for label in set(labels):
            rows = np.fromiter((lab == label for lab in labels), bool, len(labels))
            self.chars.setdefault(label, SizeHistogram()).add(chars[rows])
            self.words.setdefault(label, SizeHistogram()).add(words[rows])
        batch = [
            {"id": i, "source": s, "title": t, "chars": n} for i, s, t, n in zip(ids, sources, titles, chars.tolist())
        ]
        # Ties go to the smaller id, so the lists do not depend on the order documents arrive in.
        self.largest = heapq.nsmallest(EXTREMES, self.largest + batch, key=lambda d: (-d["chars"], d["id"]))
        self.smallest = heapq.nsmallest(EXTREMES, self.smallest + batch, key=lambda d: (d["chars"], d["id"]))

    def summary(self) -> dict:
        return {
            "documents": sum(self.by_source.values()),
            "by_source": dict(sorted(self.by_source.items())),
            "chars": _combined(self.chars),
            "words": _combined(self.words),
            "chars_by_source": {s: h.summary() for s, h in sorted(self.chars.items())},
            "words_by_source": {s: h.summary() for s, h in sorted(self.words.items())},
            "largest": self.largest,
            "smallest": self.smallest,
        }


def _combined(hists: dict[str, SizeHistogram]) -> dict:
    total = SizeHistogram()
    for h in hists.values():
        total.counts += h.counts
        total.total += h.total
        if h.min is not None:
            total.min = h.min if total.min is None else min(total.min, h.min)
            total.max = h.max if total.max is None else max(total.max, h.max)
    return total.summary()


class PrunedCounter:
    """Counts of keys, pruned to the `keep` most frequent whenever more than 2 × `keep` are held.

    Exact while fewer than 2 × `keep` distinct keys arrive; after a pruning the counts of survivors may be low by
    at most what a pruned key had, which is why `exact` is reported with the result."""

    def __init__(self, keep: int):
        self.keep = keep
        self.counts: Counter = Counter()
        self.exact = True

    def update(self, keys) -> None:
        self.counts.update(keys)
        if len(self.counts) > 2 * self.keep:
            self.counts = Counter(dict(self.counts.most_common(self.keep)))
            self.exact = False

    def most_common(self, n: int) -> list[tuple[str, int]]:
        # Sorted by count, then by key, so that equal counts come out in a fixed order.
        return sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


class UnknownWords:
    """Whitespace-separated chunks of text (after a vocab.txt's cleaning and lower-casing) and the pieces the
    vocabulary gives each, counted over all documents added, and per language: the pieces per word, and the words
    that become [UNK] (or, with a tokenizer.json that falls back to bytes, that need byte pieces). A character of a
    script written without spaces (Chinese, Japanese, Thai) is a chunk of its own. `encode(chunks)` gives the ids of
    each chunk (as WordPieceTokenizer.encode_sentences does); `unknown` the ids that count as unknown."""

    CACHE_LIMIT = 1_000_000  # distinct chunks whose outcome is remembered

    def __init__(self, encode, unknown: np.ndarray, lowercase: bool, keep: int = 10_000, what: str = "[UNK]"):
        self.encode, self.unknown_ids, self.lowercase = encode, unknown, lowercase
        self.what = what  # what an unknown piece is, as the card names it
        self.known: dict[str, int] = {}  # chunk → its pieces, negative where they hold an unknown one
        self.counter = PrunedCounter(keep)
        self.documents = 0
        self.words = 0
        self.pieces = 0
        self.unknown = 0
        self.by_language: dict[str, list[int]] = {}  # language → [words, words with an unknown piece, pieces]

    @classmethod
    def of_vocab(cls, vocab: Vocab, lowercase: bool) -> UnknownWords:
        tokenizer = WordPieceTokenizer(vocab, lowercase)
        return cls(tokenizer.encode_sentences, np.array([vocab.ids[UNK]]), lowercase)

    @classmethod
    def of_tokenizer(cls, tokenizer: TokenizerFile) -> UnknownWords:
        """Each word encoded as it stands in running text, after a space; unknown: the unknown token and any
        byte-fallback piece (<0xE4>)."""
        encoder = PieceEncoder(tokenizer)
        unknown = [i for i, t in enumerate(tokenizer.tokens) if BYTE_PIECE.fullmatch(t)]
        what = "byte pieces" if unknown else "[UNK]"
        if "unk" in tokenizer.specials:
            unknown.append(tokenizer.specials["unk"])
            what = f"{tokenizer.tokens[tokenizer.specials['unk']]}" + (" or byte pieces" if what != "[UNK]" else "")
        encode = lambda chunks: encoder.encode_pieces([" " + c for c in chunks])  # noqa: E731
        return cls(encode, np.array(unknown, np.int64), False, what=what)

    def add(self, text: str, language: str | None = None) -> None:
        chunks, _ = prepared_chunks(spaced_unspaced_scripts(text), self.lowercase)
        new = sorted(set(chunks).difference(self.known))
        found = dict(zip(new, self._pieces_of(new))) if new else {}
        if new and len(self.known) < self.CACHE_LIMIT:
            self.known.update(found)
        pieces = [found[c] if c in found else self.known[c] for c in chunks]
        unknown = [c for c, n in zip(chunks, pieces) if n < 0]
        self.documents += 1
        self.words += len(chunks)
        total = sum(abs(n) for n in pieces)
        self.pieces += total
        if unknown:
            self.unknown += len(unknown)
            self.counter.update(unknown)
        if language is not None:
            totals = self.by_language.setdefault(language, [0, 0, 0])
            totals[0] += len(chunks)
            totals[1] += len(unknown)
            totals[2] += total

    def _pieces_of(self, chunks: list[str]) -> list[int]:
        """Each chunk's count of pieces, negative where one of them is unknown; one call for all."""
        ids, per_chunk = self.encode(chunks)
        owner = np.repeat(np.arange(len(chunks)), per_chunk)
        unknown = np.zeros(len(chunks), bool)
        unknown[owner[np.isin(ids, self.unknown_ids)]] = True
        return np.where(unknown, -per_chunk, per_chunk).tolist()

    def summary(self, top: int = 20) -> dict:
        return {
            "documents": self.documents,
            "words": self.words,
            "unk_words": self.unknown,
            "unk_word_rate": self.unknown / self.words if self.words else None,
            "pieces_per_word": self.pieces / self.words if self.words else None,
            "unknown_pieces": self.what,
            "top": [{"word": w, "count": n} for w, n in self.counter.most_common(top)],
            "counts_exact": self.counter.exact,
            "by_language": {
                tag: {
                    "words": words,
                    "unk_words": unk,
                    "unk_word_rate": unk / words if words else None,
                    "pieces_per_word": pieces / words if words else None,
                }
                for tag, (words, unk, pieces) in sorted(self.by_language.items())
            },
        }
