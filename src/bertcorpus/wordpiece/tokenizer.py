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


def _may_need_cleaning(text: str, chunks: list[str]) -> bool:
    """False when text (split into chunks) holds no character to remove. Every removed character but U+FFFD is
    non-printable, and str.isprintable is one cheap pass where the regex is a slow one; whitespace is
    non-printable too, so the test is on the chunks."""
    return "\ufffd" in text or not "".join(chunks).isprintable() or any(c in text for c in _SPLITTING_CONTROLS)


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


class WordPieceTokenizer:
    """Text → WordPiece ids, exactly as the reference FullTokenizer would produce them, through a table of the
    chunks seen so far (wordpiece/chunk_table.py) that also says, per id, whether it is the token of one CJK
    ideograph."""

    def __init__(self, vocab: Vocab, lowercase: bool = True, cache_limit: int = CHUNK_LIMIT):
        self.vocab = vocab
        self.lowercase = lowercase
        self._hf = build_hf_tokenizer(vocab, lowercase)
        self._table = ChunkTable({"ideograph": bool}, cache_limit)

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
        where, lengths = self._sentence_ranges(sentences)
        return self._table.ids[where], lengths, self._table.columns["ideograph"][where]

    def _sentence_ranges(self, sentences: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(where the sentences' ids are in the table, in order; the token count of each sentence)."""
        # The whole document is prepared at once: every step is local to characters (and lower-casing's
        # final-sigma context never crosses whitespace), so joining on newlines and splitting back is exact.
        if any("\n" in s for s in sentences):
            sentences = [" ".join(s.split("\n")) for s in sentences]
        text = "\n".join(sentences)
        chunks_per_sentence = [line.split() for line in (text.lower() if self.lowercase else text).split("\n")]
        all_chunks = list(chain.from_iterable(chunks_per_sentence))
        if _may_need_cleaning(text, all_chunks):
            # Rare: characters to remove. Lower-casing must follow their removal (final sigma sees through
            # nothing), so prepare the original text properly.
            chunks_per_sentence = [line.split() for line in prepare_text(text, self.lowercase).split("\n")]
            all_chunks = list(chain.from_iterable(chunks_per_sentence))
        where, per_chunk = self._table.where(all_chunks, self._learn)
        last_chunk = np.cumsum(np.fromiter(map(len, chunks_per_sentence), dtype=np.int64, count=len(sentences)))
        ends = np.concatenate(([0], np.cumsum(per_chunk)))[last_chunk]
        return where, np.diff(np.concatenate(([0], ends))).astype(np.int32)

    def _learn(self, missing: list[str]) -> None:
        """Tokenise the unseen chunks in one HF call (one space between them: each is a word of its own there too)
        and add them to the table."""
        joined = " ".join(missing)
        enc = self._hf.encode(joined, add_special_tokens=False)
        ids = np.asarray(enc.ids, dtype=np.int32)
        starts = np.fromiter((o[0] for o in enc.offsets), dtype=np.int64, count=len(ids))
        ends = np.fromiter((o[1] for o in enc.offsets), dtype=np.int64, count=len(ids))
        # A token of one character that is an ideograph (an ideograph is always a word, so a token, of its own).
        code_points = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), np.uint32)
        ideograph = (ends - starts == 1) & ideograph_code_points(code_points[np.minimum(starts, len(joined) - 1)])
        chunk_starts = np.cumsum([0] + [len(c) + 1 for c in missing[:-1]])
        owner = np.searchsorted(chunk_starts, starts, side="right") - 1
        bounds = np.searchsorted(owner, np.arange(len(missing) + 1), side="left")
        self._table.add(missing, np.diff(bounds), ids, ideograph=ideograph)
