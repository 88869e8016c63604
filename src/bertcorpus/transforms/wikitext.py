"""Wikitext → the plain prose a reader would call the article.

The cleaner does not parse wikitext into a tree (and never expands templates): it removes what is not prose with a
few compiled regular expressions and one linear scan for nested braces. The order of the passes is what makes that
safe:

1. comments, then whole tail sections (References, External links, ...), so nothing later looks inside them;
2. elements whose content is not prose (<ref>, <math>, <pre>, <gallery>, ...), because their content is full of
   braces and brackets that would confuse the nesting scan, and centred navigation bars;
3. templates and tables, nested in any combination, in one scan over the brace tokens (the few templates that
   show words of the sentence leave those words: wiki_templates.py);
4. file/image, category and interlanguage links, whose captions may nest further links, and lines that only point
   to a category;
5. the remaining inline markup (links, external links, bold/italic, HTML tags, entities, magic words);
6. line markup (headings, lists, table residue), then paragraphs are rebuilt and leftovers dropped.

A last sweep guarantees that no markup token survives, whatever the input.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_right

from bertcorpus.transforms.wiki_page_items import TextTooLarge
from bertcorpus.transforms.wiki_templates import template_shows

# --- 1. comments and tail sections ----------------------------------------------------------------------------------

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)

_LEVEL2_HEADING = re.compile(r"\n==(?!=)[ \t]*([^\n]*?)[ \t]*(?<!=)==[ \t]*(?=\n)")

# Sections that hold apparatus rather than prose, in the languages of the bundled samples as well as English.
_TAIL_WORD = (
    r"(?:references?|external\s+links?|see\s+also|further\s+reading|notes?|bibliograph(?:y|ies)|sources?"
    r"|citations?|footnotes?|works\s+cited|cited\s+works|literature|related\s+(?:pages|articles)|links"
    r"|explanatory\s+notes|reference\s+notes|general\s+references|inline\s+citations|other\s+reading"
    r"|tham\s+khảo|liên\s+kết\s+ngoài|chú\s+thích|xem\s+thêm|đọc\s+thêm|ghi\s+chú|nguồn"
    r"|източници|бележки|външни\s+препратки|вижте\s+също|литература|допълнителна\s+литература)"
)
_TAIL_HEADING = re.compile(rf"(?:{_TAIL_WORD}(?:\s*(?:,|&|and|и|và)\s*|\s*$))+", re.I)

# --- 2. elements dropped with their content ----------------------------------------------------------------------

_DROPPED_ELEMENTS = (
    "ref|references|math|chem|ce|code|syntaxhighlight|source|pre|score|timeline|hiero|gallery|imagemap|graph"
    "|mapframe|maplink|templatedata|templatestyles|inputbox|categorytree|includeonly|table"
)
# An element that is never closed is shown literally by MediaWiki: only its tag goes, with the stray tags below.
_DROPPED_ELEMENT = re.compile(rf"<({_DROPPED_ELEMENTS})(?=[\s/>])[^<>]*?(?:/>|>.*?</\1\s*>)", re.I | re.S)

# Navigation bars centred on their own (elwiki's months: <center>'''Ιανουάριος''' | [[Φεβρουάριος]] | ...</center>):
# three items or more, each a link, a bold word or a few characters, between | · or • separators.
_NAVIGATION_ITEM = r"(?:'{0,5}\[\[[^\[\]\n]*\]\]'{0,5}|'{2,5}[^'\n|<\[\]]{1,40}'{2,5}|[^|·•\n<\[\]']{1,30})"
_CENTERED_NAVIGATION = re.compile(
    rf"<center>[ \t]*{_NAVIGATION_ITEM}(?:[ \t]*[|·•][ \t]*{_NAVIGATION_ITEM}){{2,}}[ \t|·•]*</center>", re.I
)

# --- 3. templates and tables ---------------------------------------------------------------------------------------

# Template open/close, and table open/close, which MediaWiki recognises only at the start of a line. "|}}" at a
# line start is a template closing after an empty last parameter, unless a table is open. (No capture groups:
# a leading group would keep the regex engine from skipping quickly to the next candidate character.)
_BRACE_TOKEN = re.compile(r"\{\{|\}\}|\n[ \t]*(?:\{\||\|\}\}?)")

_PAGENAME = re.compile(r"\{\{\s*(?:FULL)?PAGENAME\s*\}\}")

# --- 4. links that are not part of the prose -----------------------------------------------------------------------

# File and category namespaces: the canonical English names, and the local names and aliases of the largest
# wikis and of the bundled samples' (NS_FILE and NS_CATEGORY in $namespaceNames and $namespaceAliases of MediaWiki's
# language files, languages/messages/Messages*.php). Names that are also English words of titles ("Imagine:") are
# left out. Interlanguage links are a lower-case language code such as de, zh-yue or be-x-old with no leading colon.
_FILE_NAMESPACES = (
    "file|image|media|datei|bild|fichier|archivo|imagen|immagine|ficheiro|arquivo|imagem|plik|grafika|bestand"
    "|afbeelding|fil|bilde|soubor|obrázek|dosya|resim|berkas|gambar|fitxer|imatge|fájl|kép|tiedosto|kuva|fișier"
    "|tập[ _]tin|hình[ _]ảnh|hình|файл|картинка|изображение|зображення|датотека|слика|ファイル|画像|文件|檔案|图像"
    "|圖像|파일|그림|ملف|صورة|پرونده|تصویر|קובץ|תמונה|αρχείο|εικόνα|চিত্র|ফাইল|चित्र|फ़ाइल|պատկեր|ֆայլ|ไฟล์|ภาพ"
)
_CATEGORY_NAMESPACES = (
    "category|kategorie|catégorie|categoría|categoria|categorie|kategoria|kategori|kategória|luokka|thể[ _]loại"
    "|категория|категорія|категорија|カテゴリ|分类|分類|분류|تصنيف|رده|קטגוריה|κατηγορία|বিষয়শ্রেণী|श्रेणी|वर्ग"
    "|կատեգորիա|หมวดหมู่"
)
# The image options of MediaWiki's image syntax (img_thumbnail, img_framed, img_frameless, img_right, img_left,
# img_center, img_none, img_upright, img_width: $1px), in English and as the language files of the largest wikis
# and of the bundled samples localise them (vi nhỏ, hy մինի, el 307x307εσ). A link to a page of a namespace this
# module does not know is a file all the same where its target is a media file, or one of them is its first option
# and more follow (a plain link has one pipe).
_IMAGE_OPTIONS = (
    "thumb|thumbnail|frame|framed|enframed|frameless|right|left|center|centre|none|upright|border"
    "|mini|miniatur|rechts|links|ohne|zentriert|gerahmt|rahmenlos|hochkant"
    "|vignette|droite|gauche|néant|centré|cadre|encadré|sans_cadre|redresse"
    "|miniatura|miniaturadeimagen|miniaturadaimagem|derecha|izquierda|ninguna|centro|marco|sinmarco|direita"
    "|esquerda|nenhum|moldura|semmoldura|destra|sinistra|nessuno|riquadrato|senza_cornice"
    "|mały|prawo|lewo|brak|centruj|ramka|bezramki|miniatuur|geen|gecentreerd|kader|kaderloos"
    "|miniatyr|höger|vänster|ingen|centrerad|ram|ramlös|náhled|vpravo|vlevo|küçükresim|sağ|sol|jmpl"
    "|nhỏ|phải|trái|không|giữa|khung|không[ _]khung|đứng"
    "|мини|миниатюра|справа|слева|без|центр|обрамить|безрамки|міні|мініатюра|праворуч|ліворуч|обрамити"
    "|μικρογραφία|δεξιά|αριστερά|κανένα|κέντρο|πλαίσιο|մինի|աջից|ձախից|առանց|կենտրոն|շրջափակել"
    "|サムネイル|サムネ|縮小|右|左|なし|中央|フレーム|フレームなし|缩略图|縮圖|无|居中|有框|无框"
    "|섬네일|썸네일|오른쪽|왼쪽|없음|가운데|مصغر|يمين|يسار|بندانگشتی|راست|چپ|ממוזער|ימין|שמאל"
)
_IMAGE_WIDTH = r"\d*(?:x\d+)?[ \t]*(?:px|пкс|εσ|փքս|ピクセル|像素|픽셀|پیکسل|بك)"
_MEDIA_FILE = r"\.(?:jpe?g|png|svg|gif|tiff?|webp|xcf|ogg|oga|ogv|webm|mp3|mp4|wav|flac|midi?|pdf|djvu)"
# A colon link to a category shows the category's name ("Категорія:1990"), not prose, unless it has a label of
# its own ("became a [[:Category:Derelict satellites|derelict]] object"): only those without one go.
_CATEGORY_COLON_LINK = rf":[ \t]*(?i:{_CATEGORY_NAMESPACES})[ \t]*:[^\[\]|\n]*\]\]"
_IMAGE_OPTION = f"(?:{_IMAGE_OPTIONS}|{_IMAGE_WIDTH})"
_NON_PROSE_LINK = re.compile(
    r"\[\[[ \t]*(?:"
    rf"(?i:{_FILE_NAMESPACES})[ \t]*:|(?i:{_CATEGORY_NAMESPACES})[ \t]*:|{_CATEGORY_COLON_LINK}"
    r"|(?:[a-z]{2,3}(?:-[a-z]{1,8}){0,2}|simple)[ \t]*:"
    rf"|[^\[\]|\n:]{{1,40}}:[^\[\]|\n]*(?i:{_MEDIA_FILE}[ \t]*[|\]]|\|[ \t]*{_IMAGE_OPTION}[ \t]*\|)"
    r")"
)
# A line that only points to categories (ukwiki's "''Див. також:'' [[:Категорія:Народились 1990]]"): a short
# lead-in, then colon links to categories, labelled or not, and nothing else. It is navigation, and goes whole.
_CATEGORY_LINK_ON_A_LINE = rf"\[\[[ \t]*:[ \t]*(?i:{_CATEGORY_NAMESPACES})[ \t]*:[^\[\]\n]*\]\]"
_CATEGORY_LINE = re.compile(
    rf"\n[^\n\[\]]{{0,60}}{_CATEGORY_LINK_ON_A_LINE}(?:[ \t]*[,;·•|]?[ \t]*{_CATEGORY_LINK_ON_A_LINE})*[ \t.,;]*(?=\n)"
)
_BRACKET_TOKEN = re.compile(r"\[\[|\]\]|\n[ \t]*\n")

# --- 5. inline markup ----------------------------------------------------------------------------------------------

# [[Target (qualifier)|]] shows "Target".
_PIPE_TRICK_LINK = re.compile(r"\[\[:?([^\[\]|\n]*?)(?:[ \t]*\([^\[\]|\n()]*\))?\|\]\]")
# A link shows its label, or else its target: deleting "[[target|" (or "[[") and then every "]]" leaves exactly that,
# with C-speed deletions instead of a Python call per link. A label may hold single brackets: [[IPA|[ç]]] shows [ç].
_LINK_OPENING = re.compile(r"\[\[:?(?:[^\[\]|\n]*\|)?(?=[^\[\]\n]*(?:\[[^\[\]\n]*\][^\[\]\n]*)*\]\])")
_EXTERNAL_LINK = re.compile(
    r"\[(?:(?:https?|ftp|ftps|irc|ircs|news|mailto|gopher|git|svn|telnet|urn|sftp|ssh):|//)[^\s\[\]]*"
    r"(?:[ \t]+([^\]\n]*))?\]",
    re.I,
)
_BOLD_ITALIC = re.compile(r"'''''|'''|''")
_LINE_BREAK = re.compile(r"<br\s*/?\s*>|</br\s*>", re.I)
# Formatting tags whose content is kept, and stray tags of the dropped elements.
_TAG = re.compile(
    r"</?(?:span|small|big|sup|sub|div|center|font|b|i|u|s|strike|del|ins|em|strong|abbr|blockquote|cite|q|p|tt"
    r"|var|kbd|samp|dfn|bdi|bdo|ruby|rb|rt|rp|rtc|wbr|data|time|mark|ol|ul|li|dl|dt|dd|tr|td|th|caption|thead"
    r"|tbody|tfoot|h[1-6]|hr|poem|nowiki|onlyinclude|noinclude|section|indicator|translate|languages"
    rf"|{_DROPPED_ELEMENTS})(?=[\s/>])[^<>]*>",
    re.I,
)
_ENTITY = re.compile(r"&(?:#\d+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
_MAGIC_WORD = re.compile(r"__[^\W_]+__")

# --- 6. lines and paragraphs ---------------------------------------------------------------------------------------

# Headings, list items (* # ; :), table rows and cells (| !) and horizontal rules take the whole line with them.
_NON_PROSE_LINE = re.compile(r"\n(?:[ \t]*[*#:;|!][^\n]*|=[^\n]*=[ \t]*|-{4,}[ \t]*)(?=\n)")
_SEPARATORS_PATTERN = " ,;:、，；："
# What removed templates leave inside brackets and between commas, in ASCII and in the full-width forms of Chinese and
# Japanese text: "()", "(; born 1950, )", "（ロシアれんぽう、、通称ロシア、）", "（,, 定数560）". Tidied only in the few
# paragraphs that show one of the telltale pairs, because a regex tried at every "(" of the text costs more than all
# the rest.
_BRACKET_LEFTOVER_HINT = re.compile(r"\(\)|\( | \)|\([,;:、，；：]|[,;、，；]\)|\[\]|\[ ")
_FULL_WIDTH_LEFTOVER_HINT = re.compile(rf"（[{_SEPARATORS_PATTERN}）]|[{_SEPARATORS_PATTERN}]）")
_EMPTY_BRACKETS = re.compile(rf"[(（][{_SEPARATORS_PATTERN}]*[)）]|\[[ ,;:]*\]")
_PUNCT_AFTER_PAREN = re.compile(rf"([(（])[{_SEPARATORS_PATTERN}]+")
_PUNCT_BEFORE_PAREN = re.compile(rf"[{_SEPARATORS_PATTERN}]+([)）])")
_DOUBLED_COMMAS = re.compile(r"([,，、])(?: ?[,，、])+")
_SPACE_BEFORE_PUNCT = re.compile(r" (?=[,.;:])")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_HAS_WORD = re.compile(r"[^\W_]")
_LINE_START_MARKUP = "*#:;|!= "
# One scan for every markup token that must not survive; a scoped (?i:) group would keep the engine from skipping
# to the candidate characters, so the letters of "ref" carry their cases instead.
_RESIDUE_TOKEN = re.compile(r"\{\{|\}\}|\[\[|\]\]|\{\||\|\}|<!--|==|''|&nbsp;|&amp;|</?[rR][eE][fF]")
_RESIDUE = re.compile(r"\{\{|\}\}|\[\[|\]\]|\{\||\|\}|</?ref|<!--|==|''|&nbsp;|&amp;", re.I)


def clean_wikitext(markup: str, *, title: str | None = None, max_chars: int | None = None) -> str:
    """The article's prose: paragraphs separated by one blank line, with no markup left.

    `title` replaces {{PAGENAME}}, the one template whose output is often part of a sentence. Every other pass
    only removes text, so that replacement is the one that can make a page longer: one that would pass
    `max_chars` raises TextTooLarge instead.
    """
    text = "\n" + markup.replace("\r\n", "\n") + "\n"
    if "<!--" in text:
        text = _COMMENT.sub("", text)
    text = _drop_tail_sections(text)
    if "<" in text:
        text = _DROPPED_ELEMENT.sub("", text)
        if "center>" in text or "CENTER>" in text:
            text = _CENTERED_NAVIGATION.sub("", text)
    if "{" in text:
        if title is not None and "PAGENAME" in text:
            _check_pagename_growth(text, title, max_chars)
            text = _PAGENAME.sub(lambda _: title, text)
        text = _drop_templates_and_tables(text)
    if "[" in text:
        text = _EXTERNAL_LINK.sub(r"\1", text)
    if "[[" in text:
        if "[[:" in text:
            text = _CATEGORY_LINE.sub("", text)
        text = _drop_non_prose_links(text)
        if "|]]" in text:
            text = _PIPE_TRICK_LINK.sub(r"\1", text)
        text = _LINK_OPENING.sub("", text).replace("]]", "")
    if "''" in text:
        text = _BOLD_ITALIC.sub("", text)
    if "<" in text:
        text = _LINE_BREAK.sub(" ", text)
        text = _TAG.sub("", text)
    if "&" in text:
        text = _decode_entities(text)
    if "__" in text:
        text = _MAGIC_WORD.sub(lambda m: "" if m.group().isupper() else m.group(), text)
    text = _NON_PROSE_LINE.sub("\n", text)
    return _paragraphs(text)


def _check_pagename_growth(text: str, title: str, max_chars: int | None) -> None:
    """Raise TextTooLarge where putting the title in for every {{PAGENAME}} would make the text pass `max_chars`."""
    if max_chars is None:
        return
    growth = sum(len(title) - len(found.group()) for found in _PAGENAME.finditer(text))
    if len(text) + growth > max_chars:
        raise TextTooLarge(f"its text with the title for each {{{{PAGENAME}}}} is longer than {max_chars:,} characters")


def _drop_tail_sections(text: str) -> str:
    """Cut each run of level-2 tail sections, up to the next level-2 heading that is not a tail one."""
    if "\n==" not in text:
        return text
    pieces: list[str] = []
    kept_from = 0
    cut_from: int | None = None
    for heading in _LEVEL2_HEADING.finditer(text):
        is_tail = _TAIL_HEADING.fullmatch(_heading_name(heading.group(1))) is not None
        if is_tail and cut_from is None:
            cut_from = heading.start()
        elif not is_tail and cut_from is not None:
            pieces.append(text[kept_from:cut_from])
            kept_from, cut_from = heading.start(), None
    if cut_from is None and not pieces:
        return text
    pieces.append(text[kept_from:cut_from] if cut_from is not None else text[kept_from:])
    return "".join(pieces) + "\n"


def _heading_name(raw: str) -> str:
    """A heading's words without the markup that sometimes decorates it ('''Notes''', [[Reference]]s)."""
    return raw.replace("'", "").replace("[", "").replace("]", "").strip()


def _drop_templates_and_tables(text: str) -> str:
    """Remove every {{template}} and {| table |}, nested in any combination, in one pass over the brace tokens.

    Matching uses a stack; pairs come out innermost first, so walking them backwards keeps only the outermost.
    An opener that never closes is shown literally by MediaWiki, so only its token is dropped (an unclosed table's
    rows then go with the line markup); a stray closer is dropped the same way.
    """
    stack: list[tuple[bool, int]] = []  # (is_table, start)
    pairs: list[tuple[int, int]] = []
    strays: list[tuple[int, int]] = []
    for token in _BRACE_TOKEN.finditer(text):
        tok = token.group()
        end = token.end()
        if tok == "{{":
            stack.append((False, end - 2))
        elif tok == "}}":
            if stack and not stack[-1][0]:
                pairs.append((stack.pop()[1], end))
            else:
                strays.append((end - 2, end))
        elif tok[-1] == "|":
            stack.append((True, end - 2))
        elif tok[-2:] == "}}":  # "|}}"
            if stack and not stack[-1][0]:
                pairs.append((stack.pop()[1], end))
            elif stack:  # a table closes, then a stray brace
                pairs.append((stack.pop()[1], end - 1))
                strays.append((end - 1, end))
            else:
                strays.append((end - 3, end))
        elif stack and stack[-1][0]:
            pairs.append((stack.pop()[1], end))
        elif not stack:
            strays.append((end - 2, end))
    if not pairs and not strays and not stack:
        return text
    spans = _outermost(pairs)
    if strays or stack:
        spans = sorted(_disjoint(spans, strays + [(start, start + 2) for _, start in stack]))
    return _cut(text, spans, _kept_template_texts(text, spans))


def _kept_template_texts(text: str, spans: list[tuple[int, int]]) -> dict[int, str]:
    """{start: the text it leaves} for the removed spans that are templates showing words (wiki_templates.py)."""
    kept = {}
    for start, end in spans:
        if end - start < 5 or not text.startswith("{{", start) or not text.startswith("}}", end - 2):
            continue
        shown = template_shows(text, start, end)
        if shown is not None:
            kept[start] = _drop_templates_and_tables(shown) if "{" in shown else shown
    return kept


def _outermost(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Keep the pairs not nested in another; `pairs` are properly nested and ordered by their end."""
    kept: list[tuple[int, int]] = []
    floor = 1 << 62
    for start, end in reversed(pairs):
        if end <= floor:
            kept.append((start, end))
            floor = start
    kept.reverse()
    return kept


def _disjoint(spans: list[tuple[int, int]], tokens: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Add the stray token spans that do not fall inside a removed span (those go with it anyway)."""
    starts = [s for s, _ in spans]
    ends = [e for _, e in spans]
    extra = []
    for start, end in tokens:
        i = bisect_right(starts, start) - 1
        if i < 0 or ends[i] <= start:
            extra.append((start, end))
    return spans + extra


def _cut(text: str, spans: list[tuple[int, int]], kept: dict[int, str] | None = None) -> str:
    """Text without the sorted, disjoint spans; a span whose start is in `kept` is replaced by its text there."""
    out: list[str] = []
    pos = 0
    for start, end in spans:
        out.append(text[pos:start])
        if kept and start in kept:
            out.append(kept[start])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _drop_non_prose_links(text: str) -> str:
    """Remove file, category and interlanguage links, whose captions may nest [[links]] of their own.

    One that is never closed is cut to the end of its paragraph.
    """
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        opener = _NON_PROSE_LINK.search(text, pos)
        if opener is None:
            break
        start = opener.start()
        depth = 0
        end = len(text)
        for token in _BRACKET_TOKEN.finditer(text, start):
            tok = token.group()
            if tok == "[[":
                depth += 1
            elif tok == "]]":
                depth -= 1
                if depth == 0:
                    end = token.end()
                    break
            else:  # a blank line: the link was never closed
                end = token.start()
                break
        spans.append((start, end))
        pos = end
    return _cut(text, spans) if spans else text


def _decode_entities(text: str) -> str:
    """Decode HTML entities; twice-escaped ones (&amp;nbsp;) too, since the output must hold none."""
    for _ in range(3):
        if _ENTITY.search(text) is None:
            break
        text = html.unescape(text)
    return text


def _paragraphs(text: str) -> str:
    """Rebuild paragraphs: lines of one block are one paragraph; empty or punctuation-only leftovers are dropped."""
    kept: list[str] = []
    for block in _PARAGRAPH_BREAK.split(text):
        paragraph = " ".join(block.split()).lstrip(_LINE_START_MARKUP)  # split() also takes U+00A0 (&nbsp;)
        if _has_leftovers(paragraph):
            paragraph = _tidy_brackets(paragraph)
        if paragraph and _HAS_WORD.search(paragraph):
            kept.append(paragraph)
    out = _SPACE_BEFORE_PUNCT.sub("", "\n\n".join(kept))
    if _RESIDUE_TOKEN.search(out) is not None:
        return _paragraphs(_RESIDUE.sub(" ", out))
    return out


def _has_leftovers(paragraph: str) -> bool:
    """Whether a paragraph shows what a removed template leaves: the cheap tests for a bracket come first."""
    return (
        (("(" in paragraph or "[" in paragraph) and _BRACKET_LEFTOVER_HINT.search(paragraph) is not None)
        or ("（" in paragraph and _FULL_WIDTH_LEFTOVER_HINT.search(paragraph) is not None)
        or ",," in paragraph
        or ", ," in paragraph
        or (("、" in paragraph or "，" in paragraph) and _DOUBLED_COMMAS.search(paragraph) is not None)
    )


def _tidy_brackets(paragraph: str) -> str:
    paragraph = _DOUBLED_COMMAS.sub(r"\1", paragraph)
    paragraph = _EMPTY_BRACKETS.sub("", paragraph)
    paragraph = _PUNCT_AFTER_PAREN.sub(r"\1", paragraph)
    paragraph = _PUNCT_BEFORE_PAREN.sub(r"\1", paragraph)
    return " ".join(paragraph.split()).lstrip(_LINE_START_MARKUP)


# --- disambiguation pages -------------------------------------------------------------------------------------------

_DISAMBIGUATION_NAMES = "|".join(
    name.replace(" ", "[ _]")
    for name in (
        r"disambig(?:uation)?",
        r"disamb",
        r"disam",
        r"dab",
        r"hndis",
        r"geodis",
        r"[^{}|\n]*? disambiguation",  # human name / place name / hospital / school ... disambiguation
        r"(?:set|ship|sport|mountain|road|lake|chemistry|enzyme|molecular formula) ?index(?: article)?",
        r"sia",
        r"surname",
        r"given name",
        r"(?:plant|fungus) common name",
        r"trang định hướng",
        r"định hướng",
        r"пояснение",
        r"многозначност",
        r"aimai",
        r"曖昧さ回避",
        r"消歧[义義]",
        r"αποσαφήνιση",
        r"দ্ব্যর্থতা নিরসন",
        r"неоднозначність",
    )
)
_DISAMBIGUATION_TEMPLATE = re.compile(
    rf"\{{\{{[ \t]*(?:template[ \t]*:[ \t]*)?(?:{_DISAMBIGUATION_NAMES})[ \t]*(?:\||\}}\}})", re.I
)
_DISAMBIGUATION_TITLE = re.compile(
    r"[(（](?:disambiguation|định hướng|пояснение|曖昧さ回避|消歧[义義]|αποσαφήνιση|দ্ব্যর্থতা নিরসন|значення)[)）]\s*$",
    re.I,
)


def is_disambiguation(markup: str, title: str) -> bool:
    """Whether a page only lists other articles: its title says so, or it carries a disambiguation/set-index
    template or the __DISAMBIG__ switch. Such pages are lists of links, not prose."""
    return (
        _DISAMBIGUATION_TITLE.search(title) is not None
        or "__DISAMBIG__" in markup
        or _DISAMBIGUATION_TEMPLATE.search(markup) is not None
    )
