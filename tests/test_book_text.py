"""Book decoding, cleaning, line layouts and dedup keys (transforms/book_decoding.py, book_cleaning.py,
book_lines.py, book_duplicates.py) on the real samples in tests/data/books."""

from __future__ import annotations

import csv
import functools
import io
import random
import re
import textwrap
import zipfile
from pathlib import Path

import pytest

from bertcorpus.transforms import minhash
from bertcorpus.transforms.book_cleaning import CleanBook, clean_book
from bertcorpus.transforms.book_decoding import BookRejection, DecodedBook, decode_book
from bertcorpus.transforms.book_duplicates import dedup_key, jaccard_estimate, minhash_signature
from bertcorpus.transforms.book_lines import looks_sentence_per_line, read_hf_bookcorpus_lines

BOOKS = Path(__file__).resolve().parent / "data" / "books"
ALICE = BOOKS / "gutenberg_utf8" / "11-0.txt"
FRANKENSTEIN = BOOKS / "gutenberg_utf8" / "84-0.txt"
HOLMES = BOOKS / "gutenberg_utf8" / "1661-0.txt"
GATSBY_1252 = BOOKS / "gutenberg_cp1252_with_header" / "pg64317.txt"
FRANKENSTEIN_1252 = BOOKS / "gutenberg_cp1252_with_header" / "pg84.txt"
PG19 = BOOKS / "pg19_format"
ALL_BOOKS = sorted(BOOKS.glob("*/*.txt"))

LICENCE_TEXT = ("Project Gutenberg", "*** START", "*** END", "www.gutenberg.org", "Produced by", "SMALL PRINT")
HEADING_LINE = re.compile(r"^(?:CHAPTER|Chapter|LETTER|Letter|BOOK|PART|Part)\b|^[IVXLC]+\.?$|^Contents$", re.M)
MOJIBAKE = ("â€", "Ã", "Â", "\ufffd", "\r")


@functools.cache
def decoded(path: Path) -> DecodedBook:
    result = decode_book(path.read_bytes())
    assert isinstance(result, DecodedBook), result
    return result


@functools.cache
def cleaned(path: Path) -> CleanBook:
    return clean_book(decoded(path).text)


def paragraphs(path: Path) -> list[str]:
    return cleaned(path).text.split("\n\n")


def raw_paragraphs(path: Path, first_words: str, count: int) -> str:
    """`count` hard-wrapped paragraphs of the raw file, starting with the one that begins with first_words."""
    blocks = [block.strip("\n") for block in decoded(path).text.split("\n\n")]
    start = next(i for i, block in enumerate(blocks) if block.startswith(first_words))
    return "\n\n".join(blocks[start : start + count])


# --------------------------------------------------------------------------------------------------
# Cleaning the novels
# --------------------------------------------------------------------------------------------------

FIRST_AND_LAST = [
    (
        ALICE,
        "Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing to "
        "do: once or twice she had peeped into the book her sister was reading, but it had no pictures or "
        "conversations in it, “and what is the use of a book,” thought Alice “without pictures or "
        "conversations?”",
        "remembering her own child-life, and the happy summer days.",
    ),
    (
        FRANKENSTEIN,
        "You will rejoice to hear that no disaster has accompanied the commencement of an enterprise which you "
        "have regarded with such evil forebodings.",
        "He was soon borne away by the waves and lost in darkness and distance.",
    ),
    (
        HOLMES,
        "To Sherlock Holmes she is always the woman. I have seldom heard him mention her under any other name.",
        "Walsall, where I believe that she has met with considerable success.",
    ),
    (
        GATSBY_1252,
        "In my younger and more vulnerable years my father gave me some advice that I’ve been turning over in my "
        "mind ever since.",
        "So we beat on, boats against the current, borne back ceaselessly into the past.",
    ),
    (
        FRANKENSTEIN_1252,
        "You will rejoice to hear that no disaster has accompanied the commencement of an enterprise which you "
        "have regarded with such evil forebodings.",
        "He was soon borne away by the waves and lost in darkness and distance.",
    ),
]


@pytest.mark.parametrize(("path", "first", "last"), FIRST_AND_LAST, ids=[case[0].name for case in FIRST_AND_LAST])
def test_first_and_last_sentences_survive(path: Path, first: str, last: str) -> None:
    paras = paragraphs(path)
    body_start = next(i for i, p in enumerate(paras) if p.startswith(first))
    assert body_start <= 6, paras[:body_start]  # at most a few title or epigraph lines before it
    assert paras[-1].endswith(last)


@pytest.mark.parametrize("path", ALL_BOOKS, ids=lambda p: p.name)
def test_no_licence_headings_or_markup_left(path: Path) -> None:
    book = cleaned(path)
    for needle in LICENCE_TEXT:
        assert needle not in book.text, needle
    assert "project gutenberg" not in book.text.lower()
    assert not HEADING_LINE.search(book.text), HEADING_LINE.search(book.text)
    assert "[Illustration" not in book.text
    assert not re.search(r"(?<![\w_])_\w|\w_(?![\w_])", book.text), "PG emphasis underscores left"
    assert not re.search(r"^[ *\-~=_.]+$", book.text, re.M), "separator line left"
    # Paragraphs are separated by exactly one blank line and carry no stray whitespace.
    assert "\n\n\n" not in book.text
    assert book.text == book.text.strip()
    assert all(p == p.strip() and p for p in book.text.split("\n\n"))
    assert not any(line != line.strip() for line in book.text.split("\n"))


def test_alice_headings_toc_and_title_page_are_counted_not_kept() -> None:
    book = cleaned(ALICE)
    assert book.title is None  # no PG header in this copy
    assert "Down the Rabbit-Hole" not in book.text  # TOC entry and chapter title only
    assert "THE MILLENNIUM FULCRUM EDITION" not in book.text
    assert "THE END" not in book.text
    assert "by Lewis Carroll" not in book.text
    assert book.removed["toc_lines"] >= 13  # the heading and the twelve entries
    assert book.removed["heading_lines"] >= 24  # twelve two-line chapter headings
    assert book.removed["separator_lines"] >= 5
    assert book.removed["illustration_lines"] == 1


def test_table_of_contents_stops_at_the_first_chapter() -> None:
    # The TOC of Frankenstein starts with "Letter 1"; the body's "Letter 1" ends it, so the short lines that
    # open the first letter (address and date, TOC-like on their own) are kept.
    paras = paragraphs(FRANKENSTEIN)
    assert paras[2:4] == ["To Mrs. Saville, England.", "St. Petersburgh, Dec. 11th, 17—."]
    assert cleaned(FRANKENSTEIN).removed["toc_lines"] == 1 + 28  # "CONTENTS" and its entries


def test_hard_wrapped_paragraphs_are_rejoined() -> None:
    # 8 lines in the file, one paragraph in the output; "_very_" emphasis loses its underscores.
    assert (
        "There was nothing so very remarkable in that; nor did Alice think it so very much out of the way to "
        "hear the Rabbit say to itself, “Oh dear! Oh dear! I shall be late!” (when she thought it over "
        "afterwards, it occurred to her that she ought to have wondered at this, but at the time it all seemed "
        "quite natural); but when the Rabbit actually took a watch out of its waistcoat-pocket, and looked at "
        "it, and then hurried on,"
    ) in paragraphs(ALICE)[3]
    # A break after an em dash or a hyphen closes up instead of becoming a space (the samples have none, so
    # one of Alice's paragraphs is wrapped differently for the test).
    para = raw_paragraphs(ALICE, "The long grass rustled at her feet", 1)
    para = para.replace("crashed\naround it—once", "crashed around it—\nonce").replace("slate-pencil", "slate-\npencil")
    assert "around it—\nonce" in para and "slate-\npencil" in para
    rejoined = clean_book(para).text
    assert "crashed around it—once more the shriek" in rejoined and "the Lizard’s slate-pencil, and" in rejoined
    advice = (
        "“Whenever you feel like criticizing anyone,” he told me, “just remember that all the people in this "
        "world haven’t had the advantages that you’ve had.”"
    )
    assert advice in paragraphs(GATSBY_1252)  # three lines in the file


def test_verse_keeps_its_lines_and_words() -> None:
    assert (
        "“How doth the little crocodile\nImprove his shining tail,\nAnd pour the waters of the Nile\n"
        "On every golden scale!"
    ) in paragraphs(ALICE)
    # The epigraph of Gatsby, indented two spaces in the file, stays one stanza.
    assert paragraphs(GATSBY_1252)[0] == (
        "Then wear the gold hat, if that will move her;\nIf you can bounce high, bounce for her too,\n"
        "Till she cry “Lover, gold-hatted, high-bouncing lover,\nI must have you!”"
    )


def test_every_word_of_the_body_is_kept_in_order() -> None:
    """From the first chapter on, only headings are dropped from Frankenstein: compare the word sequences."""
    words = re.compile(r"[^\W_]+")
    source = decoded(FRANKENSTEIN).text
    body = source[source.index("You will rejoice to hear") :]
    body = re.sub(r"^(?:Letter|Chapter) \d+$", "", body, flags=re.M)
    out = cleaned(FRANKENSTEIN).text
    assert words.findall(out[out.index("You will rejoice to hear") :]) == words.findall(body)


# --------------------------------------------------------------------------------------------------
# Windows-1252 files with the full PG header and footer
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "title"),
    [(GATSBY_1252, "The Great Gatsby"), (FRANKENSTEIN_1252, "Frankenstein; Or, The Modern Prometheus")],
    ids=["gatsby", "frankenstein"],
)
def test_cp1252_books_decode_without_mojibake(path: Path, title: str) -> None:
    raw = path.read_bytes()
    assert b"\r\n" in raw and b"\x93" in raw  # the premise: CRLF and cp1252 curly quotes
    book = decoded(path)
    assert book.encoding == "cp1252"
    assert book.replaced == 0
    for bad in MOJIBAKE:
        assert bad not in book.text, bad
    clean = cleaned(path)
    assert clean.title == title
    assert "“" in clean.text and "”" in clean.text and "’" in clean.text
    assert clean.removed["licence_lines"] > 300  # header plus the licence after the END marker
    assert "Title:" not in clean.text and "Release date" not in clean.text


def test_cp1252_ellipsis_and_dashes() -> None:
    text = cleaned(GATSBY_1252).text
    assert "stretch out our arms further … And one fine morning—" in text  # bytes 0x85 and 0x97


# --------------------------------------------------------------------------------------------------
# PG-19 layout: a "Produced by" line on top, an "End of the Project Gutenberg EBook" line at the bottom
# --------------------------------------------------------------------------------------------------


def test_pg19_metadata_lists_the_samples() -> None:
    with open(PG19 / "metadata.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert {row[0] for row in rows} == {p.stem for p in PG19.glob("*.txt")}
    assert ["10006", "La Fiammetta by Giovanni Boccaccio", "1907", "http://www.gutenberg.org/ebooks/10006"] in rows


@pytest.mark.parametrize("path", sorted(PG19.glob("*.txt")), ids=lambda p: p.name)
def test_pg19_credit_and_end_line_removed(path: Path) -> None:
    assert b"Produced by" in path.read_bytes() and b"End of the Project Gutenberg EBook" in path.read_bytes()
    book = cleaned(path)
    assert book.title is None  # PG-19 titles come from metadata.csv
    assert book.removed["credit_lines"] == 1
    assert book.removed["licence_lines"] >= 3  # the end line, its continuation and the closing "***"
    assert "Produced by" not in book.text
    assert "End of the" not in book.text
    assert not book.text.rstrip().endswith("***")


def test_pg19_fiammetta_text() -> None:
    paras = paragraphs(PG19 / "10006.txt")
    assert paras[0].startswith(
        "Youth, beauty, and love, wit, gayety and laughter, are the component parts of the delightful picture "
        "conjured up by the mere name of Giovanni Boccaccio, the prince of story-tellers for all generations of men."
    )
    assert paras[-1].endswith("as I now know to my fruitless and never-ending sorrow.")


# --------------------------------------------------------------------------------------------------
# Other layouts: older PG headers, shop ebooks, headings, separators, art
# --------------------------------------------------------------------------------------------------


def test_old_small_print_header_and_footer() -> None:
    body = raw_paragraphs(ALICE, "Alice was beginning", 3)
    text = (
        "The Project Gutenberg Etext of Alice's Adventures in Wonderland\n\n"
        "Title: Alice's Adventures in Wonderland\n\nAuthor: Lewis Carroll\n\n"
        "**Welcome To The World of Free Plain Vanilla Electronic Texts**\n\n"
        "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\n\n\n"
        "This etext was prepared by a volunteer.\n\n\n"
        f"{body}\n\n\nEnd of Project Gutenberg's Alice's Adventures in Wonderland\n\nlicence text\n"
    )
    book = clean_book(text)
    assert book.title == "Alice's Adventures in Wonderland"
    assert book.text.startswith("Alice was beginning to get very tired")
    assert book.text.endswith("rabbit-hole under the hedge.")
    assert book.removed["credit_lines"] == 1


def test_shop_ebook_front_matter_removed() -> None:
    body = raw_paragraphs(ALICE, "Alice was beginning", 2)
    text = (
        "Copyright 2012 A. Writer\n\nSmashwords Edition\n\n"
        "This ebook is licensed for your personal enjoyment only. This ebook may not be re-sold or given\n"
        "away to other people. If you would like to share this book with another person, please purchase\n"
        "an additional copy for each recipient.\n\n"
        "Thank you for respecting the hard work of this author.\n\n* * * * *\n\n"
        f"{body}\n"
    )
    book = clean_book(text)
    assert book.text.startswith("Alice was beginning")
    assert book.text.split("\n\n")[-1].startswith("So she was considering")
    for gone in ("Copyright", "Smashwords", "personal enjoyment", "respecting the hard work"):
        assert gone not in book.text
    assert book.removed["licence_lines"] == 6
    assert book.removed["separator_lines"] == 1


def test_headings_separators_art_and_illustrations() -> None:
    para = raw_paragraphs(FRANKENSTEIN, "You will rejoice", 1)
    text = "\n\n".join(
        [
            "BOOK ONE",
            para,
            "PART II",
            "LETTER IV",
            para,
            "* * *",
            para,
            "-----",
            "~~~~~~~~",
            para,
            "   /\\_/\\\n  ( o.o )\n   > ^ <",
            para,
            "[Illustration: The ship\nin the ice]",
            para,
            "CHAPTER XII.\nTHE STORM",
            para,
            "Chapter 3: Out at Sea",
            "XIV",
            para,
        ]
    )
    book = clean_book(text)
    joined = " ".join(para.split())
    assert book.text.split("\n\n") == [joined] * 8
    assert book.removed == {
        "heading_lines": 7,
        "separator_lines": 3,
        "art_lines": 3,
        "illustration_lines": 2,
    }


def test_heading_glued_to_its_paragraph_is_dropped_alone() -> None:
    long_para = raw_paragraphs(FRANKENSTEIN, "You will rejoice", 1)
    short_para = raw_paragraphs(FRANKENSTEIN, "I shall continue my journal", 1)  # two lines
    book = clean_book(f"CHAPTER 1\n{long_para}\n\nCHAPTER 2\n{short_para}")
    assert book.text == " ".join(long_para.split()) + "\n\n" + " ".join(short_para.split())
    assert book.removed == {"heading_lines": 2}


def test_prose_that_starts_like_a_heading_is_kept() -> None:
    text = "Part of the crew was ashore.\n\nBook lovers came to\nsee the ship, and stayed.\n\nI. e. the mate."
    assert clean_book(text).text.split("\n\n") == [
        "Part of the crew was ashore.",
        "Book lovers came to see the ship, and stayed.",
        "I. e. the mate.",
    ]


def test_nfc_and_line_endings() -> None:
    para = raw_paragraphs(FRANKENSTEIN, "You will rejoice", 2)
    text = "Cafe\u0301 noir. " + para.replace("\n", "\r")
    book = clean_book(text)
    assert book.text.startswith("Café noir. You will rejoice")
    assert "\u0301" not in book.text and "\r" not in book.text
    assert book.text.split("\n\n")[1].startswith("I am already far north of London, and as I walk")


# --------------------------------------------------------------------------------------------------
# Duplicates
# --------------------------------------------------------------------------------------------------


def test_same_book_reencoded_has_the_same_key() -> None:
    reference = dedup_key(cleaned(ALICE).text)
    text = decoded(ALICE).text
    copies = {
        "utf-16 with BOM, CRLF": text.replace("\n", "\r\n").encode("utf-16"),
        "utf-16-be without BOM": text.encode("utf-16-be"),
        "utf-8 with BOM, CR": b"\xef\xbb\xbf" + text.replace("\n", "\r").encode("utf-8"),
    }
    for name, raw in copies.items():
        copy = decode_book(raw)
        assert isinstance(copy, DecodedBook), name
        assert dedup_key(clean_book(copy.text).text) == reference, name


def test_rewrapped_copy_has_the_same_key() -> None:
    text = decoded(HOLMES).text
    rewrapped = "\n\n".join(textwrap.fill(block, width=50) for block in text.split("\n\n"))
    assert rewrapped != text
    assert dedup_key(rewrapped) == dedup_key(text)
    # Casing, curly or straight quotes and emphasis markers do not change the key either.
    assert dedup_key("“Don’t,” said _he_ — twice.") == dedup_key('"DON\'T," said he -- twice.')


def test_different_books_have_different_keys_and_low_similarity() -> None:
    keys = {dedup_key(cleaned(path).text) for path in ALL_BOOKS}
    assert len(keys) == len(ALL_BOOKS)
    alice, frankenstein = minhash_signature(cleaned(ALICE).text), minhash_signature(cleaned(FRANKENSTEIN).text)
    assert jaccard_estimate(alice, frankenstein) < 0.1


def test_two_editions_of_one_novel_are_near_duplicates() -> None:
    # The UTF-8 and cp1252 Frankensteins come from different PG releases: a few words differ.
    utf8, cp1252 = cleaned(FRANKENSTEIN).text, cleaned(FRANKENSTEIN_1252).text
    assert dedup_key(utf8) != dedup_key(cp1252)
    assert jaccard_estimate(minhash_signature(utf8), minhash_signature(cp1252)) >= 0.9


def test_minhash_signature_is_stable() -> None:
    text = "The quick brown fox jumps over the lazy dog while the cat sleeps."
    signature = minhash_signature(text, num_perm=8)
    empty = 2**64 - 1
    assert signature == (
        empty,
        empty,
        5405625967486643965,
        8928281791166887438,
        10085341089729617579,
        12101620874437000621,
        empty,
        16289775050055034044,
    )
    assert minhash_signature("THE quick, brown fox -- jumps over\nthe lazy dog while the cat sleeps!", 8) == signature
    assert jaccard_estimate(signature, signature) == 1.0
    assert minhash_signature("") == (empty,) * 64


def test_minhash_in_chunks_equals_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Long books are hashed in chunks cut at spaces, to bound memory; the signature must not change."""
    text = cleaned(ALICE).text
    whole = minhash_signature(text)
    monkeypatch.setattr(minhash, "_CHUNK", 997)
    assert minhash_signature(text) == whole


# --------------------------------------------------------------------------------------------------
# Decoding: encodings and bad input
# --------------------------------------------------------------------------------------------------


def _zip(epub: bool) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        if epub:
            z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        z.writestr("chapter.txt", ALICE.read_text(encoding="utf-8")[:5000])
    return buf.getvalue()


BAD_INPUT = [
    ("no bytes", b"", "empty"),
    ("whitespace", b" \r\n\t \n  ", "empty"),
    ("utf-16 whitespace", "\ufeff  \n \n".encode("utf-16-le"), "empty"),
    ("png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64), "binary"),
    ("pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n", "binary"),
    ("zip", _zip(epub=False), "binary"),
    ("epub", _zip(epub=True), "binary"),
    ("random bytes", random.Random(5).randbytes(8192), "binary"),
    ("control bytes", ("word \x02\x03\x04 " * 200).encode("ascii"), "binary"),
    ("high bytes", bytes(b | 0x80 for b in random.Random(3).randbytes(8192)), "undecodable"),
    ("utf-16 lone surrogates", b"\xff\xfe" + b"\x00\xd8A\x00" * 300, "undecodable"),
]


@pytest.mark.parametrize(("name", "raw", "reason"), BAD_INPUT, ids=[case[0] for case in BAD_INPUT])
def test_bad_input_is_rejected_with_a_reason(name: str, raw: bytes, reason: str) -> None:
    result = decode_book(raw)
    assert isinstance(result, BookRejection), (name, result)
    assert result.reason == reason, result
    assert result.detail
    if name == "epub":
        assert "epub" in result.detail


ZH_BOOK = Path(__file__).parent / "data" / "zh" / "pg25328-tou-peng-hsien-hua.txt"
ZH_WIKI = Path(__file__).parent / "data" / "zh" / "zhwiki-hanyu-plain.txt"


@pytest.mark.parametrize(
    ("name", "encoding", "text_file"),
    [
        ("traditional Chinese in Big5", "big5hkscs", ZH_BOOK),
        ("traditional Chinese in GB18030", "gb18030", ZH_BOOK),
        ("mixed scripts in GB18030", "gb18030", ZH_WIKI),
        ("Russian in KOI8-R", "koi8_r", None),
    ],
)
def test_legacy_encodings_of_other_scripts_are_recognised(name: str, encoding: str, text_file) -> None:
    """A book in the legacy encoding of its script is decoded by the encoding that makes coherent text, never read
    as cp1252 nonsense nor refused."""
    text = text_file.read_text(encoding="utf-8-sig") if text_file else "Война и мир. Часть первая. " * 300
    raw = text.encode(encoding, errors="replace")  # Big5 lacks 11 of the book's rare characters
    result = decode_book(raw)
    assert isinstance(result, DecodedBook), (name, result)
    assert result.encoding == encoding.replace("_", "-") and result.replaced == 0
    assert result.text == raw.decode(encoding).replace("\r\n", "\n")


def _cut_in_a_character(text: str, encoding: str, at: float) -> bytes:
    """The text in `encoding`, cut in the middle of a double-byte character about `at` of the way through."""
    end = round(len(text) * at)
    while not "\u4e00" <= text[end] <= "\u9fff":
        end += 1
    return text[:end].encode(encoding, errors="replace") + text[end].encode(encoding)[:1]


@pytest.mark.parametrize("encoding", ["gb18030", "big5hkscs"])
def test_a_damaged_legacy_book_keeps_its_text_with_the_bad_bytes_replaced_and_counted(encoding: str) -> None:
    # One bad byte, or a last character cut in two, cost the whole book ("not UTF-8 (107,433 bad sequences)"),
    # where a UTF-8 book in that state keeps its text.
    text = ZH_BOOK.read_text(encoding="utf-8-sig").replace("\r\n", "\n")
    raw = text.encode(encoding, errors="replace")  # Big5 lacks 11 of the book's rare characters
    middle = len(raw) // 2
    cut = _cut_in_a_character(text, encoding, 0.6)
    # The bad byte takes the character after it in GB18030, whose decoder resynchronises a byte later.
    for damaged, replaced in ((raw[:middle] + b"\xff" + raw[middle:], {1, 2}), (cut, {1})):
        result = decode_book(damaged)
        assert isinstance(result, DecodedBook), result
        assert result.encoding == encoding and result.replaced == result.text.count("\ufffd") in replaced
        assert len(result.text) >= len(text) * 0.6 - 2 and result.text[:1000] == text[:1000]
    # Damage throughout: refused, and the reason is the encoding's, not UTF-8's.
    noise = random.Random(7)
    damaged = bytearray(raw)
    for _ in range(1000):
        damaged[noise.randrange(len(damaged))] = 0xFF
    result = decode_book(bytes(damaged))
    assert isinstance(result, BookRejection) and result.reason == "undecodable"
    assert "not UTF-8" in result.detail or f"undecodable as {encoding}" in result.detail


def test_a_chinese_book_read_as_latin1_and_saved_again_is_repaired() -> None:
    # UTF-8 bytes read as Latin-1 (or cp1252) and saved as UTF-8: 《 becomes ã\x80\x8a. The per-sequence repair
    # knows only the Western sequences; a text all of whose non-ASCII characters are such bytes is undone whole.
    text = ZH_BOOK.read_text(encoding="utf-8-sig").replace("\r\n", "\n")
    undefined = {0x81, 0x8D, 0x8F, 0x90, 0x9D}
    for reading in ("latin-1", "cp1252"):
        twice = "".join(
            chr(b) if reading == "latin-1" or b in undefined else bytes([b]).decode("cp1252")
            for b in text.encode("utf-8")
        )
        assert "ã\x80\x8aè±\x86" in twice or "ã€Šè±†" in twice  # 《豆
        result = decode_book(twice.encode("utf-8"))
        assert isinstance(result, DecodedBook)
        assert result.text == text and result.encoding == "utf-8"
        assert result.mojibake_fixed == sum(1 for c in text if ord(c) > 0x7F)
    # Latin-1 text that is not double-encoded stays as it is.
    latin = "Déjà vu: a naïve café owner’s façade.\n" * 40
    assert decode_book(latin.encode("utf-8")).text == latin


def test_invalid_bytes_in_utf8_are_replaced_and_counted() -> None:
    raw = ALICE.read_bytes()
    # A stray byte, a sequence cut short, a lone continuation byte.
    damaged = raw[:1000] + b"\xff" + raw[1000:50000] + b"\xe2\x80" + raw[50000:90000] + b"\x80" + raw[90000:]
    result = decode_book(damaged)
    assert isinstance(result, DecodedBook)
    assert (result.encoding, result.replaced, result.text.count("\ufffd")) == ("utf-8", 3, 3)
    assert result.text.replace("\ufffd", "") == decoded(ALICE).text


def test_undefined_cp1252_byte_is_replaced_and_counted() -> None:
    raw = GATSBY_1252.read_bytes()
    result = decode_book(raw[:20000] + b"\x81" + raw[20000:])
    assert isinstance(result, DecodedBook)
    assert (result.encoding, result.replaced) == ("cp1252", 1)
    assert "’" in result.text


def test_latin1_and_utf8_bom() -> None:
    text = "Déjà vu: a naïve café owner’s façade.\n" * 40
    latin1 = decode_book(text.replace("’", "'").encode("latin-1"))
    assert isinstance(latin1, DecodedBook)
    assert (latin1.encoding, latin1.text) == ("latin-1", text.replace("’", "'"))
    bom = decode_book(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert isinstance(bom, DecodedBook)
    assert (bom.encoding, bom.text) == ("utf-8-sig", text)


@pytest.mark.parametrize(
    ("codec", "bom", "label"),
    [
        ("utf-16-le", b"\xff\xfe", "utf-16-le"),
        ("utf-16-be", b"\xfe\xff", "utf-16-be"),
        ("utf-16-le", b"", "utf-16-le"),
        ("utf-16-be", b"", "utf-16-be"),
        ("utf-32-le", b"\xff\xfe\x00\x00", "utf-32-le"),
    ],
)
def test_wide_encodings(codec: str, bom: bytes, label: str) -> None:
    text = decoded(ALICE).text[:20000]
    result = decode_book(bom + text.replace("\n", "\r\n").encode(codec))
    assert isinstance(result, DecodedBook)
    assert (result.encoding, result.replaced) == (label, 0)
    assert result.text == text


def test_mojibake_is_repaired() -> None:
    text = "“I’ve been turning it over — ever since,” he said… Ève, façade, cœur.\n" * 20
    undefined = {0x81, 0x8D, 0x8F, 0x90, 0x9D}
    # UTF-8 bytes read as cp1252 (undefined bytes kept as C1 controls, as Windows tools do), saved as UTF-8.
    twice = "".join(chr(b) if b in undefined else bytes([b]).decode("cp1252") for b in text.encode("utf-8"))
    assert "â€™" in twice
    result = decode_book(twice.encode("utf-8"))
    assert isinstance(result, DecodedBook)
    assert result.text == text
    assert result.mojibake_fixed == 8 * 20  # “ ’ — ” … È ç œ on each line


def test_garbage_never_raises() -> None:
    rng = random.Random(11)
    alice = ALICE.read_bytes()
    gatsby = GATSBY_1252.read_bytes()
    samples = []
    for _ in range(60):
        start = rng.randrange(len(alice) - 5000)
        size = rng.randrange(1, 5000)
        samples += [
            rng.randbytes(size),
            alice[start : start + size],
            gatsby[start : start + size],
            b"\xff\xfe" + alice[start : start + size],  # "UTF-16" that is not
            bytes(rng.choice(b" \n\r\t*-_[]IVXabc.") for _ in range(size)),
            alice[start : start + size] + rng.randbytes(rng.randrange(1, 30)) + alice[start : start + size],
        ]
    for raw in samples:
        result = decode_book(raw)
        if isinstance(result, BookRejection):
            assert result.reason in ("empty", "binary", "undecodable") and result.detail
        else:
            assert "\r" not in result.text and "\x00" not in result.text
            assert "\r" not in clean_book(result.text).text


# --------------------------------------------------------------------------------------------------
# Sentence-per-line (HF bookcorpus) and paragraph-per-line layouts
# --------------------------------------------------------------------------------------------------


def _sentences(text: str) -> list[str]:
    return [s for p in text.split("\n\n") for s in re.split(r"(?<=[.!?])\s+(?=[“A-Z])", p.replace("\n", " "))]


def test_sentence_per_line_file_is_regrouped() -> None:
    sentences = [s.lower() for s in _sentences(cleaned(FRANKENSTEIN).text)]
    hf = "\n".join(sentences) + "\n"
    assert looks_sentence_per_line(hf)
    assert not looks_sentence_per_line(decoded(FRANKENSTEIN).text)
    out = read_hf_bookcorpus_lines(hf)
    paras = out.split("\n\n")
    assert " ".join(paras) == " ".join(sentences)  # every sentence, in order, none split
    assert max(map(len, paras)) < 600 + max(map(len, sentences))
    assert len(paras) > 500
    assert clean_book(hf).text == out


def test_other_layouts_pass_through_read_hf_bookcorpus_lines() -> None:
    text = cleaned(ALICE).text
    assert read_hf_bookcorpus_lines(text) == text


def test_paragraph_per_line_file_keeps_each_line() -> None:
    paras = [p for p in paragraphs(HOLMES) if "\n" not in p]
    book = clean_book("\n".join(paras))
    assert book.text.split("\n\n") == paras
