"""Instance assembly and masked-LM predictions, vectorised over a batch of instances.

Rows are [CLS] A [SEP] B [SEP] + padding. Masking follows the reference's create_masked_lm_predictions:
num_to_predict = min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob))) with Python-3 rounding,
[CLS]/[SEP] never masked, and each chosen position becomes [MASK] (80%), stays (10%) or becomes a random token
(10%), or in other shares (mask_replace_prob, random_replace_prob). Two deliberate fixes: random tokens are drawn
from regular vocabulary entries only (never [PAD],
[unusedN], [CLS], [SEP], [MASK] or [UNK]), and whole-word masking makes the 80/10/10 choice once per word.

`create` masks with a numpy Generator per bucket; the loader masks at load time with the same functions and a
transforms.row_streams.RowStreams, whose rows draw from streams of their own. Rows of the no-pair form hold a
[SEP] between documents as well (Assembled.separators); those are never masked either.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from bertcorpus.transforms.instances import truncated_lengths
from bertcorpus.transforms.row_streams import RowStreams
from bertcorpus.wordpiece.ranges import concat_ranges
from bertcorpus.wordpiece.sequence_layout import SequenceLayout
from bertcorpus.wordpiece.tokenizer_file import TokenizerFile
from bertcorpus.wordpiece.vocab import CLS, MASK, SEP, Vocab

_NEVER_CHOSEN = np.uint64(2**64 - 1)  # the key of a position that may not be masked: the largest


@dataclass(frozen=True)
class SpecialIds:
    cls: int
    sep: int
    mask: int
    regular: np.ndarray  # ids a random replacement may take
    is_continuation: np.ndarray  # bool per vocab id: the token never starts a word (## pieces, and the like)
    # Where the templates put their special ids (None: BERT's, from cls and sep), and per id whether the token is
    # whitespace alone, after which a word starts (None: no such token, as in a WordPiece vocab).
    layout: SequenceLayout | None = None
    breaks_word: np.ndarray | None = None

    @property
    def templates(self) -> SequenceLayout:
        return self.layout or SequenceLayout.bert(self.cls, self.sep)


@lru_cache(maxsize=8)  # each step of a worker asks it of the same vocab, whose regular ids take a loop over all
def special_ids(vocab: Vocab | TokenizerFile) -> SpecialIds:
    """What masking needs of a vocab or a tokenizer.json: the same for create and for the loader. Read only."""
    if isinstance(vocab, TokenizerFile):
        continues, breaks = vocab.word_flags
        lay = vocab.layout
        return SpecialIds(
            cls=lay.single_prefix[0] if lay.single_prefix else vocab.specials.get("cls", -1),
            sep=lay.single_suffix[-1] if lay.single_suffix else vocab.specials.get("sep", -1),
            mask=vocab.specials["mask"],
            regular=vocab.regular_token_ids(),
            is_continuation=continues,
            layout=lay,
            breaks_word=breaks if breaks.any() else None,
        )
    ids = vocab.ids
    return SpecialIds(
        cls=ids[CLS],
        sep=ids[SEP],
        mask=ids[MASK],
        regular=vocab.regular_token_ids(),
        is_continuation=np.array([t.startswith("##") for t in vocab.tokens]),
    )


@dataclass
class Assembled:
    input_ids: np.ndarray  # (N, L) int32, padded with 0
    length: np.ndarray  # (N,) real tokens, [CLS] and both [SEP] included
    len_a: np.ndarray  # (N,) tokens of A after truncation
    # (N, L) bool: the positions of [SEP]s other than the pair's two (between the documents of the no-pair form),
    # None where rows have none: the common case takes the faster path.
    separators: np.ndarray | None = None
    # (N, L) bool: the tokens that continue a segmenter's word (Chinese), for whole-word masking; None: no words
    # beyond the ## pieces.
    word_continues: np.ndarray | None = None
    # How many special tokens stand before A, between A and B, and after B: (1, 1, 1) for [CLS] A [SEP] B [SEP];
    # a row of one segment has an empty B, its closing special tokens in the middle (SequenceLayout.single_frame).
    frame: tuple[int, int, int] = (1, 1, 1)

    @property
    def b_start(self) -> np.ndarray:
        """(N,) where B starts: the row's length where it has none."""
        return self.len_a + self.frame[0] + self.frame[1]


@dataclass
class Masked:
    input_ids: np.ndarray  # (N, L) int32 with the replacements applied
    positions: np.ndarray  # (N, P) int32, sorted, padded with 0
    label_ids: np.ndarray  # (N, P) int32, original ids, padded with 0
    count: np.ndarray  # (N,) real predictions: the first count entries of positions and label_ids


def assemble(
    tokens: np.ndarray,
    columns: np.ndarray,
    max_seq_length: int,
    special: SpecialIds,
    rng: np.random.Generator,
    word_continues: np.ndarray | None = None,
) -> Assembled:
    """Truncate each pair as the reference does (front or back by a fair coin per token) and lay out the rows in
    the tokenizer's pair template ([CLS] A [SEP] B [SEP] for BERT's).

    columns: InstanceBatch.columns() — the A and B token ranges of each instance. word_continues: per token of
    `tokens`, or None; laid out with them.
    """
    lay = special.templates
    before, between, after = lay.pair_frame
    a_start, a_end, b_start, b_end = columns[:4].copy()
    len_a = a_end - a_start
    len_b = b_end - b_start
    new_a, new_b = truncated_lengths(len_a, len_b, max_seq_length - lay.pair_specials)
    # Each removed token came off the front with probability 1/2: the front share is binomial.
    a_start += rng.binomial(len_a - new_a, 0.5)
    b_start += rng.binomial(len_b - new_b, 0.5)

    # Flat layout of the real tokens, row after row: prefix A middle B suffix; then scatter into padded rows.
    n = len(a_start)
    length = new_a + new_b + lay.pair_specials
    row_start = np.arange(n, dtype=np.int64) * max_seq_length
    flat = np.zeros(n * max_seq_length, np.int32)
    a_src, b_src = concat_ranges(a_start, new_a), concat_ranges(b_start, new_b)
    a_at = np.repeat(row_start + before - a_start, new_a) + a_src
    b_at = np.repeat(row_start + new_a + before + between - b_start, new_b) + b_src
    flat[a_at] = tokens[a_src]
    flat[b_at] = tokens[b_src]
    for k, token in enumerate(lay.prefix):
        flat[row_start + k] = token
    for k, token in enumerate(lay.middle):
        flat[row_start + before + new_a + k] = token
    for k, token in enumerate(lay.suffix):
        flat[row_start + length - after + k] = token
    continues = None
    if word_continues is not None:
        continues = np.zeros(n * max_seq_length, bool)
        continues[a_at] = word_continues[a_src]
        continues[b_at] = word_continues[b_src]
        continues = continues.reshape(n, max_seq_length)
    return Assembled(flat.reshape(n, max_seq_length), length, new_a, word_continues=continues, frame=lay.pair_frame)


def num_to_predict(length: np.ndarray, masked_lm_prob: float, max_predictions: int) -> np.ndarray:
    # np.round rounds half to even, exactly like Python 3's round() in the reference.
    return np.minimum(max_predictions, np.maximum(1, np.round(length * masked_lm_prob))).astype(np.int64)


def _candidates(rows: Assembled) -> np.ndarray:
    """(N, L) bool: positions that may be masked — the real tokens of A and B, no special token."""
    col = np.arange(rows.input_ids.shape[1])[None, :]
    before, between, after = rows.frame
    a_end = rows.len_a[:, None] + before
    candidates = (col >= before) & (col < rows.length[:, None] - after) & ((col < a_end) | (col >= a_end + between))
    return candidates if rows.separators is None else candidates & ~rows.separators


def _random_candidates(rows: Assembled, count: int, rng: np.random.Generator) -> np.ndarray:
    """(N, count): the positions of a uniformly random ordered draw without replacement from each row's
    candidates (any first k of them are a uniform k-subset).

    The candidates of a row are numbered 0..m-1 in position order; without other separators they are positions
    1..len_a and len_a+2..length-2. A partial Fisher-Yates shuffle of those numbers runs on all rows at once:
    step j swaps slot j with a random slot in [j, m). Steps past a row's candidate count only touch slots that
    are never read.
    """
    n = len(rows.length)
    candidates = None if rows.separators is None else _candidates(rows)
    before, between, after = rows.frame
    m = rows.length - (before + between + after) if candidates is None else candidates.sum(axis=1)
    width = max(int(m.max(initial=0)), count)
    slots = np.tile(np.arange(width, dtype=np.int32), n)  # row i's slots are slots[i * width:(i + 1) * width]
    row_base = np.arange(n, dtype=np.int64) * width
    u = rng.random((n, count))
    for j in range(count):
        # Flat take/put: far cheaper than two-array fancy indexing.
        pick = row_base + np.minimum(j + (u[:, j] * np.maximum(m - j, 1)).astype(np.int64), width - 1)
        here = row_base + j
        taken = np.take(slots, pick)
        np.put(slots, pick, np.take(slots, here))
        np.put(slots, here, taken)
    drawn = slots.reshape(n, width)[:, :count]
    if candidates is None:
        return drawn + before + (drawn >= rows.len_a[:, None]) * between
    in_order = np.argsort(~candidates, axis=1, kind="stable")  # each row's candidate positions first, ascending
    return np.take_along_axis(in_order, np.minimum(drawn, in_order.shape[1] - 1), axis=1)


def _keyed_positions(candidates: np.ndarray, k: np.ndarray, count: int, rng) -> np.ndarray:
    """(N, count): each row's k candidates of smallest random key (a uniform k-subset) in ascending order, then
    the row width as padding.

    One 64-bit key per position, drawn for the whole row at once; per group of rows with the same k, a partition
    finds the k-th smallest key, and the positions at or below it are the choice, read in order off the flat rows:
    linear in the row's length whatever k is, where the shuffle of _random_candidates takes k steps (slow for 30%
    of 8,192 tokens)."""
    n, width = candidates.shape
    keys = rng.bits((n, width))
    keys[~candidates] = _NEVER_CHOSEN  # k never exceeds a row's candidates
    kth = np.zeros(n, np.uint64)
    for ki in np.unique(k[k > 0]).tolist():
        group = np.flatnonzero(k == ki)
        kth[group] = np.partition(keys[group], ki - 1, axis=1)[:, ki - 1]
    chosen = keys <= kth[:, None]
    chosen[k == 0] = False
    picked = np.flatnonzero(chosen)  # row by row, each row's positions ascending
    if len(picked) != int(k.sum()):  # two equal keys at a row's k-th (odds 2**-64): the exact, slower choice
        return _keyed_positions_by_rank(keys, candidates, k, count)
    positions = np.full(n * count, width, np.int64)
    first_slot = np.arange(n, dtype=np.int64) * count - (np.cumsum(k) - k)
    positions[np.repeat(first_slot, k) + np.arange(len(picked))] = picked % width
    return positions.reshape(n, count)


def _keyed_positions_by_rank(keys: np.ndarray, candidates: np.ndarray, k: np.ndarray, count: int) -> np.ndarray:
    """_keyed_positions where keys tie: candidates by key, equal keys by position."""
    n, width = keys.shape
    out = np.full((n, count), width, np.int64)
    for i in np.flatnonzero(k).tolist():
        out[i, : k[i]] = np.sort(np.lexsort((keys[i], ~candidates[i]))[: k[i]])
    return out


def mask_tokens(
    rows: Assembled,
    masked_lm_prob: float,
    max_predictions: int,
    special: SpecialIds,
    rng: np.random.Generator,
    whole_word: bool = False,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
    keyed: bool = False,
) -> Masked:
    """Choose each row's predictions and replace them: [MASK] with mask_replace_prob, a random regular token with
    random_replace_prob, the token kept otherwise (80/10/10 by default, the names Hugging Face's collator uses).

    keyed: choose the positions by a random key per position (_keyed_positions, the loader's choice, fast at any
    rate) rather than by a partial shuffle (create's, which its static records' bytes depend on)."""
    n, width = rows.input_ids.shape
    k = num_to_predict(rows.length, masked_lm_prob, max_predictions)
    candidates = _candidates(rows) if rows.separators is not None or keyed else None
    if candidates is not None:  # many short documents in one row may leave fewer candidates than k
        k = np.minimum(k, candidates.sum(axis=1))
    if whole_word:
        chosen, word_of = _choose_whole_words(rows, _candidates(rows), k, special, rng)
        # Positions sorted ascending: the first k columns of a stable argsort of "not chosen".
        positions = np.argsort(~chosen, axis=1, kind="stable")[:, :max_predictions]
        count = chosen.sum(axis=1)  # may fall short of k when no remaining word fits
    else:
        if keyed:
            positions = _keyed_positions(candidates, k, max_predictions, rng)
        else:
            chosen = _random_candidates(rows, max_predictions, rng)
            positions = np.sort(np.where(np.arange(max_predictions)[None, :] < k[:, None], chosen, width), axis=1)
        word_of = None
        count = k
    real = np.arange(max_predictions)[None, :] < count[:, None]
    positions = np.where(real, positions, 0).astype(np.int32)
    rowix = np.arange(n)[:, None]
    flat = rowix * width + positions  # into the flattened rows: take/put beat two-array indexing
    labels = np.where(real, np.take(rows.input_ids, flat), 0).astype(np.int32)

    # One 80/10/10 draw per prediction, or per word with whole-word masking: [MASK] below mask_replace_prob, a
    # random token from 1 - random_replace_prob on (0.8 and 0.9 exactly, as create's records were drawn).
    if word_of is None:
        u = rng.random((n, max_predictions))
    else:
        u = rng.random((n, width))[rowix, word_of[rowix, positions]]
    if isinstance(rng, RowStreams):  # the same tokens as a full draw gives, drawn only where one is taken
        replacement = np.zeros((n, max_predictions), np.int64)
        taken = u >= 1.0 - random_replace_prob
        replacement[taken] = special.regular[rng.integers_at(0, len(special.regular), taken)]
    else:
        replacement = special.regular[rng.integers(0, len(special.regular), (n, max_predictions))]
    new_ids = np.where(
        u < mask_replace_prob, special.mask, np.where(u < 1.0 - random_replace_prob, labels, replacement)
    )
    out = rows.input_ids.copy()
    np.put(out, flat[real], new_ids[real])
    return Masked(out, positions, labels, count)


def _choose_whole_words(
    rows: Assembled, candidates: np.ndarray, k: np.ndarray, special: SpecialIds, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Whole-word selection: each row's words in random order, each taken whole if it still fits in k predictions.

    A word is a candidate token plus the `##` pieces after it, or a segmenter's word (rows.word_continues: the
    characters of a Chinese word after its first); words never span a [SEP]. Returns the chosen mask and, at each
    chosen position, the index of its word's first position (for the one 80/10/10 draw per word; 0 elsewhere).

    The order is one random key per position, drawn for the whole batch; a row's words go by the keys of their
    first positions, ties by position. The greedy choice then runs on all rows at once, a rank at a time: step j
    offers each row its j-th word, and only rows that may still take one take part (a Chinese row has a word every
    one or two tokens, so a loop over each row's words was most of the cost of whole-word masking).
    """
    n, width = rows.input_ids.shape
    starts = _word_starts(rows, candidates, special)
    keys = rng.random((n, width))
    sizes = _word_sizes(starts, candidates)
    order = _words_by_key(starts, keys)
    ranked = np.take(sizes, order + np.arange(n)[:, None] * (width + 1))  # row i's j-th word's size
    smallest = ranked.min(axis=1)
    taken = np.zeros(n, np.int64)
    take = np.zeros((n, width), bool)  # by rank
    active = np.flatnonzero(smallest <= k)
    for j in range(width):
        room = k[active] - taken[active]
        size = ranked[active, j]
        fits = size <= room
        took = active[fits]
        take[took, j] = True
        taken[took] += size[fits]
        # a row is done when it has its k, or when not even its smallest word fits in what is left
        active = active[(taken[active] < k[active]) & (smallest[active] <= room - np.where(fits, size, 0))]
        if not len(active):
            break
    picked = np.flatnonzero(take)
    first, size = np.take(order, picked), np.take(ranked, picked)
    at = concat_ranges(picked - picked % width + first, size)
    chosen = np.zeros(n * width, bool)
    chosen[at] = True
    word_of = np.zeros(n * width, np.int64)
    word_of[at] = np.repeat(first, size)
    return chosen.reshape(n, width), word_of.reshape(n, width)


def _word_sizes(starts: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """(N, L + 1) int64: at a word's first position, its size (to the next position that starts a word, is no
    candidate, or ends the row); L + 1 elsewhere, more than any budget. The column past the last stops every
    row's last word."""
    n, width = starts.shape
    stops = np.ones((n, width + 1), bool)
    np.logical_or(starts, ~candidates, out=stops[:, :width])
    at = np.flatnonzero(stops)
    first = np.flatnonzero(np.pad(starts, ((0, 0), (0, 1))).ravel()[at])  # each word's first stop in `at`
    sizes = np.full(n * (width + 1), width + 1, np.int64)
    sizes[at[first]] = at[first + 1] - at[first]
    return sizes.reshape(n, width + 1)


def _words_by_key(starts: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """(N, L): each row's word starts by key, equal keys by position (as a stable argsort orders them), then the
    other positions in any order. numpy's fast sort, and a stable one for the rows where two words' keys are equal
    (odds below 2**-40 a row)."""
    ranked = np.where(starts, keys, 2.0)  # a key is below 1
    order = np.argsort(ranked, axis=1)
    ordered = np.sort(ranked, axis=1)
    tied = np.flatnonzero(((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] < 2.0)).any(axis=1))
    if len(tied):
        order[tied] = np.argsort(ranked[tied], axis=1, kind="stable")
    return order


def _word_starts(rows: Assembled, candidates: np.ndarray, special: SpecialIds) -> np.ndarray:
    """(N, L) bool: the candidates that start a word (whole-word masking's words, _choose_whole_words)."""
    continuation = special.is_continuation[rows.input_ids] & candidates
    if rows.word_continues is not None:  # a segmenter's words (Chinese): their characters after the first
        continuation |= rows.word_continues & candidates
    continuation[:, 1:] &= candidates[:, :-1]
    if special.breaks_word is not None:  # after a token of whitespace alone (a line break), a word starts
        continuation[:, 1:] &= ~special.breaks_word[rows.input_ids[:, :-1]]
    return candidates & ~continuation
