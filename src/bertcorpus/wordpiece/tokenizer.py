"""The one BERT tokenisation that training and `create` share, identical to the reference FullTokenizer.

The reference cleans text (drops NUL, U+FFFD and Cc/Cf controls other than tab/newline/CR), splits it on
whitespace, and then handles each whitespace-separated chunk on its own: lower-case (Python's full mapping,
final sigma included), NFD + drop Mn when lower-casing, CJK ideographs and punctuation as single tokens, and
greedy longest-match WordPiece with the whole word as [UNK] when a piece is missing or it is over 200 chars.

Because every step after the whitespace split is local to a chunk, a chunk's ids are a pure function of the
chunk. `WordPieceTokenizer` therefore keeps ids per chunk (wordpiece/chunk_table.py) and sends only unseen chunks
to HF tokenizers, whose BertNormalizer/BertPreTokenizer/WordPiece do the per-chunk work.

`standalone_tokenizer` expresses the same steps as one HF `Tokenizer`, for the `tokenizer.json` that the vocab
command writes beside vocab.txt, so that HF tools tokenise exactly as `create` does.
"""

from __future__ import annotations

import re
from itertools import chain

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from bertcorpus.wordpiece.chunk_table import CHUNK_LIMIT, ChunkTable
from bertcorpus.wordpiece.cjk import ideograph_code_points
from bertcorpus.wordpiece.vocab import CLS, MASK, PAD, SEP, SPECIAL_TOKENS, UNK, Vocab

MAX_CHARS_PER_WORD = 200


# NUL, U+FFFD and every Cc/Cf character except tab, newline and CR (Unicode 14, Python 3.11's unicodedata);
# tests/test_tokenizer.py rebuilds this list from unicodedata and checks that it is the same.
REMOVED_RANGES = (
    (0x0, 0x8),
    (0xB, 0xC),
    (0xE, 0x1F),
    (0x7F, 0x9F),
    (0xAD, 0xAD),
    (0x600, 0x605),
    (0x61C, 0x61C),
    (0x6DD, 0x6DD),
    (0x70F, 0x70F),
    (0x890, 0x891),
    (0x8E2, 0x8E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0xFFFD, 0xFFFD),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x13438),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)
_REMOVED = re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in REMOVED_RANGES) + "]+")
# Removed characters that str.split also takes for whitespace: the reference removes them, so that the letters
# around them join, and a test on the text without its whitespace does not see them.
_SPLITTING_CONTROLS = "\x0b\x0c\x1c\x1d\x1e\x1f\x85"


def prepare_text(text: str, lowercase: bool) -> str:
    """The steps that must happen on the whole text before any chunk is tokenised on its own."""
    if _may_need_cleaning(text, text.split()):
        text = _REMOVED.sub("", text)
    return text.lower() if lowercase else text


_WORD_CHARACTER = re.compile(r"\w")


def has_tokens(text: str) -> bool:
    """Whether text tokenises to anything: it does where it holds a word character, which nothing removes (one
    search, which stops at the first), else where prepare_text leaves anything but whitespace."""
    return _WORD_CHARACTER.search(text) is not None or bool(prepare_text(text, False).split())


def prepared_chunks(text: str, lowercase: bool) -> tuple[list[str], int]:
    """prepare_text(text, lowercase).split() and the prepared text's length, with one split where nothing is to be
    removed (almost always): lower-casing adds and takes no removed character and no whitespace, so the test on the
    lower-cased chunks is the test on the text's own."""
    prepared = text.lower() if lowercase else text
    chunks = prepared.split()
    if _may_need_cleaning(text, chunks):
        prepared = prepare_text(text, lowercase)
        chunks = prepared.split()
    return chunks, len(prepared)


def _may_need_cleaning(text: str, chunks: list[str], breaks: int = 0) -> bool:
    """False when text (split into chunks) holds no character to remove, but for `breaks` U+FFFD it holds on
    purpose. Every removed character but U+FFFD is non-printable, and str.isprintable is one cheap pass where the
    regex is a slow one; whitespace is non-printable too, so the test is on the chunks."""
    return (
        text.count("\ufffd") != breaks
        or not "".join(chunks).isprintable()
        or any(c in text for c in _SPLITTING_CONTROLS)
    )


def chunk_normalizer(lowercase: bool) -> normalizers.Normalizer:
    """What HF applies to text already passed through `prepare_text` (lower-casing happened there)."""
    return normalizers.BertNormalizer(
        clean_text=False, handle_chinese_chars=True, strip_accents=lowercase, lowercase=False
    )


def build_hf_tokenizer(vocab: Vocab, lowercase: bool) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(vocab.ids, unk_token=UNK, max_input_chars_per_word=MAX_CHARS_PER_WORD))
    tok.normalizer = chunk_normalizer(lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


# Python's str.lower gives a capital sigma its final form at the end of a word (Unicode's Final_Sigma context:
# after a cased letter, not before one, case-ignorable characters skipped). HF lower-cases one character at a
# time, so the final forms are put in first; \K keeps the context out of what is replaced.
_FINAL_SIGMA = r"\p{Cased}\p{Case_Ignorable}*\KΣ(?!\p{Case_Ignorable}*\p{Cased})"


def standalone_tokenizer(vocab: Vocab, lowercase: bool) -> Tokenizer:
    """The whole tokenisation as one HF Tokenizer (saved as tokenizer.json): prepare_text's removal and
    lower-casing as normalizers ahead of the chunk normaliser, [CLS] A [SEP] (B [SEP]) around sequences, and the
    five special tokens registered, as HF's BertTokenizerFast registers them (so the text "[MASK]" is the mask
    token there, where `create`, like the reference, tokenises it as text)."""
    removed = "[" + "".join(f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in REMOVED_RANGES) + "]"
    steps = [normalizers.Replace(Regex(removed), "")]
    if lowercase:
        steps += [normalizers.Replace(Regex(_FINAL_SIGMA), "ς"), normalizers.Lowercase()]
    tok = build_hf_tokenizer(vocab, lowercase)
    tok.normalizer = normalizers.Sequence([*steps, chunk_normalizer(lowercase)])
    ids = vocab.ids
    tok.post_processor = processors.BertProcessing((SEP, ids[SEP]), (CLS, ids[CLS]))
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    return tok


def tokenizer_config(lowercase: bool, max_length: int = 512) -> dict:
    """tokenizer_config.json for transformers' AutoTokenizer: the generic fast class, which takes tokenizer.json
    as it is (a BERT class would rebuild its own normaliser, without the reference's cleaning and final sigma)."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "do_lower_case": lowercase,
        "model_max_length": max_length,
        "clean_up_tokenization_spaces": False,
        "unk_token": UNK,
        "sep_token": SEP,
        "pad_token": PAD,
        "cls_token": CLS,
        "mask_token": MASK,
        "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
    }


# What stands between two sentences in the one split of a document's sentences (WordPieceTokenizer): U+FFFD,
# which prepare_text removes, so that no chunk of text is ever this one; a chunk of no ids.
_SENTENCE_BREAK = "\ufffd"


class WordPieceTokenizer:
    """Text → WordPiece ids, exactly as the reference FullTokenizer would produce them, through a table of the
    chunks seen so far (wordpiece/chunk_table.py); once asked (encode_sentences_marked), the table also says, per
    id, whether it is the token of one CJK ideograph."""

    def __init__(self, vocab: Vocab, lowercase: bool = True, cache_limit: int = CHUNK_LIMIT):
        self.vocab = vocab
        self.lowercase = lowercase
        self._hf = build_hf_tokenizer(vocab, lowercase)
        # A chunk of ASCII alone is what the normaliser gives back unchanged (no accent, no ideograph, cased as it
        # is), so it skips the normaliser: a third of the work of learning it.
        self._hf_ascii = build_hf_tokenizer(vocab, lowercase)
        self._hf_ascii.normalizer = None
        self._table = self._new_table({}, cache_limit)

    @staticmethod
    def _new_table(extras: dict, limit: int) -> ChunkTable:
        return ChunkTable(extras, limit, (_SENTENCE_BREAK,))

    def encode(self, text: str) -> np.ndarray:
        """All ids of a text, in order (int32)."""
        where, _ = self._table.where(prepared_chunks(text, self.lowercase)[0], self._learn)
        return self._table.ids[where]

    def tokenize(self, text: str) -> list[str]:
        tokens = self.vocab.tokens
        return [tokens[i] for i in self.encode(text).tolist()]

    def encode_sentences(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Ids of several sentences as one flat int32 array plus the token count of each sentence."""
        where, lengths = self._sentence_ranges(sentences)
        return self._table.ids[where], lengths

    def encode_sentences_marked(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """encode_sentences, and per id whether it is the token of one CJK ideograph (the character itself, or
        [UNK] for one the vocab lacks), in the order of the text's ideographs."""
        if "ideograph" not in self._table.columns:  # a table that marks them, from the first call that asks
            self._table = self._new_table({"ideograph": bool}, self._table.limit)
        where, lengths = self._sentence_ranges(sentences)
        return self._table.ids[where], lengths, self._table.columns["ideograph"][where]

    def _sentence_ranges(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(where the sentences' ids are in the table, in order; the token count of each sentence)."""
        # The whole document is prepared and split at once, a break between its sentences: every step is local to
        # characters (and lower-casing's final-sigma context never crosses the line breaks around a break).
        text = f"\n{_SENTENCE_BREAK}\n".join(sentences)
        chunks = (text.lower() if self.lowercase else text).split()
        if not sentences or _may_need_cleaning(text, chunks, len(sentences) - 1):
            return self._cleaned_sentence_ranges(sentences)
        rows = self._table.rows(chunks, self._learn)
        where, per_chunk = self._table.ranges(rows)
        tokens_before = np.concatenate(([0], np.cumsum(per_chunk)))
        ends = tokens_before[np.append(np.flatnonzero(rows == 0), len(chunks))]  # the break's row is the first
        return where, np.diff(ends, prepend=0).astype(np.int32)

    def _cleaned_sentence_ranges(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """_sentence_ranges of sentences with characters to remove (rare), a line each: lower-casing must follow
        their removal (final sigma sees through nothing), and the removal may take the breaks' U+FFFD too."""
        text = "\n".join(" ".join(s.split("\n")) for s in sentences)
        chunks_per_sentence = [line.split() for line in prepare_text(text, self.lowercase).split("\n")]
        where, per_chunk = self._table.where(list(chain.from_iterable(chunks_per_sentence)), self._learn)
        last_chunk = np.cumsum(np.fromiter(map(len, chunks_per_sentence), dtype=np.int64, count=len(sentences)))
        ends = np.concatenate(([0], np.cumsum(per_chunk)))[last_chunk]
        return where, np.diff(np.concatenate(([0], ends))).astype(np.int32)

    def _learn(self, missing: list[str]) -> None:
        """Tokenise the unseen chunks, each a word of its own (those of ASCII alone in one HF call, the others in
        another), and add them to the table."""
        ascii_only = [c for c in missing if c.isascii()]
        if ascii_only:
            self._learn_with(self._hf_ascii, ascii_only)
        if len(ascii_only) < len(missing):
            self._learn_with(self._hf, [c for c in missing if not c.isascii()])

    def _learn_with(self, tokenizer: Tokenizer, chunks: list[str]) -> None:
        enc = tokenizer.encode(chunks, is_pretokenized=True, add_special_tokens=False)
        ids = np.asarray(enc.ids, dtype=np.int32)
        owner = np.asarray(enc.word_ids, dtype=np.int64)  # the chunk of each token
        counts = np.bincount(owner, minlength=len(chunks))
        if "ideograph" not in self._table.columns:
            self._table.add(chunks, counts, ids)
            return
        # A token of one character that is an ideograph (an ideograph is always a word, so a token, of its own).
        joined = "".join(chunks)
        code_points = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), np.uint32)
        spans = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)  # characters of each token in its chunk
        first_char = np.cumsum([0, *map(len, chunks[:-1])])[owner] + spans[:, 0]
        ideograph = (spans[:, 1] - spans[:, 0] == 1) & ideograph_code_points(
            code_points[np.minimum(first_char, len(joined) - 1)]
        )
        self._table.add(chunks, counts, ids, ideograph=ideograph)
