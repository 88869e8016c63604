"""NSP instance construction: tokenised documents → (segment A, segment B, is_random_next) descriptors.

This follows the reference's create_instances_from_document (target length with short_seq_prob, chunks of whole
sentences, a random A/B split, a random next from another document with the unused sentences put back, and
truncate_seq_pair), with three deliberate fixes:

1. The NSP label is drawn first, whatever the chunk looks like, and labels come in balanced pairs: of two
   consecutive chunks of a pass over a bucket, a coin decides which one gets the random next. Each label is
   still 1/2 either way, but an output's share stays at 0.5 far closer than independent draws would keep it.
   The reference forces a random next on every single-sentence chunk, which makes ~54% of its labels "random".
   Here a one-sentence chunk that drew IsNext takes the following sentence(s) as B. At the end of a document,
   where nothing follows, it takes a random next as the reference's does, and leaves its IsNext label to the
   chunks after it (`InstanceBatch.random_instead`): the pair fills to the target length, and instance lengths
   follow the reference's without its bias. Only when MAX_OWED_LABELS are already owed, or in the last document
   of a bucket's last pass (where nothing could repay it), does such a chunk pair with the sentence before it,
   or, in a one-sentence document, count its draw as skipped.
2. A random next never comes from the same document (the reference gives up after 10 tries and silently uses
   the same document). It comes from fragments of documents of other buckets of the same split, sampled by
   `sample_fragments` and appended to the bucket as a pool, so that a bucket's negatives do not depend on how
   many documents it holds; only where the split is a single bucket does the pool fall back to the bucket's
   other documents. A draw with nowhere to go becomes IsNext and is counted. In a corpus of several languages a
   random next comes from a document of the same language (or of an undetermined one): one in another language
   is told apart by its script or words alone, which teaches next-sentence prediction nothing: from the pool's
   fragments of the language, else from the bucket's own other documents of it (`random_next_sources`); only
   where there are none does it come from any, counted.
3. File boundaries are document boundaries (the readers guarantee it; nothing here joins documents).

Sentence-order prediction (`create_sop_instances_from_document`) cuts the same chunks and always pairs A with
the segment that follows it, swapping the two in half of the instances.

Segments are kept as token ranges into one flat array per bucket, so the Python loop only moves integers;
gathering, truncation and masking happen in numpy over the whole batch (transforms/masking.py).
"""

from __future__ import annotations

import random
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from bertcorpus.transforms.languages import UNDETERMINED
from bertcorpus.wordpiece.ranges import concat_ranges

MAX_OWED_LABELS = 2  # IsNext labels that chunks taking a random next instead may leave to the chunks after them


@dataclass(frozen=True)
class SeqConfig:
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    min_document_tokens: int = 0  # documents with fewer tokens make no instance of this config (--pair-objective none)

    @property
    def name(self) -> str:
        return f"seq{self.max_seq_length}"


def concatenate_word_flags(flags: list[np.ndarray | None], shapes: list) -> np.ndarray | None:
    """The segmenter's word flags of several parts (Bucket.word_continues, InstanceColumns.word_continues) joined,
    all False for a part of the given shape that has none; None where no part has any."""
    if all(f is None for f in flags):
        return None
    return np.concatenate([f if f is not None else np.zeros(shape, bool) for f, shape in zip(flags, shapes)])


@dataclass
class Bucket:
    """The documents of one bucket, tokenised: one flat id array and sentence boundaries into it; and, for
    whole-word masking by a segmenter's words, which tokens continue the word of the token before them."""

    doc_ids: list[str]
    tokens: np.ndarray  # int32, every sentence of every document, in order
    sentence_starts: np.ndarray  # int64, len = sentences + 1; sentence k is tokens[starts[k]:starts[k+1]]
    doc_first_sentence: np.ndarray  # int64, len = documents + 1; document d has sentences [first[d], first[d+1])
    word_continues: np.ndarray | None = None  # bool per token, or None where no segmenter grouped any
    languages: list[str] | None = None  # each document's language (BCP 47), or None where they are not known
    # (sentences, 2) int64, create --provenance only: the characters [start, end) of its document's text that each
    # sentence's tokens were made from (transforms/provenance.py)
    spans: np.ndarray | None = None

    @classmethod
    def from_documents(
        cls, docs: list[tuple], languages: list[str] | None = None, spans: list[np.ndarray] | None = None
    ) -> Bucket:
        """docs: (doc_id, token ids, tokens per sentence[, word_continues per token]), in a fixed order; languages:
        each one's language, if known; spans: each one's sentences' stretches of text (provenance)."""
        tokens = np.concatenate([d[1] for d in docs]) if docs else np.zeros(0, np.int32)
        lengths = np.concatenate([d[2] for d in docs]) if docs else np.zeros(0, np.int32)
        starts = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64)))
        per_doc = np.fromiter((len(d[2]) for d in docs), dtype=np.int64, count=len(docs))
        first = np.concatenate(([0], np.cumsum(per_doc)))
        continues = concatenate_word_flags([d[3] if len(d) > 3 else None for d in docs], [len(d[1]) for d in docs])
        stretches = None
        if spans is not None:
            stretches = np.concatenate(spans).astype(np.int64) if docs else np.zeros((0, 2), np.int64)
        return cls(
            [d[0] for d in docs], tokens.astype(np.int32, copy=False), starts, first, continues, languages, stretches
        )

    def __len__(self) -> int:
        return len(self.doc_ids)

    def select(self, docs: list[int]) -> Bucket:
        """A bucket of these documents of this one (indices in order), with their sentences, tokens and languages."""
        first, starts = self.doc_first_sentence, self.sentence_starts
        chosen = np.asarray(docs, np.int64)
        per_doc = first[chosen + 1] - first[chosen]  # sentences of each chosen document
        lengths = np.diff(starts)[concat_ranges(first[chosen], per_doc)]
        token_first = starts[first[chosen]]
        token_rows = concat_ranges(token_first, starts[first[chosen + 1]] - token_first)
        return Bucket(
            [self.doc_ids[d] for d in docs],
            self.tokens[token_rows],
            np.concatenate(([0], np.cumsum(lengths, dtype=np.int64))),
            np.concatenate(([0], np.cumsum(per_doc))),
            None if self.word_continues is None else self.word_continues[token_rows],
            None if self.languages is None else [self.languages[d] for d in docs],
            None if self.spans is None else self.spans[concat_ranges(first[chosen], per_doc)],
        )

    def document_of_tokens(self, tokens: np.ndarray) -> np.ndarray:
        """The document each token index falls in."""
        token_starts = self.sentence_starts[self.doc_first_sentence]
        return np.searchsorted(token_starts, tokens, side="right") - 1

    @classmethod
    def concatenate(cls, buckets: list[Bucket]) -> Bucket:
        """One bucket holding the documents of several, in order."""
        tokens = np.concatenate([b.tokens for b in buckets])
        lengths = np.concatenate([np.diff(b.sentence_starts) for b in buckets])
        per_doc = np.concatenate([np.diff(b.doc_first_sentence) for b in buckets])
        continues = concatenate_word_flags([b.word_continues for b in buckets], [len(b.tokens) for b in buckets])
        languages = None
        if any(b.languages is not None for b in buckets):
            languages = [tag for b in buckets for tag in (b.languages or [""] * len(b))]
        spans = None
        if all(b.spans is not None for b in buckets):
            spans = np.concatenate([b.spans for b in buckets])
        return cls(
            [i for b in buckets for i in b.doc_ids],
            tokens,
            np.concatenate(([0], np.cumsum(lengths))),
            np.concatenate(([0], np.cumsum(per_doc))),
            continues,
            languages,
            spans,
        )

    def __post_init__(self) -> None:
        # Plain lists: the per-chunk loop indexes them one integer at a time, where numpy scalars are slow.
        self.starts_list: list[int] = self.sentence_starts.tolist()
        self.first_list: list[int] = self.doc_first_sentence.tolist()


@dataclass
class InstanceBatch:
    """Instances as token ranges: A = tokens[a_start:a_end], B = tokens[b_start:b_end], before truncation."""

    # (a_start, a_end, b_start, b_end, is_random_next) per instance; one tuple keeps the hot loop to one append.
    rows: list[tuple[int, int, int, int, bool]] = field(default_factory=list)
    # Draws that could not be honoured, by reason (see the module docstring).
    skipped: dict[str, int] = field(default_factory=dict)
    # Random-next labels given minus IsNext ones: the next label repays a difference, and a fair coin draws it
    # when there is none, so that labels come in balanced pairs.
    balance: int = 0
    # False where no chunk follows to repay an owed label: the last document of a bucket's last pass.
    may_owe: bool = True

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, a_start: int, a_end: int, b_start: int, b_end: int, is_random: bool) -> None:
        self.rows.append((a_start, a_end, b_start, b_end, is_random))

    def count(self, reason: str, times: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + times

    def next_label(self, rng: random.Random) -> bool:
        """is_random_next for the next chunk: a fair coin for the first of a pair, its opposite for the second."""
        label = self.balance < 0 if self.balance else rng.random() < 0.5
        self.balance += 1 if label else -1
        return label

    def random_instead(self) -> bool:
        """Whether a chunk that drew IsNext may take a random next instead, owing IsNext to the chunks after it;
        at most MAX_OWED_LABELS are owed at once, so an output's share stays within that many of one half."""
        if not self.may_owe or self.balance + 2 > MAX_OWED_LABELS:
            return False
        self.balance += 2
        return True

    def drop_surplus(self, random_before: int, isnext_before: int) -> None:
        """For a bucket's last pass: drop the last instances of whichever label outnumbers the other over the
        bucket's passes, up to MAX_OWED_LABELS of them (counted as unpaired_label), so that what the labels end
        owing leaves no lean, however few instances a bucket makes."""
        made = sum(row[4] for row in self.rows)
        surplus = random_before + made - isnext_before - (len(self.rows) - made)
        label, left = surplus > 0, min(abs(surplus), MAX_OWED_LABELS)
        for at in range(len(self.rows) - 1, -1, -1):
            if not left:
                break
            if self.rows[at][4] == label:
                del self.rows[at]
                self.count("unpaired_label")
                left -= 1

    def take(self, rows: np.ndarray) -> InstanceBatch:
        """A batch of these rows of this one, in that order."""
        return InstanceBatch([self.rows[i] for i in rows.tolist()])

    def columns(self) -> np.ndarray:
        """(5, N) int64: a_start, a_end, b_start, b_end, label."""
        return np.array(self.rows, dtype=np.int64).reshape(-1, 5).T

    def labels(self) -> np.ndarray:
        """(N,) int64: each instance's label (1 = random next, or swapped for sentence order)."""
        return np.fromiter((row[4] for row in self.rows), np.int64, len(self.rows))


def target_seq_length(max_num_tokens: int, short_seq_prob: float, rng: random.Random) -> int:
    """The reference's one draw per (document, pass): usually the maximum, sometimes uniform in [2, max]."""
    if rng.random() < short_seq_prob:
        return 2 + int(rng.random() * (max_num_tokens - 1))
    return max_num_tokens


def sample_fragments(bucket: Bucket, count: int, fragment_tokens: int, rng: random.Random) -> Bucket:
    """`count` fragments of the bucket's documents for other buckets' random next segments, as a bucket of their
    own: each a run of whole sentences from a random sentence of a random document (as the reference picks a random
    next), of at least `fragment_tokens` tokens where the document has them, under its donor's id and language."""
    fragments, donors, spans = [], [], []
    for _ in range(count):
        doc = int(rng.random() * len(bucket))
        donors.append(doc)
        first, end = bucket.first_list[doc], bucket.first_list[doc + 1]
        start = first + int(rng.random() * (end - first))
        last = _extend_to_length(bucket.starts_list, start, end, fragment_tokens)
        starts = bucket.sentence_starts
        span = slice(starts[start], starts[last + 1])
        fragments.append(
            (
                bucket.doc_ids[doc],
                bucket.tokens[span],
                np.diff(starts[start : last + 2]).astype(np.int32),
                None if bucket.word_continues is None else bucket.word_continues[span],
            )
        )
        if bucket.spans is not None:
            spans.append(bucket.spans[start : last + 1])
    languages = None if bucket.languages is None else [bucket.languages[d] for d in donors]
    return Bucket.from_documents(fragments, languages, spans if bucket.spans is not None else None)


class RandomNexts(NamedTuple):
    """Where a document's random next segments come from: documents of its bucket, ascending."""

    documents: Sequence[int]  # the pool's fragments, or (from_pool False) the bucket's, the drawing one among them
    from_pool: bool
    other_language: bool = False  # none of its language were there: they are of any


def random_next_sources(bucket: Bucket, documents: int, pool: range | None) -> list[RandomNexts]:
    """Where each of the first `documents` documents of `bucket` draws its random next segments: the documents of
    the pool, or without one of the bucket, that are of its primary language or of an undetermined one. Where the
    pool holds none of them, the bucket's own other documents of the language; where there are none either, every
    document of the pool (or of the bucket), as where its own language is undetermined."""
    candidates = pool if pool is not None else range(len(bucket))
    if bucket.languages is None:
        return [RandomNexts(candidates, pool is not None)] * documents
    primary = [tag.split("-")[0] for tag in bucket.languages]
    unknown = ("", UNDETERMINED)
    fewest = 1 if pool is not None else 2  # without a pool, the drawing document is among them
    found: dict[str, RandomNexts] = {}
    for language in set(primary[:documents]):
        partners = (language, *unknown)
        same = [] if language in unknown else [d for d in candidates if primary[d] in partners]
        if language in unknown or len(same) == len(candidates):
            # every candidate: a range, so that the draws of a corpus of one language stay as they were
            found[language] = RandomNexts(candidates, pool is not None)
        elif len(same) >= fewest:
            found[language] = RandomNexts(same, pool is not None)
        elif pool is not None and len(own := [d for d in range(documents) if primary[d] == language]) > 1:
            found[language] = RandomNexts(own, from_pool=False)
        else:
            found[language] = RandomNexts(candidates, pool is not None, other_language=True)
    return [found[primary[d]] for d in range(documents)]


def create_instances_from_document(
    bucket: Bucket,
    doc: int,
    max_num_tokens: int,
    short_seq_prob: float,
    rng: random.Random,
    out: InstanceBatch,
    nexts: RandomNexts | None = None,
) -> None:
    """Append the instances of one pass over document `doc` of `bucket` to `out`. Random next segments come from
    `nexts`: the bucket's pseudo-documents of a pool (fragments of other buckets' documents, each from a random
    sentence), or its documents but `doc`, from a random sentence (by default, any of them)."""
    starts = bucket.starts_list
    first = bucket.first_list[doc]
    end = bucket.first_list[doc + 1]
    if end == first:
        return
    pool, others, num_others, own_at = None, range(len(bucket)), len(bucket) - 1, doc
    if nexts is not None and nexts.from_pool:
        pool = nexts.documents
    elif nexts is not None:
        others = nexts.documents
        num_others, own_at = len(others) - 1, bisect_left(others, doc)
    target = target_seq_length(max_num_tokens, short_seq_prob, rng)
    rand = rng.random
    add = out.rows.append

    chunk_start = first
    while chunk_start < end:
        # The chunk is sentences [chunk_start, i]: the shortest run that reaches the target, or the rest.
        i = min(bisect_left(starts, starts[chunk_start] + target, chunk_start + 1) - 1, end - 1)
        k = i + 1 - chunk_start
        is_random = out.next_label(rng)
        if is_random and not pool and num_others < 1:
            out.count("random_next_without_other_document")
            is_random = False
        elif not is_random and k < 2 and i + 1 == end and (pool or num_others >= 1) and out.random_instead():
            # A document's last sentence alone has no IsNext of its own: like the reference's one-sentence
            # chunks, it takes a random next, which fills the pair to the target length.
            is_random = True
        if is_random:
            a_end = chunk_start + (1 if k < 2 else 1 + int(rand() * (k - 1)))
            if pool:  # a fragment already starts at a random sentence of its document
                other = pool[int(rand() * len(pool))]
                o_first, o_end = bucket.first_list[other], bucket.first_list[other + 1]
                b_first = o_first
            else:
                pick = int(rand() * num_others)
                other = others[pick + (pick >= own_at)]
                o_first, o_end = bucket.first_list[other], bucket.first_list[other + 1]
                b_first = o_first + int(rand() * (o_end - o_first))
            b_last = _extend_to_length(starts, b_first, o_end, target - (starts[a_end] - starts[chunk_start]))
            add((starts[chunk_start], starts[a_end], starts[b_first], starts[b_last + 1], True))
            chunk_start = a_end  # put the unused sentences back
        elif k >= 2:
            a_end = chunk_start + 1 + int(rand() * (k - 1))
            add((starts[chunk_start], starts[a_end], starts[a_end], starts[i + 1], False))
            chunk_start = i + 1
        elif i + 1 < end:
            # One long sentence: B is what follows it in the document.
            b_last = _extend_to_length(starts, i + 1, end, target - (starts[i + 1] - starts[i]))
            add((starts[i], starts[i + 1], starts[i + 1], starts[b_last + 1], False))
            chunk_start = b_last + 1
        elif i > first:
            # The document's last sentence alone: it is the true next of the sentence before it.
            add((starts[i - 1], starts[i], starts[i], starts[i + 1], False))
            chunk_start = i + 1
        else:
            out.count("isnext_in_single_sentence_document")
            chunk_start = i + 1


def create_sop_instances_from_document(
    bucket: Bucket, doc: int, max_num_tokens: int, short_seq_prob: float, rng: random.Random, out: InstanceBatch
) -> None:
    """Append one pass's sentence-order pairs of document `doc` to `out` (ALBERT's SOP): chunks as for NSP, and B
    always the segment that really follows A in the document; the two are swapped where the label is 1. Labels
    come in balanced pairs, as NSP's do. A one-sentence document has no pair and counts as skipped."""
    starts = bucket.starts_list
    first = bucket.first_list[doc]
    end = bucket.first_list[doc + 1]
    if end - first < 2:
        if end > first:
            out.count("single_sentence_document")
        return
    target = target_seq_length(max_num_tokens, short_seq_prob, rng)
    chunk_start = first
    while chunk_start < end:
        i = min(bisect_left(starts, starts[chunk_start] + target, chunk_start + 1) - 1, end - 1)
        k = i + 1 - chunk_start
        if k >= 2:
            split = chunk_start + 1 + int(rng.random() * (k - 1))
            a, b = (starts[chunk_start], starts[split]), (starts[split], starts[i + 1])
            chunk_start = i + 1
        elif i + 1 < end:  # one long sentence: B is what follows it
            b_last = _extend_to_length(starts, i + 1, end, target - (starts[i + 1] - starts[i]))
            a, b = (starts[i], starts[i + 1]), (starts[i + 1], starts[b_last + 1])
            chunk_start = b_last + 1
        else:  # the document's last sentence alone: the true next of the sentence before it
            a, b = (starts[i - 1], starts[i]), (starts[i], starts[i + 1])
            chunk_start = i + 1
        swapped = out.next_label(rng)
        out.rows.append((*b, *a, True) if swapped else (*a, *b, False))


def _extend_to_length(starts: list[int], first: int, end: int, length: int) -> int:
    """Index of the last sentence of the run from `first` that reaches `length` tokens (at most `end` - 1)."""
    last = bisect_left(starts, starts[first] + max(length, 1), first + 1) - 1
    return min(last, end - 1)


def cut_long_sentences(lengths: np.ndarray, limit: int) -> tuple[np.ndarray, int]:
    """Sentence lengths (tokens) with every sentence of more than `limit` tokens cut into near-equal consecutive
    pieces of at most limit // 2 tokens, so that two of them can make a pair; and how many sentences were cut.

    A text whose boundaries no splitter finds (a script without stops, a long list) is otherwise one "sentence" that
    no instance holds whole: a single-sentence document that sentence-order prediction drops and that NSP can only
    truncate. Sentences up to `limit` tokens are left as they are."""
    long = lengths > limit
    if not long.any():
        return lengths, 0
    parts = sentence_parts(lengths, limit)
    first = np.repeat(np.cumsum(parts) - parts, parts)
    place = np.arange(len(first)) - first  # a piece's number within its sentence
    base, extra = np.repeat(lengths // parts, parts), np.repeat(lengths % parts, parts)
    return (base + (place < extra)).astype(lengths.dtype), int(long.sum())


def sentence_parts(lengths: np.ndarray, limit: int) -> np.ndarray:
    """How many pieces cut_long_sentences cuts each sentence into (1 for one it leaves whole)."""
    return np.where(lengths > limit, -(-lengths // max(1, limit // 2)), 1)


def truncated_lengths(len_a: np.ndarray, len_b: np.ndarray, max_num_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Final lengths after the reference's truncate_seq_pair, in closed form.

    The reference removes one token at a time from the longer segment (B on a tie) until the pair fits, so a
    much longer segment absorbs all the excess, and otherwise both end at half the budget (A gets the odd one).
    """
    excess = np.maximum(len_a + len_b - max_num_tokens, 0)
    balanced_a = (max_num_tokens + 1) // 2
    balanced_b = max_num_tokens // 2
    only_a = len_a - len_b >= excess
    only_b = ~only_a & (len_b - len_a >= excess)
    new_a = np.where(only_a, len_a - excess, np.where(only_b, len_a, balanced_a))
    new_b = np.where(only_a, len_b, np.where(only_b, len_b - excess, balanced_b))
    return new_a, new_b
