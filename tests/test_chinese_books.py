"""extract-books on a real Chinese Project Gutenberg book (豆棚閒話, traditional characters, hard-wrapped at 40
characters with no blank line between paragraphs, a PG header and licence, chapter headings 第一則 ...): its text
comes out as Chinese paragraphs without stray spaces, in the script asked for, whatever legacy encoding it came in."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bertcorpus.pipeline.cli.commands import main as run_cli
from bertcorpus.transforms.book_cleaning import clean_book
from bertcorpus.transforms.book_decoding import decode_book

zhconv_rs = pytest.importorskip("zhconv_rs")

DATA = Path(__file__).parent / "data"
BOOK = DATA / "zh" / "pg25328-tou-peng-hsien-hua.txt"
ALICE = DATA / "books" / "gutenberg_utf8" / "11-0.txt"
CJK_SPACE_CJK = re.compile(r"(?<=[\u4e00-\u9fff，。；：、！？』」])[ \u3000](?=[\u4e00-\u9fff，。；：、！？『「])")


def test_the_cleaner_rebuilds_chinese_paragraphs_and_drops_the_apparatus():
    book = clean_book(decode_book(BOOK.read_bytes()).text)
    paragraphs = book.text.split("\n\n")
    assert book.title == "Tou Peng Hsien Hua"
    assert "Gutenberg" not in book.text and "Produced by" not in book.text
    # The twelve chapter headings (第一則 介之推火封妒婦, ...) and the preface headings go; the text stays.
    assert not any(p.startswith("第") and "則" in p[:4] for p in paragraphs)
    assert book.removed["heading_lines"] == 13
    assert paragraphs[0].startswith("吾鄉先輩詩人徐菊潭有《豆棚吟》一冊，其所詠古風、律絕諸篇，俱宇宙古今奇情快事")
    # Lines wrapped at 40 characters join without a space; a short line that ends a sentence ends a paragraph.
    assert len(CJK_SPACE_CJK.findall(book.text)) <= 2
    assert 250 <= len(paragraphs) <= 320 and max(map(len, paragraphs)) < 2500
    assert all(p.endswith(("。", "』", "」", "？", "！")) for p in paragraphs[1:-1])


def extract(inputs: Path, out: Path, *flags: str) -> dict:
    argv = ["extract-books", "--input", str(inputs), "--output", str(out), "--runner", "DirectRunner", *flags]
    assert run_cli(argv) == 0
    return json.loads((out / "manifest.json").read_text())


def documents(out: Path) -> dict[str, dict]:
    return {r["id"]: r for f in sorted(out.glob("documents-*.parquet")) for r in pq.read_table(f).to_pylist()}


@pytest.fixture(scope="module")
def books(tmp_path_factory) -> Path:
    """The book in UTF-8 (with its BOM), the same book in Big5, and an English book beside them."""
    folder = tmp_path_factory.mktemp("zh-books")
    shutil.copy(BOOK, folder / BOOK.name)
    text = BOOK.read_text(encoding="utf-8-sig")
    (folder / "big5-copy.txt").write_bytes(text.replace("\n", "\r\n").encode("big5hkscs", errors="replace"))
    shutil.copy(ALICE, folder / ALICE.name)
    return folder


def test_zh_variant_converts_chinese_books_only_and_tags_their_language(books, tmp_path):
    manifest = extract(books, tmp_path / "hans", "--zh-variant", "zh-hans", "--language", "en", "--no-dedup")
    docs = documents(tmp_path / "hans")
    assert sorted(docs) == ["books:11-0", "books:big5-copy", "books:pg25328-tou-peng-hsien-hua"]
    zh = docs["books:pg25328-tou-peng-hsien-hua"]
    assert zh["language"] == "zh-Hans" and docs["books:11-0"]["language"] == "en"
    assert zh["text"].startswith("吾乡先辈诗人徐菊潭有《豆棚吟》一册")
    assert zhconv_rs.is_hans_confidence(zh["text"]) > 0.99
    # The Big5 copy is read as Big5: the same book, but for the 11 characters Big5 has not (each a "?").
    assert {i["encoding"] for i in manifest["inputs"] if i["path"].endswith("big5-copy.txt")} == {"big5hkscs"}
    copy = docs["books:big5-copy"]["text"]
    assert len(copy) == len(zh["text"]) and sum(a != b for a, b in zip(copy, zh["text"])) <= 11
    assert docs["books:11-0"]["text"] == documents_without_variant(books, tmp_path)["books:11-0"]["text"]


def documents_without_variant(books: Path, tmp_path: Path) -> dict[str, dict]:
    extract(books, tmp_path / "plain", "--no-dedup")
    return documents(tmp_path / "plain")


def test_both_writes_a_chinese_book_once_per_script(books, tmp_path):
    single = tmp_path / "in"
    single.mkdir()
    shutil.copy(BOOK, single / BOOK.name)
    manifest = extract(single, tmp_path / "both", "--zh-variant", "both")
    assert manifest["documents"]["read"] == manifest["documents"]["kept"] == 2
    docs = documents(tmp_path / "both")
    hans, hant = docs["books:pg25328-tou-peng-hsien-hua@zh-Hans"], docs["books:pg25328-tou-peng-hsien-hua@zh-Hant"]
    assert (hans["language"], hant["language"]) == ("zh-Hans", "zh-Hant")
    assert hant["text"].startswith("吾鄉先輩詩人徐菊潭有《豆棚吟》一冊") and len(hans["text"]) == len(hant["text"])


def test_a_books_private_use_characters_are_its_text():
    from bertcorpus.transforms.zh_variants import chinese_versions

    # U+E000 and U+E001 mark protected spans in wiki markup; in a book they are characters like any other.
    text = "吾鄉先輩詩人\ue000徐菊潭\ue001有《豆棚吟》一冊"
    kept, hans = chinese_versions(text, "keep")[0].text, chinese_versions(text, "zh-hans")[0].text
    assert kept == text and hans == "吾乡先辈诗人\ue000徐菊潭\ue001有《豆棚吟》一册"


def test_both_scripts_of_a_document_go_to_one_split():
    from bertcorpus.pipeline.create.config import CreateConfig, split_of

    config = CreateConfig([], "", "", eval_fraction=0.5)
    ids = [f"zhwiki:{i}" for i in range(200)]
    splits = [split_of(i, config) for i in ids]
    assert 60 < splits.count("eval") < 140  # the split still draws
    assert all(split_of(f"{i}@zh-Hans", config) == split_of(f"{i}@zh-Hant", config) == s for i, s in zip(ids, splits))


def test_without_language_flags_each_book_gets_its_language_and_says_how(books, tmp_path):
    # The Chinese book in UTF-8, in Big5 and read as Latin-1 and saved again (mojibake), beside an English book.
    text = BOOK.read_text(encoding="utf-8-sig")
    (books_here := tmp_path / "books").mkdir()
    for path in books.iterdir():
        shutil.copy(path, books_here / path.name)
    (books_here / "mojibake-copy.txt").write_text(text.encode("utf-8").decode("latin-1"), encoding="utf-8")
    manifest = extract(books_here, tmp_path / "out", "--no-dedup")
    docs = documents(tmp_path / "out")
    assert {i: (d["language"], d["title"]) for i, d in docs.items()} == {
        "books:11-0": ("en", "11-0"),  # no PG header: the file's name
        "books:big5-copy": ("zh-Hant", "Tou Peng Hsien Hua"),
        "books:mojibake-copy": ("zh-Hant", "Tou Peng Hsien Hua"),
        "books:pg25328-tou-peng-hsien-hua": ("zh-Hant", "Tou Peng Hsien Hua"),
    }
    assert docs["books:mojibake-copy"]["text"] == docs["books:pg25328-tou-peng-hsien-hua"]["text"]
    assert all(d["language_confidence"] > 0.9 for d in docs.values())
    by_file = {Path(i["path"]).name: i for i in manifest["inputs"]}
    assert {name: i["languages"] for name, i in by_file.items()} == {
        "11-0.txt": {"en": "lingua-light"},
        "big5-copy.txt": {"zh-Hant": "lingua-light"},
        "mojibake-copy.txt": {"zh-Hant": "lingua-light"},
        BOOK.name: {"zh-Hant": "lingua-light"},
    }
    assert by_file["mojibake-copy.txt"]["mojibake_fixed"] > 80_000


def test_without_the_langid_extra_a_books_language_is_guessed_from_its_script(books, tmp_path):
    # An installation without lingua, as far as importing goes: a lingua package ahead on the path that raises.
    fake = tmp_path / "no-langid-extra" / "lingua"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('lingua is not installed here')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(fake.parent), os.environ.get("PYTHONPATH"))))}
    out = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "bertcorpus",
        "extract-books",
        "--input",
        str(books),
        "--output",
        str(out),
        "--no-dedup",
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert re.search(r"\n  languages by +script 3\n", done.stdout)
    docs = documents(out)
    assert {i: d["language"] for i, d in docs.items()} == {
        "books:11-0": "en",
        "books:big5-copy": "zh-Hant",
        "books:pg25328-tou-peng-hsien-hua": "zh-Hant",
    }
    # A guess from the script: its confidence is the script's share of the letters.
    assert docs["books:11-0"]["language_confidence"] == 1.0
    assert docs["books:pg25328-tou-peng-hsien-hua"]["language_confidence"] > 0.99
    manifest = json.loads((out / "manifest.json").read_text())
    assert {m for i in manifest["inputs"] for m in i["languages"].values()} == {"script"}
