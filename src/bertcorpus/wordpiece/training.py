"""WordPiece vocabulary training: a deterministic HF WordPiece trainer and the vocab layouts, from the word counts
of wordpiece.word_counting (words exactly as `create` tokenises them).

HF's trainer (a BPE trainer whose vocab is then used greedily, as WordPiece) learns from word counts. Left to
itself it is not reproducible: continuation symbols (`##x`) get their ids in hash-map order, ties between equal
pair counts are broken by those ids, and a different tie order can change which tokens are learned at all.
Handing the trainer every symbol of the alphabet as a special token, in code-point order, fixes all ids before
the first merge; every later step is a function of the counts. The alphabet limit is applied here, with ties
broken by code point, for the same reason.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from bertcorpus.wordpiece.cjk import common_ideographs, is_ideograph, wide_forms
from bertcorpus.wordpiece.tokenizer import build_hf_tokenizer
from bertcorpus.wordpiece.vocab import PAD, SPECIAL_TOKENS, UNK, Vocab

# auto: bert-chinese where most of the words trained on are CJK ideographs, else bert.
LAYOUTS = ("auto", "bert", "bert-chinese", "compact")
BERT_LOW_UNUSED = 99  # the original layout puts [unused0..98] at ids 1..99, before [UNK]=100
BERT_DEFAULT_RESERVED = 994  # [unused0..993], as in the original vocab
# bert-base-chinese's layout: [PAD]=0, [unused1..99]=1..99, [UNK], [CLS], [SEP], [MASK]=100..103, then <S>, <T>.
CHINESE_EXTRA_TOKENS = ("<S>", "<T>")
# A CJK ideograph seen this often gets a line whatever --limit-alphabet says: Chinese needs thousands of them.
MIN_IDEOGRAPH_COUNT = 2
# HF keeps pair counts in 32-bit signed integers; no symbol may occur 2**31 times in what the trainer sees.
_PAIR_COUNT_LIMIT = 2**30
# The trainer is fed every word occurrence, so its time grows with the corpus; above this many occurrences the
# counts are scaled down instead (docs/vocab.md, "Trainer limits").
TRAINER_WORD_BUDGET = 2**30
_FEED_WORDS = 1024  # words per string handed to the trainer: long enough to amortise the call


class TrainingError(ValueError):
    """Counts or settings that cannot give the requested vocab; the message says what to change."""


@dataclass(frozen=True)
class TrainingConfig:
    vocab_size: int = 30000
    lowercase: bool = True
    layout: str = "bert"
    reserved_tokens: int = BERT_DEFAULT_RESERVED
    min_frequency: int = 2
    limit_alphabet: int = 1000
    pad_to_multiple: int = 1  # [unusedN] lines after the vocab_size lines, up to a multiple of this (tensor cores)
    min_ideograph_count: int = MIN_IDEOGRAPH_COUNT
    fill_to_size: bool = False  # [unusedN] lines after the learned tokens up to vocab_size, where fewer are learned

    @property
    def seeded_characters(self) -> frozenset[str]:
        """The characters that get lines whether the text holds them or not, in the bert-chinese layout: the
        everyday ideographs of both scripts, and the full-width and small forms (lower-cased for an uncased vocab,
        as its words are)."""
        if self.layout != "bert-chinese":
            return frozenset()
        return common_ideographs() | self._wide_forms

    @property
    def seeded_continuations(self) -> frozenset[str]:
        """The seeded characters that also get a ## line: those a word goes on with (the ９ of １９９６), which the
        pre-tokeniser does not split off as punctuation."""
        return word_characters(self._wide_forms) if self.layout == "bert-chinese" else frozenset()

    @property
    def _wide_forms(self) -> frozenset[str]:
        return frozenset(c.lower() for c in wide_forms()) if self.lowercase else wide_forms()

    def head(self) -> list[str]:
        """The lines before the learned tokens: special tokens and reserved [unusedN] slots."""
        if self.layout == "bert-chinese":
            unused = [f"[unused{i}]" for i in range(1, BERT_LOW_UNUSED + 1)]
            return [PAD, *unused, *SPECIAL_TOKENS[1:], *CHINESE_EXTRA_TOKENS]
        unused = [f"[unused{i}]" for i in range(self.reserved_tokens)]
        if self.layout == "bert":
            return [PAD, *unused[:BERT_LOW_UNUSED], *SPECIAL_TOKENS[1:], *unused[BERT_LOW_UNUSED:]]
        return [*SPECIAL_TOKENS, *unused]

    def for_words(self, counts: dict[str, int]) -> TrainingConfig:
        """The config with an auto layout made concrete: bert-chinese where most words trained on are CJK
        ideographs (by occurrence), bert otherwise."""
        if self.layout != "auto":
            return self
        ideographs = sum(n for w, n in counts.items() if len(w) == 1 and is_ideograph(w))
        chinese = ideographs * 2 > sum(counts.values())
        return dataclasses.replace(self, layout="bert-chinese" if chinese else "bert")

    def check(self) -> None:
        """Settings errors that need no counts."""
        if self.layout not in LAYOUTS:
            raise TrainingError(f"unknown layout {self.layout!r}; choose one of {', '.join(LAYOUTS)}")
        if self.reserved_tokens < 0:
            raise TrainingError("--reserved-tokens must be >= 0")
        if self.layout in ("bert", "auto") and self.reserved_tokens < BERT_LOW_UNUSED:
            raise TrainingError(
                f"--layout bert needs at least {BERT_LOW_UNUSED} reserved tokens (they hold ids "
                f"1..{BERT_LOW_UNUSED} so that [UNK] is 100 and [MASK] 103); "
                "use --layout compact for fewer"
            )
        if self.min_frequency < 1 or self.limit_alphabet < 1 or self.min_ideograph_count < 1:
            raise TrainingError("--min-frequency, --limit-alphabet and --min-ideograph-count must be >= 1")
        if self.pad_to_multiple < 1:
            raise TrainingError(f"--pad-to-multiple must be at least 1, not {self.pad_to_multiple}")
        if self.vocab_size <= len(self.head()):
            raise TrainingError(
                f"--vocab-size {self.vocab_size} leaves no room for learned tokens after the "
                f"{len(self.head())} special and reserved lines"
            )


@functools.cache
def word_characters(chars: frozenset[str]) -> frozenset[str]:
    """The characters that BertPreTokenizer keeps inside a word (not punctuation, not whitespace)."""
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return frozenset(c for c in chars if len(pre_tokenizer.pre_tokenize_str("a" + c)) == 1)


@dataclass
class Alphabet:
    """The symbols every word is built from, and what the alphabet limit removed."""

    chars: list[str]  # single characters, in code-point order
    continuations: list[str]  # "##c" for every c that occurs after a word's first character
    dropped_chars: int
    dropped_words: int  # distinct words holding a dropped character
    dropped_occurrences: int
    max_symbol_count: int  # occurrences of the most frequent symbol, for the overflow guard

    @property
    def symbols(self) -> list[str]:
        return self.chars + self.continuations


def symbol_counts(counts: dict[str, int]) -> tuple[Counter, Counter]:
    """(occurrences of each character as a word's first character, occurrences after the first).

    Words are grouped by count so that Counter does the character work in C, once per distinct count value.
    """
    by_count: dict[int, list[str]] = {}
    for word, count in counts.items():
        by_count.setdefault(count, []).append(word)
    first: Counter = Counter()
    rest: Counter = Counter()
    for count, words in by_count.items():
        for ch, n in Counter(w[0] for w in words).items():
            first[ch] += n * count
        for ch, n in Counter("".join(w[1:] for w in words)).items():
            rest[ch] += n * count
    return first, rest


def plan_alphabet(
    counts: dict[str, int],
    limit: int,
    pruned: tuple[Counter, Counter] = (Counter(), Counter()),
    min_ideograph_count: int = MIN_IDEOGRAPH_COUNT,
    seeded: frozenset[str] = frozenset(),
    seeded_continuations: frozenset[str] = frozenset(),
) -> tuple[dict[str, int], Alphabet]:
    """Where there are more than `limit` characters, keep the `limit` most frequent of those that are neither CJK
    ideographs nor `seeded` (ties: lower code point first) and every ideograph seen at least `min_ideograph_count`
    times, and the words made of those; and the `seeded` characters, seen or not, with a ## line for those of
    `seeded_continuations`.

    A word holding a dropped character tokenises to [UNK] as a whole, so it is left out of training instead
    of being trained on with the character cut out (which is what HF's own limit does). `pruned` holds the
    symbol counts of words pruned while counting: their characters belong to the alphabet too. An ideograph is
    a word of its own (the tokenizer splits them), so keeping one costs one line and no continuation.
    """
    first, rest = symbol_counts(counts)
    total = first + rest + pruned[0] + pruned[1]
    dropped: set[str] = set()
    dropped_words = dropped_occurrences = 0
    if len(total) > limit:
        # Ideographs do not count against the limit: each is a token of its own, and Chinese needs thousands. Nor
        # do the seeded characters, which stay whatever their count.
        others = [ch for ch in total if not is_ideograph(ch) and ch not in seeded]
        dropped = set(sorted(others, key=lambda ch: (-total[ch], ord(ch)))[limit:])
        dropped |= {ch for ch in total if is_ideograph(ch) and total[ch] < min_ideograph_count}
        kept = {}
        for word, count in counts.items():
            if dropped.isdisjoint(word):
                kept[word] = count
            else:
                dropped_words += 1
                dropped_occurrences += count
        counts = kept
        first, rest = symbol_counts(counts)
    chars = sorted((total.keys() - dropped) | seeded, key=ord)
    continuations = sorted((rest.keys() | pruned[1].keys() | seeded_continuations) - dropped, key=ord)
    alphabet = Alphabet(
        chars=chars,
        continuations=["##" + c for c in continuations],
        dropped_chars=len(dropped),
        dropped_words=dropped_words,
        dropped_occurrences=dropped_occurrences,
        max_symbol_count=max([*first.values(), *rest.values(), 0]),
    )
    return counts, alphabet


def trainer_scale(total_words: int, max_symbol_count: int) -> int:
    """1, or the power of two that the counts are divided by before training (huge corpora only)."""
    scale = 1
    while total_words > TRAINER_WORD_BUDGET * scale or max_symbol_count >= _PAIR_COUNT_LIMIT * scale:
        scale *= 2
    return scale


def feed_words(counts: dict[str, int], scale: int) -> Iterator[str]:
    """Each word repeated count/scale times (rounded), ~_FEED_WORDS words per string."""
    buffer: list[str] = []
    buffered = 0
    for word, count in counts.items():
        count = (count + scale // 2) // scale
        piece = word + " "
        if count >= _FEED_WORDS:
            block = piece * _FEED_WORDS
            for _ in range(count // _FEED_WORDS):
                yield block
            count %= _FEED_WORDS
        if count:
            buffer.append(piece * count)
            buffered += count
            if buffered >= _FEED_WORDS:
                yield "".join(buffer)
                buffer, buffered = [], 0
    if buffer:
        yield "".join(buffer)


@dataclass
class TrainedVocab:
    tokens: list[str]  # every line of vocab.txt, in id order
    learned: int  # tokens from training, alphabet included
    padding: int  # [unusedN] lines added, with fill_to_size, because training learned fewer tokens than asked
    alphabet: Alphabet
    trained_words: int  # distinct words the trainer saw
    scale: int
    aligned: int = 0  # [unusedN] lines after those, up to a multiple of pad_to_multiple
    short: int = 0  # lines the trainer could not fill: vocab_size less the lines made (padding fills them on request)
    layout: str = "bert"  # the layout made (auto resolved)

    @property
    def filler(self) -> int:
        """[unusedN] lines: reserved slots, padding and alignment."""
        return sum(1 for t in self.tokens if t.startswith("[unused") and t.endswith("]"))

    def file_bytes(self) -> bytes:
        return ("\n".join(self.tokens) + "\n").encode("utf-8")


def train(
    counts: dict[str, int], config: TrainingConfig, pruned: tuple[Counter, Counter] = (Counter(), Counter())
) -> TrainedVocab:
    """A vocab of exactly config.vocab_size lines from word counts; the same counts give the same vocab.

    `pruned`: symbol counts of words dropped while counting (WordCounter.pruned_symbols).
    """
    config = config.for_words(counts)
    config.check()
    head = config.head()
    budget = config.vocab_size - len(head)
    counts, alphabet = plan_alphabet(
        counts,
        config.limit_alphabet,
        pruned,
        config.min_ideograph_count,
        config.seeded_characters,
        config.seeded_continuations,
    )
    if not counts:
        raise TrainingError("there are no words to train on")
    if len(alphabet.symbols) > budget:
        raise TrainingError(
            f"--vocab-size {config.vocab_size} is too small: after the {len(head)} special and reserved lines "
            f"{budget} remain, but the alphabet alone needs {len(alphabet.symbols)} ({len(alphabet.chars)} "
            f"characters + {len(alphabet.continuations)} continuations); raise --vocab-size or lower "
            "--limit-alphabet"
        )
    scale = trainer_scale(sum(counts.values()), alphabet.max_symbol_count)
    tokenizer = Tokenizer(models.WordPiece(unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordPieceTrainer(
        vocab_size=budget,
        min_frequency=math.ceil(config.min_frequency / scale),
        show_progress=False,
        special_tokens=alphabet.symbols,
        continuing_subword_prefix="##",
    )
    tokenizer.train_from_iterator(feed_words(counts, scale), trainer)
    ids = tokenizer.get_vocab()
    learned = sorted(ids, key=ids.__getitem__)
    if learned[: len(alphabet.symbols)] != alphabet.symbols:
        raise RuntimeError("the trainer did not keep the alphabet's ids")
    short = budget - len(learned)
    padding = short if config.fill_to_size else 0
    aligned = -(len(head) + len(learned) + padding) % config.pad_to_multiple
    first_unused = BERT_LOW_UNUSED + 1 if config.layout == "bert-chinese" else config.reserved_tokens
    unused = first_unused + np.arange(padding + aligned)
    tokens = head + learned + [f"[unused{i}]" for i in unused.tolist()]
    if len(set(tokens)) != len(tokens):
        raise RuntimeError("the trained vocab holds a token twice")
    return TrainedVocab(
        tokens=tokens,
        learned=len(learned),
        padding=padding,
        alphabet=alphabet,
        trained_words=len(counts),
        scale=scale,
        aligned=aligned,
        short=short,
        layout=config.layout,
    )


# --------------------------------------------------------------------------------------------- measurement


@dataclass
class Quality:
    words: int  # held-out word occurrences measured
    unk_rate: float  # share of those words that become [UNK]
    pieces_per_word: float

    @property
    def unk_token_share(self) -> float:
        """Share of the wordpieces that are [UNK]: a word that becomes [UNK] is one piece."""
        return self.unk_rate / self.pieces_per_word if self.pieces_per_word else 0.0

    def record(self) -> dict:
        """The manifest's figures for a language (None where nothing was measured)."""
        measured = self.words > 0
        return {
            "unk_word_rate": round(self.unk_rate, 6) if measured else None,
            "unk_token_share": round(self.unk_token_share, 6) if measured else None,
            "pieces_per_word": round(self.pieces_per_word, 4) if measured else None,
        }


def measure(tokens: list[str], held_out: dict[str, int], batch: int = 100_000) -> Quality:
    """[UNK] rate and wordpieces per word of held-out word counts under a vocab.

    The words are already normalised and pre-tokenised, so only the WordPiece model of the shared tokenizer
    configuration is applied to them (its normaliser, cased or not, is replaced by none).
    """
    vocab = Vocab(tuple(tokens), "")
    tokenizer = build_hf_tokenizer(vocab, lowercase=False)
    tokenizer.normalizer = None
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    unk_id = vocab.id_of(UNK)
    words = list(held_out)
    total = unknown = pieces = 0
    for start in range(0, len(words), batch):
        part = words[start : start + batch]
        counts = np.fromiter((held_out[w] for w in part), np.int64, len(part))
        encoding = tokenizer.encode(" ".join(part), add_special_tokens=False)
        owner = np.asarray(encoding.word_ids, np.int64)
        per_word = np.bincount(owner, minlength=len(part))
        unk = np.bincount(owner, weights=np.asarray(encoding.ids) == unk_id, minlength=len(part)) > 0
        total += int(counts.sum())
        pieces += int((per_word * counts).sum())
        unknown += int(counts[unk].sum())
    if not total:
        return Quality(0, 0.0, 0.0)
    return Quality(total, unknown / total, pieces / total)
