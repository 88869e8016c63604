"""Word counts for vocab training, streamed: text becomes chunks counted in C, and only each batch's distinct
chunks go through the chunk normaliser and BertPreTokenizer of wordpiece.tokenizer (HF), so the Python work grows
with the number of distinct chunks, not with the text; the counter prunes rare words to bound its memory, and a
held-out sample of words is kept aside to measure the vocab on."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable

import numpy as np
from tokenizers import pre_tokenizers

from bertcorpus.wordpiece.tokenizer import MAX_CHARS_PER_WORD, chunk_normalizer, prepared_chunks
from bertcorpus.wordpiece.training import symbol_counts

# prepare_text removes NUL, and BertPreTokenizer keeps it as a word of its own, so it can mark where one
# chunk ends when many chunks go through HF in one call.
_BOUNDARY = "\x00"


class ChunkBatch:
    """Text waiting to become word counts: chunks are counted as text arrives and split into words on drain."""

    def __init__(self, lowercase: bool, max_chars: int = 1 << 25):
        self.lowercase = lowercase
        self.max_chars = max_chars
        self._chunks: Counter = Counter()
        self._chars = 0
        self._normalizer = chunk_normalizer(lowercase)
        self._pre_tokenizer = pre_tokenizers.BertPreTokenizer()

    def add(self, text: str) -> bool:
        """Count the chunks of text; True once the batch is big enough to drain."""
        chunks, length = prepared_chunks(text, self.lowercase)
        self._chunks.update(chunks)
        self._chars += length
        return self._chars >= self.max_chars

    def drain(self) -> Counter:
        """Word counts of everything added since the last drain."""
        chunks, self._chunks, self._chars = self._chunks, Counter(), 0
        # An ASCII letters-and-digits chunk is one word, unchanged by the normaliser (no accents, CJK or
        # punctuation), so only the other chunks need HF's pre-tokeniser, the costly step per word.
        words = Counter({c: n for c, n in chunks.items() if c.isascii() and c.isalnum()})
        rest = {c: n for c, n in chunks.items() if not (c.isascii() and c.isalnum())}
        if not rest:
            return words
        joined = f" {_BOUNDARY} ".join(rest)
        pieces = self._pre_tokenizer.pre_tokenize_str(self._normalizer.normalize_str(joined))
        counts = iter(rest.values())  # same order as the joined keys
        count = next(counts)
        for word, _ in pieces:
            if word == _BOUNDARY:
                count = next(counts)
            else:
                words[word] += count
        return words


def drop_long_words(words: Counter, max_chars: int = MAX_CHARS_PER_WORD) -> int:
    """Remove words over a length limit (WordPiece's: always [UNK], so useless to train on); their occurrences."""
    long_words = [w for w in words if len(w) > max_chars]
    return sum(words.pop(w) for w in long_words)


def prune_plan(histogram: Iterable[tuple[int, int]], limit: int) -> tuple[int, int, int]:
    """Which words to drop so that at most `limit` remain: those counted at most t times, t as small as possible.

    histogram: (count, number of words with that count) pairs. Returns (t, words dropped, occurrences dropped);
    t = 0 when every word fits. Words with equal counts stay or go together, so the result is order-free.
    """
    kept = 0
    ordered = sorted(histogram, reverse=True)
    for i, (count, words) in enumerate(ordered):
        kept += words
        if kept > limit:
            rest = ordered[i:]
            return count, sum(n for _, n in rest), sum(c * n for c, n in rest)
    return 0, 0, 0


class WordCounter:
    """Word counts for training, with a bound on the distinct words held.

    When more than `max_words` distinct words are held, every word counted at most t times is dropped, t being
    the smallest threshold that leaves at most max_words // 2 (so pruning happens rarely). For a given input order
    this is deterministic. The characters of dropped words stay known (`pruned_symbols`), so pruning never
    shrinks the alphabet and adds no [UNK]s; the numbers dropped are kept for the summary.
    """

    def __init__(self, max_words: int, max_chars: int = MAX_CHARS_PER_WORD):
        self.max_words = max_words
        self.max_chars = max_chars
        self.counts: Counter = Counter()
        self.words = 0  # occurrences seen, before any drop
        self.too_long = 0  # occurrences of words over max_chars
        self.pruned_words = 0  # distinct words dropped by pruning
        self.pruned_occurrences = 0
        self.pruned_symbols: tuple[Counter, Counter] = (Counter(), Counter())

    def add_counts(self, words: Counter) -> None:
        self.words += sum(words.values())
        self.too_long += drop_long_words(words, self.max_chars)
        if self.counts:
            self.counts.update(words)
        else:
            self.counts = words
        if len(self.counts) > self.max_words:
            self._prune(self.max_words // 2)

    def _prune(self, limit: int) -> None:
        values, sizes = np.unique(np.fromiter(self.counts.values(), np.int64, len(self.counts)), return_counts=True)
        threshold, words, occurrences = prune_plan(zip(values.tolist(), sizes.tolist()), limit)
        first, rest = symbol_counts({w: c for w, c in self.counts.items() if c <= threshold})
        self.pruned_symbols[0].update(first)
        self.pruned_symbols[1].update(rest)
        self.counts = Counter({w: c for w, c in self.counts.items() if c > threshold})
        self.pruned_words += words
        self.pruned_occurrences += occurrences


def _word_hash(word: str) -> int:
    return int.from_bytes(hashlib.sha256(word.encode("utf-8", "surrogatepass")).digest()[:8], "little")


class HeldOutWords:
    """Word counts of held-out text, to measure a vocab on; bounded by subsampling distinct words.

    A word's tokens do not depend on its context, so counts are all that the measurement needs. When there are
    more than `max_words` distinct words, only words whose stable hash falls below a threshold (halved as needed)
    are kept: every distinct word stays with the same probability whatever its count, so rates measured on the
    sample are unbiased, and the sample does not depend on the order of the input.
    """

    def __init__(self, max_words: int):
        self.max_words = max_words
        self.counts: Counter = Counter()
        self.words = 0  # all held-out occurrences, sampled or not
        self._keep_below = 1 << 64

    def add_counts(self, words: Counter) -> None:
        self.words += sum(words.values())
        if self._keep_below < 1 << 64:
            words = Counter({w: c for w, c in words.items() if _word_hash(w) < self._keep_below})
        self.counts.update(words)
        while len(self.counts) > self.max_words:
            self._keep_below //= 2
            self.counts = Counter({w: c for w, c in self.counts.items() if _word_hash(w) < self._keep_below})

    @property
    def sampled(self) -> bool:
        return self._keep_below < 1 << 64


# ------------------------------------------------------------------------------------------------ training
