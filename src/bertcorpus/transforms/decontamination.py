"""Benchmark text in a corpus: the word n-grams of the benchmarks' texts, where a document holds one, and what is
cut from it.

A benchmark text of at least `ngram` words contributes its ngram-word n-grams; a shorter one of at least
`min_ngram` words is one n-gram of all its words (as NeMo Curator does); a text of fewer words is too short to
match and is counted. Words are those of transforms/minhash.py (fold_text), so case, punctuation and layout never
hide a match. A document is checked with numpy on its word hashes (find_matches); only a document with a match is
read again word by word, to find where in its text each matching n-gram lies (word_spans).

Cutting (`cut`): each match is widened by a margin and out to whitespace, overlapping regions merge, a piece left
between regions that is shorter than min_piece_chars goes with them, and a document cut into more than max_splits
regions is dropped whole. The pieces left are new documents, ID#1, ID#2, … in text order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bertcorpus.transforms.benchmark_texts import Benchmark
from bertcorpus.transforms.minhash import fold_text, shingle_hashes, word_hashes

# The ASCII whitespace that parts the pieces of a text (folding never joins two of them: fold_text), and the ASCII
# characters that folding keeps in words.
_IS_SPACE = np.array([chr(c) in " \t\n\r\f\v" for c in range(128)])
_IS_ALNUM = np.array([chr(c).isalnum() for c in range(128)])


@dataclass
class NgramIndex:
    """The n-grams of every benchmark text: for each n-gram size, the sorted hashes and the text each came from.
    Texts are numbered across benchmarks; text_benchmark and first_example give each one's benchmark and first
    example."""

    names: list[str]  # benchmark names, in the order given
    sizes: tuple[int, ...]
    hashes: dict[int, np.ndarray]  # size → sorted uint64
    texts: dict[int, np.ndarray]  # size → int64 text number of each hash
    bitmaps: dict[int, np.ndarray]  # size → uint8 bits: where the top bits of a hash of that size may fall
    text_benchmark: np.ndarray  # int32 per text
    examples: list[list[str]]  # per text: the ids of the examples that hold it
    summary: list[dict] = field(default_factory=list)  # per benchmark: examples, texts, too_short, ngrams


def build_index(benchmarks: list[Benchmark], ngram: int, min_ngram: int) -> NgramIndex:
    by_size: dict[int, list[tuple[np.ndarray, int]]] = {}
    text_benchmark, examples, summary = [], [], []
    for number, benchmark in enumerate(benchmarks):
        counts = {"examples": benchmark.examples, "texts": 0, "too_short": 0, "ngrams": 0}
        for item in benchmark.texts:
            words = word_hashes(fold_text(item.text))
            size = ngram if words.size >= ngram else words.size
            if size < min_ngram:
                counts["too_short"] += 1
                continue
            grams = np.unique(shingle_hashes(words, size))
            by_size.setdefault(size, []).append((grams, len(examples)))
            counts["texts"] += 1
            counts["ngrams"] += grams.size
            text_benchmark.append(number)
            examples.append(item.examples)
        summary.append({"name": benchmark.name, "layout": benchmark.layout, **counts})
    hashes, texts = {}, {}
    for size, parts in by_size.items():
        values = np.concatenate([grams for grams, _ in parts])
        owners = np.concatenate([np.full(grams.size, text, dtype=np.int64) for grams, text in parts])
        order = np.lexsort((owners, values))
        hashes[size], texts[size] = values[order], owners[order]
    return NgramIndex(
        [b.name for b in benchmarks],
        tuple(sorted(hashes)),
        hashes,
        texts,
        {size: _bitmap(values) for size, values in hashes.items()},
        np.array(text_benchmark, dtype=np.int32),
        examples,
        summary,
    )


@dataclass(frozen=True)
class Match:
    """An n-gram of a benchmark text found in a document: its words [word, word + size), and the texts that hold
    it (numbers of the NgramIndex)."""

    word: int
    size: int
    texts: tuple[int, ...]


def find_matches(words: np.ndarray, index: NgramIndex) -> list[Match]:
    """Every n-gram of the document's words (word_hashes of its folded text) that a benchmark text holds, in order
    of position. The bitmap of each size rules out most n-grams with one look-up; the others are searched for in
    the sorted hashes."""
    found = []
    for size in index.sizes:
        grams = shingle_hashes(words, size)
        if not grams.size:
            continue
        table, owners = index.hashes[size], index.texts[size]
        candidates = np.flatnonzero(_in_bitmap(index.bitmaps[size], grams))
        at = np.searchsorted(table, grams[candidates])
        hit = at < table.size
        hit[hit] = table[at[hit]] == grams[candidates[hit]]
        positions, first = candidates[hit], at[hit]
        end = np.searchsorted(table, grams[positions], side="right")
        for word, a, b, owner in zip(positions.tolist(), first.tolist(), end.tolist(), owners[first].tolist()):
            # an n-gram of one text (most are) names it; one shared by several texts names each once
            texts = (owner,) if b - a == 1 else tuple(sorted(set(owners[a:b].tolist())))
            found.append(Match(word, size, texts))
    return sorted(found, key=lambda m: (m.word, m.size))


def _bitmap(hashes: np.ndarray) -> np.ndarray:
    """A bit per slot of the hashes' top bits, set where one of them falls: at 16 slots per hash (2 bytes), about 6%
    of the n-grams of a document that no benchmark holds get past it."""
    bits = max(10, int(16 * max(hashes.size, 1) - 1).bit_length())
    slots = hashes >> np.uint64(64 - bits)
    bitmap = np.zeros(1 << (bits - 3), dtype=np.uint8)
    np.bitwise_or.at(bitmap, slots >> np.uint64(3), np.left_shift(1, slots & np.uint64(7)).astype(np.uint8))
    return bitmap


def _in_bitmap(bitmap: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    bits = (bitmap.size * 8).bit_length() - 1
    slots = hashes >> np.uint64(64 - bits)
    return (bitmap[slots >> np.uint64(3)] >> (slots & np.uint64(7)).astype(np.uint8)) & 1 == 1


def word_spans(text: str) -> tuple[list[int], list[int]]:
    """(start, end) in the text of each word of fold_text(text), in order: the whitespace-separated piece it was
    folded from. Words are counted per piece, which gives the same words as folding the whole text. With numpy on
    the code points: an ASCII piece's words are its runs of letters and digits, and only the pieces holding another
    character are folded one by one."""
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), "<u4")
    is_ascii = codes < 128
    ascii_codes = np.where(is_ascii, codes, 0)
    in_piece = (~(is_ascii & _IS_SPACE[ascii_codes])).view(np.int8)
    edges = np.diff(in_piece, prepend=np.int8(0), append=np.int8(0))
    piece_starts, piece_ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    word_starts = np.flatnonzero(np.diff((is_ascii & _IS_ALNUM[ascii_codes]).view(np.int8), prepend=np.int8(0)) == 1)
    counts = np.bincount(np.searchsorted(piece_starts, word_starts, "right") - 1, minlength=piece_starts.size)
    for piece in np.unique(np.searchsorted(piece_starts, np.flatnonzero(~is_ascii), "right") - 1).tolist():
        counts[piece] = len(fold_text(text[piece_starts[piece] : piece_ends[piece]]).split())
    return np.repeat(piece_starts, counts).tolist(), np.repeat(piece_ends, counts).tolist()


@dataclass
class Region:
    """A stretch of a document that is removed, and the first match in it (char span and texts)."""

    start: int
    end: int
    match_start: int
    match_end: int
    texts: tuple[int, ...]
    matches: int = 1


def matched_regions(text: str, matches: list[Match]) -> list[Region]:
    """The char spans of the matches (n-grams) in the text, in order, those that overlap or touch as one Region that
    names the first of them and counts them all: a passage found whole is one region, not one per n-gram."""
    starts, ends = word_spans(text)
    regions: list[Region] = []
    for m in matches:
        last = min(m.word + m.size, len(starts)) - 1
        if last < m.word:  # the whole-text and word-by-word folds disagree: never for text that NFKC leaves alone
            continue
        start, end = starts[m.word], ends[last]
        if regions and start <= regions[-1].end:
            regions[-1].end = max(regions[-1].end, end)
            regions[-1].matches += 1
        else:
            regions.append(Region(start, end, start, end, m.texts))
    return regions


def _widened(text: str, region: Region, margin: int) -> Region:
    """The region grown by the margin, then out to whole words and over the whitespace around them, so that what
    is left between regions starts and ends with a word."""
    start, end = max(0, region.start - margin), min(len(text), region.end + margin)
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    while start > 0 and text[start - 1].isspace():
        start -= 1
    while end < len(text) and not text[end].isspace():
        end += 1
    while end < len(text) and text[end].isspace():
        end += 1
    return Region(start, end, region.match_start, region.match_end, region.texts, region.matches)


def _merge(regions: list[Region]) -> list[Region]:
    """Overlapping or touching regions as one, which names the first match among them."""
    merged: list[Region] = []
    for region in sorted(regions, key=lambda r: (r.start, r.end)):
        if merged and region.start <= merged[-1].end:
            last = merged[-1]
            if not last.matches:
                last.match_start, last.match_end, last.texts = region.match_start, region.match_end, region.texts
            last.end = max(last.end, region.end)
            last.matches += region.matches
        else:
            merged.append(
                Region(region.start, region.end, region.match_start, region.match_end, region.texts, region.matches)
            )
    return merged


def _gaps(length: int, regions: list[Region]) -> list[tuple[int, int]]:
    bounds = [0, *(x for r in regions for x in (r.start, r.end)), length]
    return [(s, e) for s, e in zip(bounds[::2], bounds[1::2]) if e > s]


def cut_plan(
    text: str, regions: list[Region], margin: int, max_splits: int, min_piece_chars: int
) -> tuple[list[tuple[int, int]], list[Region]]:
    """(pieces kept as (start, end), regions removed) for `cut`, given the matched regions (at least one). A piece
    shorter than min_piece_chars goes with the regions beside it. Where more than max_splits regions are left, or
    no piece, nothing is kept and the one region removed is the whole text, naming the first match. The kept and
    removed characters add up to the document's."""
    merged = _merge([_widened(text, r, margin) for r in regions])
    pieces = _gaps(len(text), merged)
    while short := next(((s, e) for s, e in pieces if e - s < min_piece_chars), None):
        merged = _merge([*merged, Region(*short, 0, 0, (), 0)])  # a gap always touches a region
        pieces = _gaps(len(text), merged)
    if len(merged) > max_splits or not pieces:
        first = min(regions, key=lambda r: r.match_start)
        matches = sum(r.matches for r in regions)
        return [], [Region(0, len(text), first.match_start, first.match_end, first.texts, matches)]
    return pieces, merged
