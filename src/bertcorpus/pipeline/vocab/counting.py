"""The word counting of `bertcorpus vocab`: which documents and lines count for what, and the one counting step
that both of its drivers run.

    document ─ sampled? (id hash) ─ each line: held out? (seeded draws) ─ text batches ─ word counts
                                                                            ├─ training words
                                                                            └─ held-out words ─ [UNK] rate

What a word is depends on the model trained. For WordPiece, the words the reference's BasicTokenizer gives
(wordpiece/training.py, ChunkBatch), training and held-out alike. For byte-level BPE and Unigram, the text is cut
into the sentences create encodes apart, each with the whitespace before it (transforms/sentence_spans.py), and a
training word is a pre-token as the tokenizer's own pre-tokeniser gives it (`Ġthe`, `▁the`), a held-out one a unit
of text that the trained tokenizer encodes as create would (wordpiece/pre_tokens.py).

`DocumentCounter` does the work for one stream of documents. It runs in this process (count_in_process: files in
input order, a progress line, --max-documents) or inside the Beam job of pipeline/vocab/job.py
(--count-with-beam: files in spans, many workers). Both drivers stay: on one machine the Beam job spends more
CPU for the same counts, most of all on small inputs, and it has no input order to stop in (the figures are in
docs/benchmarks.md).

The held-out sample is lines, not whole documents: a share of the lines of every sampled document, drawn from a
generator seeded with a stable hash of (seed, document id), so it spreads over the corpus even when the corpus
has few documents, and every run and driver draws the same lines. Words never span a newline, so taking lines
out changes no word.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

import numpy as np

from bertcorpus.pipeline.engines.progress import Progress
from bertcorpus.pipeline.inputs.formats import ReadStats, Rejected
from bertcorpus.pipeline.inputs.reads import read_documents
from bertcorpus.transforms.language_sampling import sampling_rates, smoothed_shares
from bertcorpus.transforms.languages import UNDETERMINED
from bertcorpus.transforms.seeding import stable_hash, unit_interval
from bertcorpus.transforms.sentence_spans import text_pieces as sentence_pieces
from bertcorpus.wordpiece.pre_tokens import MAX_PRE_TOKEN_CHARS, PreTokenBatch
from bertcorpus.wordpiece.subword_vocab import SubwordConfig
from bertcorpus.wordpiece.tokenizer import MAX_CHARS_PER_WORD
from bertcorpus.wordpiece.training import TrainingConfig
from bertcorpus.wordpiece.word_counting import ChunkBatch, HeldOutWords, WordCounter

TRAIN, HELD_OUT = "train", "heldout"
WORDPIECE = "wordpiece"
PIECE_CHARS = 1 << 20  # text handed to a chunk batch at a time (text_pieces)
_MASK64 = (1 << 64) - 1


@dataclass
class VocabConfig:
    inputs: list[str]
    output: str
    training: TrainingConfig | SubwordConfig  # WordPiece's, or byte-level BPE's and Unigram's
    input_format: str = "auto"
    sample_fraction: float = 1.0
    max_documents: int = 0  # 0 = no limit
    holdout_fraction: float = 0.01  # of the lines of the sampled documents
    seed: int = 12345
    max_words: int = 1_000_000  # distinct words held while counting and trained on
    batch_chars: int = 1 << 25  # text per chunk batch before it becomes word counts
    count_with_beam: bool = False
    counts_dir: str | None = None
    # Each language's word counts scaled to its smoothed share p^alpha (renormalised) before training, as
    # multilingual BERT's vocab was (transforms/language_sampling.py); 1 counts every word as it comes.
    language_sampling_alpha: float = 1.0

    def describe(self) -> dict:
        d = asdict(self)
        d.pop("batch_chars")
        return {**d, "model": self.model}

    @property
    def model(self) -> str:
        return self.training.model if isinstance(self.training, SubwordConfig) else WORDPIECE

    @property
    def max_word_chars(self) -> int:
        """The longest word trained on: WordPiece makes a longer one [UNK] whatever the vocab."""
        return MAX_CHARS_PER_WORD if self.model == WORDPIECE else MAX_PRE_TOKEN_CHARS


def word_batch(cfg: VocabConfig, role: str) -> ChunkBatch | PreTokenBatch:
    """What counts the words of a role's text: WordPiece's words, or a BPE's or Unigram's pre-tokens for training and
    units for the held-out measure."""
    if cfg.model == WORDPIECE:
        return ChunkBatch(cfg.training.lowercase, cfg.batch_chars)
    return PreTokenBatch(cfg.model, cfg.training.lowercase, _sentences, role == TRAIN, cfg.batch_chars)


def _sentences(text: str) -> list[str]:
    """The pieces of text create encodes apart: each sentence with the whitespace before it."""
    return sentence_pieces(text)[0] if text.strip() else []


def is_sampled(doc_id: str, cfg: VocabConfig) -> bool:
    """Whether --sample-fraction keeps the document, from a stable hash of its id alone."""
    return cfg.sample_fraction >= 1 or unit_interval(cfg.seed, "vocab-sample", doc_id) < cfg.sample_fraction


# The held-out draws come from a 64-bit linear congruential generator (Knuth's MMIX constants: full period 2**64),
# seeded per document. Integer arithmetic only, so the draws are the same on every platform; and its k-th state is
# a**k * seed + c_k, so a document's draws for all its lines come from one numpy multiply-add.
_LCG_A, _LCG_C = 6364136223846793005, 1442695040888963407
# Fewer lines are drawn one at a time, where numpy's cost per call would outweigh the loop.
_DRAW_AT_ONCE_FROM = 32
_jumps = (np.array([_LCG_A], np.uint64), np.array([_LCG_C], np.uint64))  # (a**k, c_k) for k = 1, 2, ...


def _jump_table(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(a**k, c_k) for k = 1..n, the table grown by doubling: k + j steps are j steps after k."""
    global _jumps
    powers, sums = _jumps
    while len(powers) < n:
        last_power, last_sum = powers[-1], sums[-1]
        powers, sums = np.concatenate([powers, powers * last_power]), np.concatenate([sums, powers * last_sum + sums])
    _jumps = powers, sums
    return powers[:n], sums[:n]


def _draws_one_by_one(seed: int, n: int, below: int) -> list[int]:
    state, chosen = seed, []
    for i in range(n):
        state = (state * _LCG_A + _LCG_C) & _MASK64
        if state < below:
            chosen.append(i)
    return chosen


def _draws_at_once(seed: int, n: int, below: int) -> list[int]:
    powers, sums = _jump_table(n)
    return np.flatnonzero(powers * np.uint64(seed) + sums < np.uint64(below)).tolist()


def held_out_line_numbers(doc_id: str, lines: int, cfg: VocabConfig) -> list[int]:
    """The numbers of the lines held out of a document with so many lines: each with probability
    --holdout-fraction, from draws seeded with a stable hash of (seed, document id)."""
    seed = stable_hash(cfg.seed, "vocab-heldout", doc_id)
    below = int(cfg.holdout_fraction * 2.0**64)
    draw = _draws_at_once if lines >= _DRAW_AT_ONCE_FROM else _draws_one_by_one
    return draw(seed, lines, below)


def split_held_out(doc_id: str, text: str, cfg: VocabConfig) -> tuple[str, list[str]]:
    """(the text to train on, the held-out lines that hold text)."""
    if cfg.holdout_fraction <= 0:
        return text, []
    held_out = held_out_line_numbers(doc_id, text.count("\n") + 1, cfg)
    if not held_out:
        return text, []
    lines = text.split("\n")
    chosen = set(held_out)
    kept = [line for i, line in enumerate(lines) if i not in chosen]
    return "\n".join(kept), [lines[i] for i in held_out if lines[i].strip()]


def document_text(doc) -> str:
    return doc.text if doc.text is not None else "\n".join(doc.sentences)


def text_pieces(text: str, size: int = PIECE_CHARS) -> Iterator[str]:
    """text in pieces of about size characters, each cut just before a space or a newline, so that a huge document
    (a JSONL line of 100 MB) is split into words a piece at a time, with the same words: cleaning, lower-casing
    and the split never look across a space or a newline."""
    start = 0
    while len(text) - start > size:
        cut = max(text.rfind(" ", start + 1, start + size), text.rfind("\n", start + 1, start + size))
        if cut < 0:  # one word longer than size: cut after it
            ahead = [i for i in (text.find(" ", start + size), text.find("\n", start + size)) if i >= 0]
            if not ahead:
                break
            cut = min(ahead)
        yield text[start:cut]
        start = cut
    yield text[start:]


class DocumentCounter:
    """Documents → (role, word counts) of each text batch that fills up, and tallies of the documents and lines.

    A batch lasts as long as the counter: a Beam worker keeps one through its whole bundle of spans, since each
    drain sends every distinct word of its batch on, and draining per span would multiply that work.

    `by_language` counts each language apart: the role is then "role:language", and the batches are drained
    whenever the documents' language changes (inputs usually come a language at a time: one dump each)."""

    def __init__(self, cfg: VocabConfig, by_language: bool = False):
        self.cfg = cfg
        self.batches = {role: word_batch(cfg, role) for role in (TRAIN, HELD_OUT)}
        self.tallies: Counter = Counter()
        self.by_language = by_language
        self.language: str | None = None

    def add(self, doc) -> Iterator[tuple[str, Counter]]:
        self.tallies["documents_read"] += 1
        if not is_sampled(doc.id, self.cfg):
            self.tallies["documents_unsampled"] += 1
            return
        self.tallies["documents_sampled"] += 1
        if self.by_language and (doc.language or UNDETERMINED) != self.language:
            yield from self.drain()
            self.language = doc.language or UNDETERMINED
        train_text, held_out = split_held_out(doc.id, document_text(doc), self.cfg)
        if held_out:
            self.tallies["heldout_documents"] += 1
            self.tallies["heldout_lines"] += len(held_out)
        for role, text in ((TRAIN, train_text), (HELD_OUT, "\n".join(held_out))):
            for piece in text_pieces(text):
                if self.batches[role].add(piece):
                    yield self._role(role), self.batches[role].drain()

    def drain(self) -> Iterator[tuple[str, Counter]]:
        for role, batch in self.batches.items():
            yield self._role(role), batch.drain()

    def _role(self, role: str) -> str:
        return f"{role}:{self.language}" if self.by_language and self.language else role


@dataclass
class CorpusCounts:
    """What counting produced, whichever driver ran."""

    train: WordCounter
    held_out: HeldOutWords
    tallies: Counter = field(default_factory=Counter)  # documents_read, _sampled, _unsampled, heldout_lines, ...
    files: list[dict] = field(default_factory=list)
    files_not_read: int = 0  # files left unopened at --max-documents
    # By language, from a DocumentCounter by_language: the held-out words (to measure the vocab on each), and, to
    # smooth them, the training words (train holds them only once smoothed_training has run).
    held_out_by_language: dict[str, HeldOutWords] = field(default_factory=dict)
    train_by_language: dict[str, WordCounter] | None = None

    def add(self, role: str, words: Counter) -> None:
        role, _, language = role.partition(":")
        if role == HELD_OUT:
            self.held_out.add_counts(words)
            if language:
                held = self.held_out_by_language.setdefault(language, HeldOutWords(self.held_out.max_words))
                held.add_counts(words)  # neither add_counts keeps or changes what it is given
        elif language and self.train_by_language is not None:
            if language not in self.train_by_language:
                self.train_by_language[language] = WordCounter(self.train.max_words, self.train.max_chars)
            self.train_by_language[language].add_counts(words)
        else:
            self.train.add_counts(words)

    def smoothed_training(self, alpha: float) -> dict[str, dict]:
        """Merge the languages' training words into `train`, each language's counts scaled by its smoothed share
        of the words over its own share (p^alpha renormalised, over p: the total stays the same), rounded, words
        scaled to nothing dropped; returns {language: {words, share, smoothed_share, scale}}."""
        by_language = self.train_by_language or {}
        words = {language: counter.words for language, counter in sorted(by_language.items())}
        targets, rates = smoothed_shares(words, alpha), sampling_rates(words, alpha)
        total = sum(words.values())
        merged: Counter = Counter()
        report = {}
        for language, counter in sorted(by_language.items()):
            scale = rates.get(language, 0.0)
            for word, n in counter.counts.items():
                merged[word] += n * scale
            self.train.pruned_symbols[0].update(counter.pruned_symbols[0])
            self.train.pruned_symbols[1].update(counter.pruned_symbols[1])
            self.train.too_long += counter.too_long
            self.train.pruned_words += counter.pruned_words
            self.train.pruned_occurrences += counter.pruned_occurrences
            report[language] = {
                "words": words[language],
                "share": round(words[language] / total, 6) if total else 0.0,
                "smoothed_share": round(targets.get(language, 0.0), 6),
                "scale": round(scale, 6),
            }
        rounded = Counter({word: round(n) for word, n in sorted(merged.items()) if round(n) > 0})
        self.train.add_counts(rounded)  # the languages' counters dropped the long words: none is counted again
        self.train.words = total  # the corpus's words, before scaling
        return report


def file_entry(stats: ReadStats) -> dict:
    return asdict(stats)


def count_in_process(files: list[tuple[str, int]], cfg: VocabConfig) -> CorpusCounts:
    """Stream every document once, in input order, with the progress of bytes read on stderr; each language's
    held-out words apart, and its training words too where they are to be smoothed."""
    result = CorpusCounts(WordCounter(cfg.max_words, cfg.max_word_chars), HeldOutWords(cfg.max_words))
    if cfg.language_sampling_alpha != 1:
        result.train_by_language = {}
    counter = DocumentCounter(cfg, by_language=True)

    def enough() -> bool:
        return bool(cfg.max_documents) and counter.tallies["documents_sampled"] >= cfg.max_documents

    with Progress(sum(size for _, size in files), "counting words") as progress:
        for path, _ in files:
            if enough():
                result.files_not_read += 1
                continue
            stats = ReadStats(path)
            shown = 0
            documents = read_documents(path, cfg.input_format, stats)
            for doc in documents:
                if isinstance(doc, Rejected):  # counted in stats.errors; vocab writes no dead letters
                    continue
                for role, words in counter.add(doc):
                    result.add(role, words)
                progress.update(stats.size - shown)
                shown = stats.size
                if enough():
                    break
            documents.close()  # finishes the file's fingerprint when reading stopped early
            progress.update(stats.size - shown)
            result.files.append(file_entry(stats))
    for role, words in counter.drain():
        result.add(role, words)
    result.tallies = counter.tallies
    return result
