"""extract-wiki's cleaner on real articles of the ja, vi, el, bn and uk Wikipedias (tests/data/wiki/multilingual):
the templates that carry words of a sentence keep them, and what removed templates leave between brackets and commas
is tidied; disambiguation pages of those wikis are known."""

from __future__ import annotations

import re

import pytest

from bertcorpus.transforms.wikitext import clean_wikitext, is_disambiguation

from wiki_fixtures import MULTILINGUAL, wiki_articles

# What a removed template leaves: empty brackets, a separator just inside a bracket, two commas in a row (ASCII,
# full-width and ideographic). "(...)" and "[...]", which mark a cut in a quotation, are text.
HOLE = re.compile(r"[(（\[［][\s,，、;；:：]*[)）\]］]|[,，、]\s*[,，、]|[(（]\s*[,，、;；]|[,，、;；]\s*[)）]")


def holes_per_1000(texts: list[str]) -> float:
    return 1000 * sum(len(HOLE.findall(t)) for t in texts) / sum(map(len, texts))


@pytest.fixture(scope="module")
def articles() -> dict[str, dict[str, str]]:
    return {lang: dict(wiki_articles(path)) for lang, path in MULTILINGUAL.items()}


@pytest.mark.parametrize("lang", sorted(MULTILINGUAL))
def test_removed_templates_leave_no_empty_brackets_or_doubled_commas(articles, lang):
    texts = list(articles[lang].values())
    assert sum(map(len, texts)) > 300_000
    assert holes_per_1000(texts) <= 0.01


def test_holes_are_measured_as_they_were_found():
    assert [len(HOLE.findall(t)) for t in ("ロシア連邦（ロシアれんぽう、、通称ロシア、）は", "議員（,, 定数560）")] == [
        2,
        1,
    ]
    assert holes_per_1000(["「……」と (...) と [...] と（ロシアれんぽう、通称ロシア）"]) == 0


@pytest.mark.parametrize(
    "lang, title, start",
    [
        # {{読み仮名|'''物理学'''|ぶつりがく|{{Lang-en-short|physics}}}} opens the article
        ("ja", "物理学", "物理学（ぶつりがく、physics）は、自然科学の一分野である。"),
        # {{lang-el|αντι}}, {{lang-el2|ονομα}}
        ("uk", "Антонім", "Анто́німи (αντι — «проти», ονομα — «ім'я») — слова, протилежні за значенням."),
        # {{nihongo|'''Ayumi Hamasaki'''|浜崎あゆみ hay 浜崎歩||''Tân Khi Bộ''}}
        ("vi", "Hamasaki Ayumi", "Ayumi Hamasaki (浜崎あゆみ hay 浜崎歩) sinh ngày 2 tháng 10 năm 1978,"),
    ],
)
def test_templates_that_carry_words_keep_them(articles, lang, title, start):
    assert articles[lang][title].startswith(start)


def test_the_file_links_of_other_wikis_go_whole(articles):
    # bnwiki's [[চিত্র:...|right|thumb|240px|caption]] once left its options in the text
    texts = list(articles["bn"].values())
    assert not any("thumb|" in t or "px|" in t for t in texts)
    assert articles["bn"]["মহাসাগর"].startswith("মহাসাগর (বা মহাসমুদ্র, মহাসিন্ধু) অতি প্রকাণ্ড")


def test_centred_navigation_bars_go(articles):
    # elwiki's month articles open with <center>'''Ιανουάριος''' | [[Φεβρουάριος]] | ...</center> and a bar of
    # the month's days; the prose after them stays.
    texts = articles["el"]
    bars = [t for t, text in texts.items() if re.search(r"(?:\w+ ?\| ?){3}", text)]
    assert bars == []
    assert texts["Ιανουάριος"].startswith("Ο Ιανουάριος, ή Γενάρης είναι ο πρώτος μήνας του πολιτικού έτους")
    months = ("Ιανουάριος", "Φεβρουάριος", "Μάρτιος", "Απρίλιος", "Μάιος", "Ιούνιος", "Ιούλιος", "Νοέμβριος")
    assert all(len(texts[month]) > 2000 for month in months)  # the articles keep their prose


@pytest.mark.parametrize(
    "markup, expected",
    [
        # ukwiki's year articles: a lead-in and a colon link to a category is navigation, the line goes
        (
            "У 1990 році.\n\n== Народились ==\n''Див. також:'' [[:Категорія:Народились 1990]]\n* [[Особа]]\n"
            "Кінець розділу.",
            "У 1990 році.\n\nКінець розділу.",
        ),
        ("Текст.\n''Див. також:'' [[:Категорія:1990]], [[:Категорія:Померли 1990]]\nЩе текст.", "Текст. Ще текст."),
        # a colon link to a category without a label shows the category's name, which is no prose
        ("Дивіться [[:Категорія:Народились 1990]] тут.", "Дивіться тут."),
        # with a label it is a link of the sentence (enwiki: "became a derelict object")
        (
            "became a [[:Category:Derelict satellites in heliocentric orbit|derelict]] object",
            "became a derelict object",
        ),
        # a file link in a namespace the cleaner does not list, by its localised options or its media file
        ("Cầu.[[Hình ảnh:Cau Long Bien.jpg|nhỏ|321x321px|Cầu [[Long Biên]]]] Sau.", "Cầu. Sau."),
        ("Կամուրջ.[[Ֆայլ:Yerevan.jpg|մինի|աջից|200փքս|Երևան]] Հետո.", "Կամուրջ. Հետո."),
        ("Α.[[Αρχείο:Air France.jpg|μικρογραφία|307x307εσ|Boeing]] Β.", "Α. Β."),
        ("Before.[[Fitxategi:Bridge|mini|Caption]] after.", "Before. after."),
        ("Before [[Fitxategi:Bridge.JPG]] after.", "Before after."),
        # a plain link with a colon in its title keeps its label
        (
            "See [[Star Wars: Episode IV|the film]] and [[Imagine: John Lennon]].",
            "See the film and Imagine: John Lennon.",
        ),
    ],
)
def test_navigation_lines_and_localised_file_links_go(markup, expected):
    assert clean_wikitext(markup) == expected


@pytest.mark.parametrize(
    "markup, title",
    [
        ("'''EU'''は以下を指す。\n* [[欧州連合]]\n{{aimai}}", "EU"),
        ("* [[A]]\n{{曖昧さ回避}}", "X"),
        ("'''C''' μπορεί να αναφέρεται:\n{{αποσαφήνιση}}", "C"),
        ("* [[A]]\n{{দ্ব্যর্থতা নিরসন}}", "দেশ"),
        ("* [[A]]\n{{Неоднозначність}}", "Мова"),
        ("* [[A]]\n{{消歧义}}", "X"),
        ("* [[A]]", "EU (曖昧さ回避)"),
        ("* [[A]]", "C (αποσαφήνιση)"),
        ("* [[A]]", "দেশ (দ্ব্যর্থতা নিরসন)"),
        ("* [[A]]", "Мова (значення)"),
        ("* [[A]]", "苹果（消歧義）"),
    ],
)
def test_disambiguation_pages_of_other_wikis(markup, title):
    assert is_disambiguation(markup, title)
