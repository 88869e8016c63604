"""The tokenizer of `vocab --model bpe|unigram`: its settings, its training from pre-token counts, the ids it lays
its tokens out in, and the tokenizer.json that holds it all.

    ids  special tokens (special_sets.py) · learned tokens · reserved ids · ids to a multiple of --pad-to-multiple
         · RoBERTa's <mask>, the last

The learned tokens come from bpe_training.py (the 256 byte characters, then a token per merge) or unigram_training.py
(SentencePiece's pieces, with their scores). The normaliser, pre-tokeniser and decoder are pre_tokens.py's, the ones
the counting used, and the templates special_sets.py's.

In a Unigram model the special and reserved tokens are pieces too (a Unigram model's ids are its pieces'). Their text
in a document must still be text (create encodes a special token's text as the characters it is), so they get a
score no path of ordinary pieces is as low as, and their characters are in the alphabet whatever the counts: a
lattice always has a path of ordinary pieces through their text (as the byte pieces, which byte fallback finds by
name). XLM-R's file gives them 0.0, the highest score a piece can have, which makes the text `<s>` its id 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenizers import Tokenizer, models

from bertcorpus.wordpiece import pre_tokens
from bertcorpus.wordpiece.bpe_training import train_bpe
from bertcorpus.wordpiece.pre_tokens import BPE, UNIGRAM
from bertcorpus.wordpiece.special_sets import ROBERTA, SPECIAL_SETS, SpecialSet, added_tokens, post_processor
from bertcorpus.wordpiece.unigram_training import DEFAULT_CHARACTER_COVERAGE, check_trainer, train_unigram

MODELS = (BPE, UNIGRAM)
# The score of a Unigram model's special, reserved and byte pieces: far below any path of ordinary pieces through
# their text (a thousand characters at the lowest score SentencePiece gives, about -20, are -20,000).
APART_SCORE = -1e6


class SubwordError(ValueError):
    """Settings or counts that cannot give the requested tokenizer; the message says what to change."""


@dataclass(frozen=True)
class SubwordConfig:
    model: str = BPE
    vocab_size: int = 30000
    special_tokens: str = ROBERTA
    reserved_tokens: int = 0
    pad_to_multiple: int = 1
    lowercase: bool = False
    min_frequency: int = 2  # bpe: least count of a pair to merge it
    byte_fallback: bool = False  # unigram: a character outside the alphabet as its UTF-8 bytes, not the unknown token
    character_coverage: float = DEFAULT_CHARACTER_COVERAGE  # unigram: share of the text's characters in the alphabet

    @property
    def specials(self) -> SpecialSet:
        return SPECIAL_SETS[self.special_tokens]

    @property
    def learned_size(self) -> int:
        """The ids left for learned tokens: the vocab size less the special and reserved ones."""
        return self.vocab_size - len(self.specials.tokens) - self.reserved_tokens

    def check(self) -> None:
        """Settings errors that need no counts."""
        if self.pad_to_multiple < 1:
            raise SubwordError(f"--pad-to-multiple must be at least 1, not {self.pad_to_multiple}")
        if self.reserved_tokens < 0:
            raise SubwordError("--reserved-tokens must be >= 0")
        if self.min_frequency < 1:
            raise SubwordError("--min-frequency must be >= 1")
        if not 0 < self.character_coverage <= 1:
            raise SubwordError(f"--character-coverage must be in (0, 1], not {self.character_coverage:g}")
        if self.model == UNIGRAM:
            check_trainer()
        alphabet = 256 if self.model == BPE or self.byte_fallback else 1
        if self.learned_size <= alphabet:
            raise SubwordError(
                f"--vocab-size {self.vocab_size} leaves {max(self.learned_size, 0)} ids for learned tokens after the "
                f"{len(self.specials.tokens)} special and {self.reserved_tokens} reserved ones"
                + (f", and the {alphabet} byte tokens alone need {alphabet}" if alphabet > 1 else "")
                + "; raise --vocab-size"
            )


@dataclass
class SubwordVocab:
    tokenizer: Tokenizer
    tokens: list[str]  # every id's token
    learned: int
    reserved: int  # --reserved-tokens ids
    aligned: int  # reserved ids after those, up to a multiple of --pad-to-multiple
    short: int  # ids the trainer could not fill: the learned size less the tokens learned
    scale: int = 1  # the power of two the counts were divided by for the trainer
    trained_words: int = 0  # distinct pre-tokens trained on
    specials: dict[str, int] = field(default_factory=dict)  # role → id
    byte_pieces: frozenset[int] | None = None  # a Unigram model's byte pieces (none without byte fallback)

    def json_bytes(self) -> bytes:
        return self.tokenizer.to_str(pretty=True).encode() + b"\n"


def train_subword(counts: dict[str, int], config: SubwordConfig) -> SubwordVocab:
    """A tokenizer from pre-token counts (pre_tokens.PreTokenBatch); the same counts give the same bytes."""
    config.check()
    counts = {word: n for word, n in counts.items() if n > 0}
    if not counts:
        raise SubwordError("there are no words to train on")
    specials = config.specials
    if config.model == BPE:
        learned = train_bpe(counts, config.learned_size, config.min_frequency)
        tokens, scale = learned.tokens, learned.scale
    else:
        apart = [*specials.tokens, *specials.reserved(0, config.reserved_tokens)]
        learned = train_unigram(
            counts,
            config.learned_size,
            unk_token=specials.token("unk"),
            kept_apart=[t for t in apart if t != specials.token("unk")],
            required_chars=required_characters(config),
            byte_fallback=config.byte_fallback,
            character_coverage=config.character_coverage,
        )
        tokens, scale = [piece for piece, _ in learned.pieces], learned.scale
    ids, aligned = layout(config, tokens)
    if len(set(ids)) != len(ids):
        raise RuntimeError("the trained vocab holds a token twice")
    leading, trailing = len(specials.leading), len(specials.trailing)
    if config.model == BPE:
        model = models.BPE(vocab={t: i for i, t in enumerate(ids)}, merges=learned.merges, fuse_unk=False)
    else:
        scores = {piece: score for piece, score in learned.pieces if piece not in learned.bytes}
        vocab = [(t, scores.get(t, APART_SCORE)) for t in ids]
        model = models.Unigram(vocab, ids.index(specials.token("unk")), config.byte_fallback)
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = pre_tokens.normalizer(config.model, config.lowercase)
    tokenizer.pre_tokenizer = pre_tokens.pre_tokenizer(config.model)
    tokenizer.decoder = pre_tokens.decoder(config.model, config.byte_fallback)
    position = {t: i for i, t in enumerate(ids)}
    tokenizer.post_processor = post_processor(specials, position)
    tokenizer.add_special_tokens(added_tokens(specials, ids[leading + len(tokens) : len(ids) - trailing]))
    return SubwordVocab(
        tokenizer=tokenizer,
        tokens=ids,
        learned=len(tokens),
        reserved=config.reserved_tokens,
        aligned=aligned,
        short=config.learned_size - len(tokens),
        scale=scale,
        trained_words=len(counts),
        specials={role: position[token] for role, token in specials.roles},
        byte_pieces=None if config.model == BPE else frozenset(position[t] for t in learned.bytes),
    )


def required_characters(config: SubwordConfig) -> str:
    """The characters of every piece a Unigram model keeps apart: its special tokens, its reserved ones (those
    --pad-to-multiple adds too, so every digit) and its byte pieces, in code-point order."""
    names = [*config.specials.tokens, config.specials.reserved_name.replace("{}", "0123456789")]
    if config.byte_fallback:
        names.append("<0x0123456789ABCDEF>")
    return "".join(sorted(set("".join(names))))


def layout(config: SubwordConfig, learned: list[str]) -> tuple[list[str], int]:
    """Every id's token: the leading special tokens, the learned ones, the reserved ones with those that make the
    count a multiple of --pad-to-multiple, and the trailing special tokens; and how many were added for the
    multiple."""
    specials = config.specials
    before = len(specials.leading) + len(learned) + config.reserved_tokens + len(specials.trailing)
    aligned = -before % config.pad_to_multiple
    reserved = specials.reserved(0, config.reserved_tokens + aligned)
    return [*specials.leading, *learned, *reserved, *specials.trailing], aligned
