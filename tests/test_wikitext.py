"""Wikitext cleaning: each removal/keep rule on small snippets, golden articles, and a residue scan of all samples."""

from __future__ import annotations

import re
from functools import cache

import pytest

from bertcorpus.transforms.compression import open_decompressed
from bertcorpus.transforms.wiki_page_items import Page
from bertcorpus.transforms.wiki_pages import iter_pages
from bertcorpus.transforms.wikitext import clean_wikitext, is_disambiguation

from wiki_fixtures import ALL_DUMPS, ENWIKI_2014, ENWIKI_TABLES, GOLDEN, VIWIKI


@cache
def pages_of(dump) -> tuple[Page, ...]:
    with open_decompressed(dump) as stream:
        return tuple(p for p in iter_pages(stream) if isinstance(p, Page))


def article_pages() -> list[Page]:
    """Every ns0 page with text that is not a redirect, from all the samples."""
    return [p for dump in ALL_DUMPS for p in pages_of(dump) if p.ns == 0 and not p.redirect and p.text]


def page(dump, page_id: int) -> Page:
    return next(p for p in pages_of(dump) if p.page_id == page_id)


# --- rules, one snippet each ----------------------------------------------------------------------------------------

RULES = [
    # templates: nested, multi-line, with tables and links inside; no expansion
    ("{{Infobox film\n| name = {{nowrap|{{small|A}}}}\n| director = [[Ventura Pons]]\n}}\nThe film.", "The film."),
    ("Before {{a|{{b|{{c}}}}|d}} after.", "Before after."),
    ("Before {{quote box|\n{| class=wikitable\n|-\n| cell || cell\n|}\n}} after.", "Before after."),
    ("{{cite web\n|url=x\n|}}\nText.", "Text."),
    # tables, nested, with templates inside
    (
        "{| class=wikitable\n|-\n! Head\n|-\n| {{flag|X}} || 1\n{|\n| inner\n|}\n|}\nAfter the table.",
        "After the table.",
    ),
    ("Para one.\n{|\n|+ Caption\n| a\n|}}\nPara two.", "Para one.\n\nPara two."),
    # references, named and self-closing, with templates inside
    (
        'Fact.<ref name="a">{{cite book|title=T}}</ref> More.<ref name=b /> End<ref group="n">x</ref>.',
        "Fact. More. End.",
    ),
    (
        "List of refs:<references/> done, <references>\n<ref name=a>x</ref>\n</references> yes",
        "List of refs: done, yes",
    ),
    # comments, even unterminated at the end
    ("Keep <!-- hidden [[link]] {{t}} --> this.<!-- open to the end", "Keep this."),
    # links: label, target, link trail, leading colon, pipe trick
    ("[[Alpha|beta]] [[Gamma]] [[apple]]s [[:Category:Cats]] [[Foo (band)|]]", "beta Gamma apples Foo"),
    ("[[Anarchism#History|history of anarchism]]", "history of anarchism"),
    # external links: label kept, bare link removed
    (
        "See [http://example.org the site] and [https://x.org/a?b=c&amp;d] or [//p.org proto].",
        "See the site and or proto.",
    ),
    # files and images, captions with links, in several languages; galleries
    ("[[File:A.jpg|thumb|A [[caption]] with [[x|links]] and [http://e.org ext]]]Text.", "Text."),
    ("[[Image:B.png|left|200px|''The Iron'']]\nThe museum.", "The museum."),
    ("[[Tập tin:C.jpg|nhỏ|Chú thích [[Hà Nội]]]] Văn bản.", "Văn bản."),
    ("<gallery>\nFile:D.jpg|[[Link]] caption\n</gallery>\nAfter.", "After."),
    # categories and interlanguage links
    (
        "Body.\n[[Category:Things| ]]\n[[Категория:Календари]]\n[[de:Ding]]\n[[zh-min-nan:Ding]]\n[[simple:Thing]]",
        "Body.",
    ),
    # headings, lists, definition lists, indents
    ("Intro.\n== History ==\nOld.\n=== Early ===\nOlder.", "Intro.\n\nOld.\n\nOlder."),
    ("Text:\n* one\n** two\n# three\n; term\n: def\n::indented\nMore text.", "Text:\n\nMore text."),
    # tail sections go up to the next non-tail level-2 heading
    (
        "Lead.\n==See also==\n* [[X]]\n==Notes==\nNote text.\n== Legacy ==\nKept.\n==References==\n{{reflist}}\n"
        "==External links==\n* [http://x.org X]\n",
        "Lead.\n\nKept.",
    ),
    ("Lead.\n== Notes and references ==\nN.\n== Further reading ==\nF.\n== Bibliography ==\nB.", "Lead."),
    ("Lead.\n== Sources ==\nS.\n== Citations ==\nC.\n== Footnotes ==\nF.\n== Works cited ==\nW.", "Lead."),
    ("Mở đầu.\n==Xem thêm==\n*[[A]]\n==Tham khảo==\n{{Tham khảo}}\n==Liên kết ngoài==\n* x", "Mở đầu."),
    ("Текст.\n== Източници ==\n<references />\n== Външни препратки ==\n* x", "Текст."),
    # bold and italic
    (
        "'''Bold''' and ''italic'' and '''''both''''' and l''''apostrophe'''",
        "Bold and italic and both and l'apostrophe",
    ),
    # entities, also twice escaped
    ("A&nbsp;B &amp; C &#8211; D &#x41; &lt;tag&gt; E&amp;nbsp;F", "A B & C – D A <tag> E F"),
    # HTML formatting tags keep their text
    (
        "x<sup>2</sup> H<sub>2</sub>O <small>small</small> <span style='a'>span</span><br />next",
        "x2 H2O small span next",
    ),
    ("<blockquote>Quoted text.</blockquote>", "Quoted text."),
    ("A <nowiki>literal</nowiki> word.", "A literal word."),
    # elements dropped with their content
    ("Area <math>\\pi r^{2}}</math> of a circle.", "Area of a circle."),
    ("Use <code>{{x}}</code> and <syntaxhighlight lang=c>int a[[2]];</syntaxhighlight> here.", "Use and here."),
    ("Water <chem>H2O</chem> <ce>H2O</ce> <hiero>ra</hiero> <score>c d</score> ok.", "Water ok."),
    ("Before.\n<timeline>\nImageSize = width:100\n</timeline>\n<pre>\n{{code}}\n</pre>\nAfter.", "Before.\n\nAfter."),
    # magic words and behaviour switches
    ("__NOTOC__\n__NOEDITSECTION__Text __TOC__ here.", "Text here."),
    # leftovers of removed templates
    ("Aristotle ({{IPAc-en|ˈ|ær}}; {{circa|384}}) was a philosopher.", "Aristotle was a philosopher."),
    (
        "Aristotle ({{IPAc-en|ˈ|ær}}; {{lang-grc|Ἀριστοτέλης}}) was a philosopher.",
        "Aristotle (Ἀριστοτέλης) was a philosopher.",
    ),
    ("Pons (born {{birth date|1945}}, ) directs.", "Pons (born) directs."),
    ("Text.\n\n.\n\n, ;\n\n{{stub}}\n\n()", "Text."),
    # the same holes in full-width brackets and between commas, as Japanese and Chinese text has them
    (
        "ロシア連邦（ロシアれんぽう、{{lang-ru|x}}{{要出典}}、、通称ロシア、{{IPA}}）は",
        "ロシア連邦（ロシアれんぽう、x、通称ロシア）は",
    ),
    ("定数（{{efn|a}},, 定数560）と{{sfn|b}}（、）の、, ,", "定数（定数560）との、"),
    # templates whose output is words of the sentence keep them: a word in another language, an interlanguage link's
    # label, a reading, a quantity, styled or annotated text
    (
        "朝鮮語（{{lang|ko|이}}、{{Lang|ko|그}}、{{lang|ko|저}}）や英語（{{lang-en-short|this}}）",
        "朝鮮語（이、그、저）や英語（this）",
    ),
    ("「{{en|I am happy.}}」{{en}} and {{zh|s=南沙群岛|t=南沙群島}}", "「I am happy.」 and 南沙群岛"),
    ("{{読み仮名|'''物理学'''|ぶつりがく|{{Lang-en-short|physics}}}}は", "物理学（ぶつりがく、physics）は"),
    (
        "{{仮リンク|タンメルコスキ川|en|Tammerkoski}}、{{ill|Sverker Johansson|sv}}",
        "タンメルコスキ川、Sverker Johansson",
    ),
    ("У {{нп|Сьомий лист|Сьомому листі|en|Seventh Letter}} і {{не перекладено|Пансіон}}", "У Сьомому листі і Пансіон"),
    (
        "{{nihongo|Ayumi Hamasaki|浜崎あゆみ|Hamasaki Ayumi}}, {{nihongo||欧州連合|Ōshū Rengō}}",
        "Ayumi Hamasaki (浜崎あゆみ, Hamasaki Ayumi), 欧州連合 (Ōshū Rengō)",
    ),
    (
        "A coast of {{convert|58|km|mi|abbr=on}}, {{convert|2|to|5|m}} deep, {{cvt|1|-|3|ft}} and {{convert|x|km}}.",
        "A coast of 58 km, 2 to 5 m deep, 1–3 ft and.",
    ),
    (
        "{{convert|22|e6acre|e3km2}} of forest and {{convert|1.5|e9m3}} of water",
        "22 million acre of forest and 1.5 billion m3 of water",
    ),
    (
        "{{IPA|nʲihoŋŋo}} {{IPA|fr|ɛ̃}} {{IPA-es|ˈeɾa}} {{nowrap|{{small|a b}}}} {{要出典範囲|claim|date=2021}}",
        "nʲihoŋŋo ɛ̃ ˈeɾa a b claim",
    ),
    ("多数（{{要出典|範囲=50作以上|date=2021年3月}}）の{{要出典|date=2020}}作品", "多数（50作以上）の作品"),
    ("{{lang|en|[[Foo (band)|bar]] and {{lang|fr|mot}}}} {{Lang\n|de|Wort}} {{lang|en}}", "bar and mot Wort"),
    # {{PAGENAME}} is the title
    ("{{PAGENAME}} is a word.", "Word is a word."),
    # unbalanced markup never leaks
    ("Open {{ template\n| a = b\n\nstray ]] [[ and {| here", "Open template\n\nstray and here"),
    ("A stray }} closer and |} another.", "A stray closer and another."),
]


@pytest.mark.parametrize(("markup", "expected"), RULES)
def test_rule(markup, expected):
    assert clean_wikitext(markup, title="Word") == expected


def test_paragraphs_are_separated_by_exactly_one_blank_line():
    text = clean_wikitext("First line\nsame paragraph.\n\n\n\nSecond   paragraph.  \n\n  Third.\n")
    assert text == "First line same paragraph.\n\nSecond paragraph.\n\nThird."


def test_empty_and_markup_only_pages_give_empty_text():
    assert clean_wikitext("") == ""
    assert clean_wikitext("{{Infobox\n|a=b}}\n[[Category:X]]\n== References ==\n{{reflist}}") == ""


# --- golden articles, written out by hand from their wikitext ------------------------------------------------------

GOLDENS = [
    (ENWIKI_2014, 330, "enwiki-330-Actrius.txt"),
    (ENWIKI_2014, 846, "enwiki-846-Museum_of_Work.txt"),
    (ENWIKI_2014, 910, "enwiki-910-Arne_Kaijser.txt"),
    (VIWIKI, 4, "viwiki-4-Internet_Society.txt"),
]


@pytest.mark.parametrize(("dump", "page_id", "golden"), GOLDENS)
def test_golden_article(dump, page_id, golden):
    article = page(dump, page_id)
    expected = (GOLDEN / golden).read_text(encoding="utf-8").rstrip("\n")
    assert clean_wikitext(article.text, title=article.title) == expected


# --- no residue on any real article --------------------------------------------------------------------------------

RESIDUE = re.compile(r"\{\{|\}\}|\[\[|\]\]|<ref|\{\||\|\}|==|'''|''|&nbsp;|&amp;|<!--|^[*#:;|!]", re.M | re.I)


def test_no_markup_residue_in_any_sample_article():
    pages = article_pages()
    assert len(pages) == 215 + 5 + 2 + 1 + 6
    found = []
    for article in pages:
        text = clean_wikitext(article.text, title=article.title)
        assert text == text.strip() and "\n\n\n" not in text and "  " not in text
        found += [(article.title, m.group()) for m in RESIDUE.finditer(text)]
    assert found == []


def test_sample_articles_keep_their_prose():
    cleaned = {p.title: clean_wikitext(p.text, title=p.title) for p in article_pages()}
    assert cleaned["Anarchism"].startswith(
        "Anarchism is a political philosophy that advocates stateless societies often defined as self-governed"
    )
    assert "Григорианският календар е въведен в употреба на 4 октомври 1582 г." in cleaned["Григориански календар"]
    assert cleaned["Tiếng Việt"].startswith("Tiếng Việt, cũng gọi là tiếng Việt Nam hay Việt ngữ")
    prose = sum(len(t) for t in cleaned.values())
    markup = sum(len(p.text) for p in article_pages())
    assert 0.3 < prose / markup < 0.7  # the rest is references, templates, tables and links


def test_tables_are_removed_from_the_table_heavy_sample():
    production_design = next(
        p for p in pages_of(ENWIKI_TABLES) if p.title == "Academy Award for Best Production Design"
    )
    text = clean_wikitext(production_design.text)
    assert "wikitable" not in text and "style=" not in text and "rowspan" not in text
    assert text.startswith("The Academy Award for Best Production Design recognizes achievement for art direction")


# --- disambiguation ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "markup",
    [
        "{{disambiguation}}",
        "{{Disambig|geo}}",
        "{{DAB}}",
        "{{dab}}",
        "{{hndis|Smith, John}}",
        "{{ geodis }}",
        "{{Set index article|ship}}",
        "{{set_index}}",
        "{{Human name disambiguation}}",
        "{{Hospital disambiguation}}",
        "{{Template:Disambiguation|surname}}",
        "{{surname}}",
        "Text\n__DISAMBIG__",
        "{{trang định hướng}}",
        "{{Пояснение}}",
    ],
)
def test_is_disambiguation(markup):
    assert is_disambiguation("'''X''' may refer to:\n" + markup, "X")


@pytest.mark.parametrize(
    "markup",
    [
        "{{Disambiguation needed|date=May 2014}}",
        "{{About|the fruit|other uses|Apple (disambiguation)}}",
        "{{dablink|see also}}",
        "'''Apple''' is a fruit.",
    ],
)
def test_is_not_disambiguation(markup):
    assert not is_disambiguation(markup, "Apple")


def test_disambiguation_by_title():
    assert is_disambiguation("'''Austin''' may refer to:", "Austin (disambiguation)")


def test_disambiguation_pages_of_the_2014_sample():
    pages = [p for p in pages_of(ENWIKI_2014) if p.ns == 0 and not p.redirect]
    found = {p.title for p in pages if is_disambiguation(p.text, p.title)}
    assert found == {
        "Alien",
        "Austin (disambiguation)",
        "Aberdeen (disambiguation)",
        "Argument (disambiguation)",
        "Animal (disambiguation)",
        "Asia Minor (disambiguation)",
        "Aa River",
        "Atlas (disambiguation)",
        "Asterism",
        "Anaconda",
        "Altenberg",
        "AM",
    }
