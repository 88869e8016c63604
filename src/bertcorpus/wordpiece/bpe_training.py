"""Byte-level BPE from pre-token counts, with tokenizers' BpeTrainer: the same counts give the same tokens and merges
in every process, whatever PYTHONHASHSEED or the number of threads.

Unlike WordPiece's (wordpiece/training.py), this trainer needs no help to be reproducible. Its alphabet is every
byte's character, given in full and kept in code-point order; with no continuation prefix there are no symbols that
get their ids in hash-map order; a merge is chosen by its pair's count, ties by the ids of the pair, so the order in
which the trainer holds its words (a hash map's, different in every process) changes nothing, and the counts of pairs
are integers, whose sums do not depend on the order of the threads. tests/test_vocab_subword.py trains twice in
separate processes, with other hash seeds and thread counts, and compares the bytes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from bertcorpus.wordpiece.training import feed_words, symbol_counts, trainer_scale


@dataclass
class LearnedBpe:
    tokens: list[str]  # the 256 byte characters in code-point order, then one token per merge, in the order learned
    merges: list[tuple[str, str]]
    scale: int  # the power of two the counts were divided by (1 below the trainer's limits)


def byte_alphabet() -> list[str]:
    """The characters byte-level BPE writes the 256 bytes as, in code-point order (the trainer's)."""
    return sorted(pre_tokenizers.ByteLevel.alphabet())


def train_bpe(counts: dict[str, int], size: int, min_frequency: int) -> LearnedBpe:
    """At most `size` tokens (the byte alphabet among them) from counts of byte-level pre-tokens; fewer where no pair
    is seen `min_frequency` times."""
    first, rest = symbol_counts(counts)
    scale = trainer_scale(sum(counts.values()), max((first + rest).values(), default=0))
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()  # a byte-level pre-token holds no whitespace
    trainer = trainers.BpeTrainer(
        vocab_size=size,
        min_frequency=math.ceil(min_frequency / scale),
        show_progress=False,
        special_tokens=[],
        initial_alphabet=byte_alphabet(),
    )
    tokenizer.train_from_iterator(feed_words(counts, scale), trainer)
    ids = tokenizer.get_vocab()
    tokens = sorted(ids, key=ids.__getitem__)
    if tokens[:256] != byte_alphabet():
        raise RuntimeError("the trainer did not keep the byte alphabet's ids")
    merges = [tuple(pair) for pair in json.loads(tokenizer.to_str())["model"]["merges"]]
    return LearnedBpe(tokens, merges, scale)
