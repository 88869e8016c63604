"""The fast tokenizer gives exactly the reference FullTokenizer's tokens, on real text and on edge cases."""

from __future__ import annotations

import unicodedata

import pytest

from bertcorpus.wordpiece.tokenizer import REMOVED_RANGES, WordPieceTokenizer
from bertcorpus.wordpiece.vocab import Vocab, VocabError

from conftest import BOOKS, SAMPLE_TEXT, VOCAB
from full_tokenizer import FullTokenizerEquivalent

EDGE_CASES = [
    "ΟΔΟΣ ΣΑΣ",  # final sigma when lower-casing
    "foo\u2028bar\u2029baz",  # line/paragraph separators split like whitespace
    "x\ue000y z\U000f0000",  # private-use characters stay inside the word
    "İstanbul Ærø Ångström naïve café",
    "soft\u00adhyphen zero\u200bwidth",  # Cf characters vanish
    "tab\tnew\nline\r\x01ctrl\x1fsep",
    "page\x0cbreak vertical\x0btab file\x1cgroup\x1drecord\x1eunit next\x85line",  # removed, not split on
    "東京大学 and 한국어 and ｆｕｌｌｗｉｄｔｈ",
    "x" * 201 + " " + "y" * 200,  # over 200 characters is [UNK]
    "[MASK] [CLS] <s> e.g. U.S.A. $3.50 — “quoted” 'single'",
    "\ufffdreplacement\x00nul",
    "",
    "   \n\t  ",
]


@pytest.fixture(scope="module")
def vocab() -> Vocab:
    return Vocab.load(str(VOCAB))


def test_removed_ranges_match_unicodedata():
    expected = [
        c
        for c in range(0x110000)
        if c in (0, 0xFFFD) or (unicodedata.category(chr(c)) in ("Cc", "Cf") and chr(c) not in "\t\n\r")
    ]
    listed = [c for a, b in REMOVED_RANGES for c in range(a, b + 1)]
    assert listed == expected


@pytest.mark.parametrize("lowercase", [True, False])
def test_identical_tokens_on_real_text(vocab, lowercase):
    ours = WordPieceTokenizer(vocab, lowercase)
    reference = FullTokenizerEquivalent(list(vocab.tokens), lowercase)
    texts = [SAMPLE_TEXT.read_text(encoding="utf-8")] + [b.read_text(encoding="utf-8") for b in BOOKS]
    for text in texts:
        assert ours.tokenize(text) == reference.tokenize(text)


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize("text", EDGE_CASES)
def test_identical_tokens_on_edge_cases(vocab, lowercase, text):
    ours = WordPieceTokenizer(vocab, lowercase)
    assert ours.tokenize(text) == FullTokenizerEquivalent(list(vocab.tokens), lowercase).tokenize(text)


def test_known_tokens(vocab):
    tok = WordPieceTokenizer(vocab, True)
    assert tok.tokenize("The unaffable Ångström, [MASK]!") == [
        "the",
        "una",
        "##ffa",
        "##ble",
        "ang",
        "##strom",
        ",",
        "[",
        "mask",
        "]",
        "!",
    ]
    assert tok.tokenize("a" * 201) == ["[UNK]"]


def test_cache_does_not_change_results(vocab):
    tok = WordPieceTokenizer(vocab, True)
    text = BOOKS[0].read_text(encoding="utf-8")[:20000]
    first = list(tok.encode(text))
    assert list(tok.encode(text)) == first  # second call served from the cache
    assert list(WordPieceTokenizer(vocab, True).encode(text)) == first
    # A cache smaller than the text's distinct chunks is cleared and refilled, never wrong.
    small = WordPieceTokenizer(vocab, True, cache_limit=500)
    paragraphs = text.split("\n\n")
    assert [t for p in paragraphs for t in small.encode(p).tolist()] == [
        t for p in paragraphs for t in tok.encode(p).tolist()
    ]
    assert len(set(text.lower().split())) > 2 * 500  # so the small cache was cleared along the way


def test_encode_sentences_counts_tokens_per_sentence(vocab):
    tok = WordPieceTokenizer(vocab, True)
    ids, lengths = tok.encode_sentences(["Hello there.", "", "\x01", "How are you?"])
    assert lengths.tolist() == [3, 0, 0, 4]
    assert [vocab.tokens[i] for i in ids] == ["hello", "there", ".", "how", "are", "you", "?"]


@pytest.mark.parametrize("lowercase", [True, False])
def test_a_documents_sentences_are_split_at_once_as_each_alone(vocab, lowercase):
    """A document's sentences are split into chunks in one pass, with a break between them: each sentence gets the
    reference's tokens of it alone, on a real book's sentences and on sentences with line breaks inside, empty, of
    whitespace, with a final sigma at a line's end, with a chunk of no tokens (an accent alone, stripped) and with a
    U+FFFD (the character the breaks are made of), with a table too small for them too (cleared on the way)."""
    from bertcorpus.transforms.sentences import document_sentences

    reference = FullTokenizerEquivalent(list(vocab.tokens), lowercase)
    sentences = document_sentences(BOOKS[1].read_text(encoding="utf-8")[:30000])
    odd = ["two\nlines", "", "  \t ", "ΟΔΟΣ\nΣΑΣ", "東京 大学 ΣΑΣ", "a \u0301 b", "x\ufffdy", "last"]
    for tok in (WordPieceTokenizer(vocab, lowercase), WordPieceTokenizer(vocab, lowercase, cache_limit=300)):
        for batch in (sentences, sentences[:50] + odd[:6], sentences[:50] + odd, odd[:1], [""]):
            ids, lengths = tok.encode_sentences(batch)
            expected = [reference.tokenize(s) for s in batch]
            assert lengths.tolist() == [len(e) for e in expected]
            assert [vocab.tokens[i] for i in ids] == [t for e in expected for t in e]


def test_encode_sentences_removes_controls_that_split_takes_for_whitespace(vocab):
    sentences = ["A page\x0cbreak.", "vertical\x0btab", "next\x85line"]
    reference = FullTokenizerEquivalent(list(vocab.tokens), True)
    ids, lengths = WordPieceTokenizer(vocab, True).encode_sentences(sentences)
    assert [vocab.tokens[i] for i in ids] == [t for s in sentences for t in reference.tokenize(s)]
    assert lengths.tolist() == [len(reference.tokenize(s)) for s in sentences]


def test_vocab_without_specials_is_rejected(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\nhello\n")
    with pytest.raises(VocabError, match=r"lacks \[CLS\], \[SEP\], \[MASK\]"):
        Vocab.load(str(path))


def test_missing_vocab_is_a_clear_error(tmp_path):
    with pytest.raises(VocabError, match="cannot read vocab file"):
        Vocab.load(str(tmp_path / "nope.txt"))


def test_regular_ids_exclude_bracketed_tokens(vocab):
    regular = {vocab.tokens[i] for i in vocab.regular_token_ids()}
    assert not any(t.startswith("[") and t.endswith("]") for t in regular)
    assert {"the", "##s", "[", "]"} <= regular
    assert len(vocab.regular_token_ids()) == 30522 - 999  # 994 unused + 5 specials
