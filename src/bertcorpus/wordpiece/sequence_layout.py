"""Where a tokenizer's template puts its special tokens around one sequence or two: BERT's [CLS] A [SEP] B [SEP],
RoBERTa's <s> A </s></s> B </s>, or whatever a tokenizer.json's post-processor lays out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SequenceLayout:
    """The special ids before A, between A and B and after B of a pair; before and after the one sequence of a
    single; and the token type of B with what follows it (the first sequence's is 0): 1 in BERT's template, 0 in
    RoBERTa's."""

    prefix: tuple[int, ...]
    middle: tuple[int, ...]
    suffix: tuple[int, ...]
    single_prefix: tuple[int, ...]
    single_suffix: tuple[int, ...]
    b_type: int = 1

    @classmethod
    def bert(cls, cls_id: int, sep_id: int) -> SequenceLayout:
        return cls((cls_id,), (sep_id,), (sep_id,), (cls_id,), (sep_id,), 1)

    @property
    def pair_frame(self) -> tuple[int, int, int]:
        """How many special tokens stand before A, between A and B, and after B."""
        return len(self.prefix), len(self.middle), len(self.suffix)

    @property
    def single_frame(self) -> tuple[int, int, int]:
        """A single sequence's frame as a pair's with an empty B: its suffix closes A where a pair's middle would."""
        return len(self.single_prefix), len(self.single_suffix), 0

    @property
    def pair_specials(self) -> int:
        return sum(self.pair_frame)
