"""A SentencePiece-style Unigram model from pre-token counts, trained by SentencePiece's own trainer: the same counts
give the same pieces and scores in every process.

tokenizers' UnigramTrainer does not. It holds its words in a hash map whose order is new in every process, and its
EM steps add floating-point expectations over them in that order (and, with threads, in the order they finish):
measured on one real book, three processes gave three different files at 3,000 pieces, the same pieces in another
order and scores that differ in their last digits, with one thread as with two. No setting fixes the order, and the
pruning that follows ranks pieces by those sums, where many of them tie.

SentencePiece's trainer adds in a fixed order: its words in the order they are given, split among a fixed number of
threads whose sums are merged in thread order. So the words go to it sorted, the thread count is fixed
(TRAINER_THREADS, whatever the machine has), and its output depends on the counts alone (checked across processes,
hash seeds and CPU affinities). Its input is the Metaspace pre-tokens as word<TAB>count lines, the ▁ left to
SentencePiece, which puts it before each word itself; its normalisation is switched off (the counting normalised
the text as the tokenizer.json will), and its other defaults are XLM-R's: pieces of at most 16 characters, none
across a change of script or between digits and letters, and the characters that cover `character_coverage` of the
text (SentencePiece's 0.9995) in the alphabet.
"""

from __future__ import annotations

import io
import os
import tempfile
from dataclasses import dataclass

from bertcorpus.wordpiece.pre_tokens import MAX_PRE_TOKEN_CHARS, METASPACE

# Threads of SentencePiece's EM and pruning: a fixed number, since it decides the order of their floating-point sums.
TRAINER_THREADS = 16
DEFAULT_CHARACTER_COVERAGE = 0.9995
# SentencePiece's trainer needs memory for every occurrence its counts add up to, not for every word: about 100
# bytes each (measured: 1.03 M occurrences of 128 k words 0.2 GB peak, ten times the counts 1.1 GB, thirty times 3.1
# GB). Beyond this many, the counts are divided by a power of two (rounded; a word rounded to none is left out), as a
# uniform sample of that size would give them: about 1.7 GB.
TRAINER_WORD_BUDGET = 2**24


class UnigramTrainingError(ValueError):
    """Settings that SentencePiece's trainer cannot train with on these counts; the message says what to change."""


def check_trainer() -> None:
    """SentencePiece's trainer is an extra: without it, --model unigram is one line before any work."""
    import importlib.util

    if importlib.util.find_spec("sentencepiece") is None:
        raise UnigramTrainingError(
            "--model unigram trains with SentencePiece's trainer: pip install 'bertcorpus[unigram]'"
        )


@dataclass
class LearnedUnigram:
    pieces: list[tuple[str, float]]  # in SentencePiece's order (the byte pieces first, then by score)
    bytes: frozenset[str]  # the byte pieces (<0x00> to <0xFF>), with byte_fallback
    scale: int  # the power of two the counts were divided by (1 within TRAINER_WORD_BUDGET)


def trainer_scale(total_words: int) -> int:
    """1, or the power of two that the counts are divided by to stay within TRAINER_WORD_BUDGET."""
    scale = 1
    while total_words > TRAINER_WORD_BUDGET * scale:
        scale *= 2
    return scale


def train_unigram(
    counts: dict[str, int],
    size: int,
    *,
    unk_token: str,
    kept_apart: list[str],
    required_chars: str,
    byte_fallback: bool,
    character_coverage: float,
) -> LearnedUnigram:
    """At most `size` pieces (the byte pieces among them with byte_fallback; fewer where the text has fewer) from
    counts of Metaspace pre-tokens. `kept_apart`: strings never learned as pieces (the special and reserved tokens);
    `required_chars`: characters the alphabet holds whatever their count."""
    import sentencepiece

    scale = trainer_scale(sum(counts.values()))
    with tempfile.TemporaryDirectory(prefix="bertcorpus-unigram-") as folder:
        words = os.path.join(folder, "words.tsv")
        with open(words, "w", encoding="utf-8") as f:
            for word in sorted(counts):
                count = (counts[word] + scale // 2) // scale
                if word.removeprefix(METASPACE) and count:
                    f.write(f"{word.removeprefix(METASPACE)}\t{count}\n")
        model = io.BytesIO()
        try:
            sentencepiece.SentencePieceTrainer.train(
                input=words,
                input_format="tsv",
                model_writer=model,
                model_type="unigram",
                vocab_size=size + 1 + len(kept_apart),  # SentencePiece counts its unknown piece and these among them
                hard_vocab_limit=False,
                unk_id=0,
                unk_piece=unk_token,
                bos_id=-1,
                eos_id=-1,
                pad_id=-1,
                control_symbols=kept_apart,
                required_chars=required_chars,
                byte_fallback=byte_fallback,
                character_coverage=character_coverage,
                normalization_rule_name="identity",
                remove_extra_whitespaces=False,
                max_sentence_length=4 * MAX_PRE_TOKEN_CHARS + 4,
                num_threads=TRAINER_THREADS,
                minloglevel=2,
            )
        except RuntimeError as e:
            raise UnigramTrainingError(f"SentencePiece's trainer refused: {_reason(e)}") from None
    processor = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    pieces = [
        (processor.id_to_piece(i), processor.get_score(i))
        for i in range(processor.get_piece_size())
        if not (processor.is_control(i) or processor.is_unknown(i))
    ]
    byte_pieces = frozenset(processor.id_to_piece(i) for i in range(processor.get_piece_size()) if processor.is_byte(i))
    return LearnedUnigram(pieces, byte_pieces, scale)


def _reason(error: RuntimeError) -> str:
    """The trainer's message without its source location: `Vocabulary size is smaller than required_chars. 300 vs
    2600.` from `Internal: src/trainer_interface.cc(...) [...] Vocabulary size is smaller ...`."""
    text = str(error).strip().splitlines()[0]
    return text.rsplit("] ", 1)[-1] if "] " in text else text
