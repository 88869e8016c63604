"""Whether a vocab suits the run that uses it: its casing against the lower-casing flag, and an observed [UNK]
share against the share the vocab had on its own held-out text.

A mismatch does not fail: the records stay valid, only worse. These functions find the two mistakes that give
no error by themselves (a cased run with an uncased vocab turns every capitalised word into [UNK] or pieces; an
uncased run with a cased vocab never uses its capitalised tokens) and return a one-line message, or None.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bertcorpus.wordpiece.vocab import PLACEHOLDER

# Fewer whole-word tokens with a cased letter than this, and the vocab's casing is not judged.
MIN_CASED_TOKENS = 20
# Lower-cased text has no upper-case letter at all, so an uncased vocab has (almost) none; a cased vocab learned
# from text with capitals has far more than this share.
CASED_SHARE = 0.01
# The wordpieces an [UNK] share is judged on, at least; below this the share says little, unless it rests on
# MIN_JUDGED_UNK [UNK]s or more: ten times the vocab's own share would then be far beyond chance (a text in a script
# the vocab lacks turns each of its words into one [UNK], so a small corpus of it has few wordpieces, all [UNK]).
MIN_JUDGED_TOKENS = 10_000
MIN_JUDGED_UNK = 100
# An observed share above both FACTOR times the vocab's own and the floor is not noise but a mismatch.
UNK_FACTOR = 10.0
UNK_FLOOR = 0.001
# Without a recorded share (a vocab made elsewhere), only a share above this is reported.
UNK_LIMIT_UNRECORDED = 0.01


@dataclass(frozen=True)
class Casing:
    """What the whole-word tokens of a vocab say about its casing."""

    cased_letter_tokens: int  # whole-word tokens holding a letter that has an upper and a lower case
    upper_tokens: int  # those of them that lower-casing would change

    @property
    def cased(self) -> bool | None:
        """True for a cased vocab, False for an uncased one, None when too few tokens tell."""
        if self.cased_letter_tokens < MIN_CASED_TOKENS:
            return None
        return self.upper_tokens >= CASED_SHARE * self.cased_letter_tokens


# Special tokens in angle brackets: bert-base-chinese's <S> and <T> (which `vocab --layout bert-chinese` writes
# too), <s>, </s>, <unk>, <pad>, <mask> of other vocabs. Their case is a name's, not the text's.
_ANGLE_BRACKETED = re.compile(r"^</?[^<>\s]+>$")


def vocab_casing(tokens: Sequence[str]) -> Casing:
    """The casing evidence of a vocab's tokens (vocab.tokens): whole words only, not ##pieces, [bracketed] or
    <bracketed> special tokens."""
    letter = upper = 0
    for token in tokens:
        if not token or token.startswith("##") or PLACEHOLDER.match(token) or _ANGLE_BRACKETED.match(token):
            continue
        if token.lower() != token.upper():
            letter += 1
            upper += token.lower() != token
    return Casing(letter, upper)


def casing_mismatch(tokens: Sequence[str], lowercase: bool, vocab_name: str) -> str | None:
    """A one-line message when `create`'s --do-lower-case / --no-do-lower-case disagrees with the vocab's casing;
    None when they agree or the vocab does not tell."""
    casing = vocab_casing(tokens)
    if casing.cased is None or casing.cased != lowercase:
        return None
    if lowercase:
        return (
            f"the vocab {vocab_name} looks cased ({casing.upper_tokens:,} of its "
            f"{casing.cased_letter_tokens:,} whole-word tokens have capitals) but --do-lower-case lower-cases "
            "the text, so those tokens are never used; pass --no-do-lower-case, or use an uncased vocab"
        )
    words = f"{casing.cased_letter_tokens:,} whole-word tokens"
    capitals = (
        f"only {casing.upper_tokens:,} of its {words} have capitals"
        if casing.upper_tokens
        else f"none of its {words} has a capital"
    )
    return (
        f"the vocab {vocab_name} looks uncased ({capitals}) but --no-do-lower-case keeps the case of the "
        "text, so capitalised words become [UNK] or more pieces; pass --do-lower-case, or use a cased vocab"
    )


def unk_share_limit(recorded_share: float | None) -> float:
    """The highest [UNK] share of wordpieces that passes without a message."""
    if recorded_share is None:
        return UNK_LIMIT_UNRECORDED
    return max(UNK_FACTOR * recorded_share, UNK_FLOOR)


def unk_share_mismatch(unk_tokens: int, tokens: int, recorded_share: float | None, vocab_name: str) -> str | None:
    """A one-line message when the [UNK] share of wordpieces a run observed (unk_tokens of tokens) is far above the
    vocab's own share on its held-out text (recorded_share; None for a vocab without that record); None when it
    is not, or when too few tokens were seen to judge."""
    if tokens < MIN_JUDGED_TOKENS and unk_tokens < MIN_JUDGED_UNK:
        return None
    share = unk_tokens / tokens
    if share <= unk_share_limit(recorded_share):
        return None
    against = (
        f"against {recorded_share:.3%} on the vocab's own held-out text"
        if recorded_share is not None
        else "with a vocab that records no share of its own"
    )
    return (
        f"{share:.2%} of the wordpieces ({unk_tokens:,} of {tokens:,}) are [UNK] with {vocab_name}, {against}: "
        "check --do-lower-case, and that the vocab was made for this kind of text"
    )
