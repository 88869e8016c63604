"""The one BERT tokenisation that training and `create` share, identical to the reference FullTokenizer.

The reference cleans text (drops NUL, U+FFFD and Cc/Cf controls other than tab/newline/CR), splits it on
whitespace, and then handles each whitespace-separated chunk on its own: lower-case (Python's full mapping,
final sigma included), NFD + drop Mn when lower-casing, CJK ideographs and punctuation as single tokens, and
greedy longest-match WordPiece with the whole word as [UNK] when a piece is missing or it is over 200 chars.

Because every step after the whitespace split is local to a chunk, a chunk's ids are a pure function of the
chunk. `WordPieceTokenizer` therefore caches ids per chunk and sends only unseen chunks to HF tokenizers, whose
BertNormalizer/BertPreTokenizer/WordPiece do the per-chunk work. Natural text repeats its chunks so often that
most of a document never leaves the cache.
"""
from __future__ import annotations

import re
from array import array
from itertools import chain

import numpy as np
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from wordpiece.vocab import UNK, Vocab

MAX_CHARS_PER_WORD = 200
_CACHE_LIMIT = 400_000  # chunks; ~80 MB at most, and the frequent chunks arrive first


# NUL, U+FFFD and every Cc/Cf character except tab, newline and CR (Unicode 14, Python 3.11's unicodedata);
# tests/test_tokenizer.py rebuilds this list from unicodedata and checks that it is the same.
REMOVED_RANGES = (
    (0x0, 0x8), (0xB, 0xC), (0xE, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C),
    (0x6DD, 0x6DD), (0x70F, 0x70F), (0x890, 0x891), (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F),
    (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0xFFFD, 0xFFFD),
    (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)
_REMOVED = re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in REMOVED_RANGES) + "]+")


def prepare_text(text: str, lowercase: bool) -> str:
    """The steps that must happen on the whole text before any chunk is tokenised on its own."""
    text = _REMOVED.sub("", text)
    return text.lower() if lowercase else text


def chunk_normalizer(lowercase: bool) -> normalizers.Normalizer:
    """What HF applies to text already passed through `prepare_text` (lower-casing happened there)."""
    return normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True,
                                      strip_accents=lowercase, lowercase=False)


def build_hf_tokenizer(vocab: Vocab, lowercase: bool) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(vocab.ids, unk_token=UNK, max_input_chars_per_word=MAX_CHARS_PER_WORD))
    tok.normalizer = chunk_normalizer(lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


class WordPieceTokenizer:
    """Text → WordPiece ids, exactly as the reference FullTokenizer would produce them."""

    def __init__(self, vocab: Vocab, lowercase: bool = True):
        self.vocab = vocab
        self.lowercase = lowercase
        self._hf = build_hf_tokenizer(vocab, lowercase)
        self._ids: dict[str, tuple[int, ...]] = {}

    def chunk_ids(self, chunks: list[str]) -> list[tuple[int, ...]]:
        """Ids per whitespace chunk of prepared text."""
        self._learn(chunks)
        return list(map(self._lookup, chunks))

    def encode(self, text: str) -> array:
        """All ids of a text, in order."""
        chunks = prepare_text(text, self.lowercase).split()
        self._learn(chunks)
        return array("i", chain.from_iterable(map(self._lookup, chunks)))

    def tokenize(self, text: str) -> list[str]:
        tokens = self.vocab.tokens
        return [tokens[i] for i in self.encode(text)]

    def encode_sentences(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Ids of several sentences as one flat int32 array plus the token count of each sentence."""
        prepared = [prepare_text(s, self.lowercase).split() for s in sentences]
        all_chunks = list(chain.from_iterable(prepared))
        self._learn(all_chunks)
        lookup = self._lookup
        ids = np.fromiter(chain.from_iterable(map(lookup, all_chunks)), dtype=np.int32)
        per_chunk = np.fromiter(map(len, map(lookup, all_chunks)), dtype=np.int64, count=len(all_chunks))
        chunk_counts = np.fromiter(map(len, prepared), dtype=np.int64, count=len(prepared))
        ends = np.cumsum(chunk_counts)
        chunk_cum = np.concatenate(([0], np.cumsum(per_chunk)))
        lengths = np.diff(np.concatenate(([0], chunk_cum[ends])))
        return ids, lengths.astype(np.int32)

    def _lookup(self, chunk: str) -> tuple[int, ...]:
        got = self._ids.get(chunk)
        return got if got is not None else self._transient[chunk]

    def _learn(self, chunks: list[str]) -> None:
        """Tokenise unseen chunks in one HF call; keep them in the cache while it has room."""
        self._transient: dict[str, tuple[int, ...]] = {}
        missing = list(set(chunks).difference(self._ids))
        if not missing:
            return
        missing.sort()  # a fixed order keeps the HF call, and so everything after it, reproducible
        joined = " ".join(missing)
        enc = self._hf.encode(joined, add_special_tokens=False)
        ids = np.asarray(enc.ids, dtype=np.int32)
        starts = np.fromiter((o[0] for o in enc.offsets), dtype=np.int64, count=len(ids))
        chunk_starts = np.cumsum([0] + [len(c) + 1 for c in missing[:-1]])
        owner = np.searchsorted(chunk_starts, starts, side="right") - 1
        bounds = np.searchsorted(owner, np.arange(len(missing) + 1), side="left")
        target = self._ids if len(self._ids) < _CACHE_LIMIT else self._transient
        id_list = ids.tolist()
        for k, chunk in enumerate(missing):
            target[chunk] = tuple(id_list[bounds[k]:bounds[k + 1]])
