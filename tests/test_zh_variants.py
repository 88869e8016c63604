"""Chinese converter markup, resolved as MediaWiki resolves it, and script conversion with MediaWiki's tables: each
rule of the syntax on small snippets, then the real zhwiki article 量子力学 (41.8% converter markup as plain
cleaning leaves it), then extract-wiki end to end on a zhwiki dump made of it."""

from __future__ import annotations

import bz2
import json
import re
from pathlib import Path
from xml.sax.saxutils import escape

import pyarrow.parquet as pq
import pytest
from process_memory import run_measured

from bertcorpus.pipeline.cli.commands import main as run_cli
from bertcorpus.transforms.wikitext import clean_wikitext
from bertcorpus.transforms.zh_variants import (
    MarkupCounts,
    parse_rules,
    resolve_converter_markup,
    sweep_residue,
)

zhconv_rs = pytest.importorskip("zhconv_rs")

DATA = Path(__file__).parent / "data"
ARTICLE = DATA / "zh" / "zhwiki-quantum-mechanics.wikitext"
MARKUP = re.compile(r"-\{.*?\}-", re.S)


def shown(wikitext: str, variant: str) -> str:
    """What a reader of the variant sees of a snippet: markup resolved, cleaned, converted."""
    resolved = resolve_converter_markup(wikitext, variant)
    return sweep_residue(resolved.rules.convert(clean_wikitext(resolved.wikitext)), resolved.counts)


@pytest.mark.parametrize(
    "variant, expected",
    [
        ("zh-hans", "《三个火枪手》是亚历山大·仲马的作品。"),
        ("zh-cn", "《三个火枪手》是亚历山大·仲马的作品。"),
        ("zh-hant", "《三劍客》是亞歷山大·仲馬的作品。"),
        ("zh-tw", "《三劍客》是亞歷山大·仲馬的作品。"),
        ("zh-hk", "《三劍客》是亞歷山大·仲馬的作品。"),  # no zh-hk text: its fallback zh-hant's
        ("zh", "《三个火枪手》是亞歷山大·仲馬的作品。"),  # no conversion; the block shows zh's first fallback
    ],
)
def test_an_inline_block_shows_the_variants_text_and_the_rest_is_converted(variant, expected):
    assert shown("《-{zh-hans:三个火枪手;zh-hant:三劍客}-》是亞歷山大·仲馬的作品。", variant) == expected


def test_hidden_rules_convert_the_whole_page_and_show_nothing():
    text = "-{H|zh-cn:雾都孤儿;zh-tw:孤雛淚;zh-hk:苦海孤雛;}-《雾都孤儿》是查尔斯·狄更斯的作品。"
    assert shown(text, "zh-tw") == "《孤雛淚》是查爾斯·狄更斯的作品。"
    assert shown(text, "zh-hk") == "《苦海孤雛》是查爾斯·狄更斯的作品。"
    assert shown(text, "zh-hans") == "《雾都孤儿》是查尔斯·狄更斯的作品。"  # zh-hans falls back on zh-cn


def test_flags_add_show_remove_raw_title_and_variant_lists():
    # A adds the rule and shows the text; later occurrences follow the rule.
    assert shown("-{A|zh-cn:激光;zh-tw:雷射}-器，激光", "zh-tw") == "雷射器，雷射"
    # - removes a rule (MediaWiki applies rules page-wide, so a removed rule is gone); the table still applies.
    assert shown("-{H|zh-hans:甲;zh-hant:乙}-甲", "zh-hant") == "乙"
    assert shown("-{H|zh-hans:甲;zh-hant:乙}--{-|zh-hans:甲;zh-hant:乙}-甲", "zh-hant") == "甲"
    # R and a block without rules show their text raw: the table does not convert it.
    assert shown("-{R|简体字}-與简体字", "zh-hant") == "简体字與簡體字"
    assert shown("-{简体字}-與简体字", "zh-hant") == "简体字與簡體字"
    # A block limited to some variants shows its text, converted, to those (and their fallbacks) alone.
    assert shown("甲-{zh-hant;zh-tw|只在繁體}-乙", "zh-tw") == "甲只在繁體乙"
    assert shown("甲-{zh-hant;zh-tw|只在繁體}-乙", "zh-hans") == "甲乙"
    # T sets the title and shows nothing.
    resolved = resolve_converter_markup("-{T|zh-cn:激光;zh-tw:雷射}-正文", "zh-tw")
    assert resolved.rules.convert_title("激光") == "雷射" and "雷射" not in resolved.rules.convert(resolved.wikitext)


def test_unidirectional_rules_convert_only_their_variant():
    text = "-{H|大霹靂=>zh-cn:大爆炸;大霹靂=>zh-tw:大霹靂;}-大霹靂理論"
    assert shown(text, "zh-cn") == "大爆炸理论"
    assert shown(text, "zh-tw") == "大霹靂理論"


def test_note_ta_numbered_rules_groups_and_title():
    text = "{{NoteTA\n|T=zh-cn:量子力学;zh-tw:量子力學\n|1=zh-cn:激光;zh-tw:雷射;zh-hk:激光\n|G1=物理學\n}}激光與引力波"
    resolved = resolve_converter_markup(text, "zh-tw")
    out = resolved.rules.convert(clean_wikitext(resolved.wikitext))
    # 1= is a page rule; G1=物理學 is the Physics group, which holds zh-tw:重力波;zh-cn:引力波.
    assert out == "雷射與重力波"
    assert resolved.rules.convert_title("量子力学") == "量子力學"
    assert resolved.counts.unknown_group == 0
    assert resolve_converter_markup("{{NoteTA|G1=沒有這個組}}", "zh-tw").counts.unknown_group == 1


def test_malformed_markup_is_removed_and_counted_and_the_text_kept():
    counts = MarkupCounts()
    rule = parse_rules("zh-hans:甲;zh-xx:乙;zh-hant:丙", counts)
    assert rule.bid == {"zh-hans": "甲", "zh-hant": "丙"} and counts.unknown_variant == 1
    resolved = resolve_converter_markup(
        "開始 -{zh-hans:甲;zh-hant:乙 沒有結束\n下一段 -{嵌套 -{R|内}- 外}- 完", "zh-hant"
    )
    assert resolved.counts.unclosed == 1
    out = sweep_residue(resolved.rules.convert(clean_wikitext(resolved.wikitext)), resolved.counts)
    assert out == "開始 甲;乙 沒有結束 下一段 嵌套 内 外 完" or out.startswith("開始 甲;乙 沒有結束")
    assert "-{" not in out and "}-" not in out and "zh-hans" not in out
    # A template followed by a hyphen is no block's end; a }- left anywhere is swept from the clean text.
    assert shown("{{lang|en|x}}-y 文字 -{R|甲}-", "zh-hans") == "x-y 文字 甲"
    counts = MarkupCounts()
    assert sweep_residue("甲}-乙-{丙", counts) == "甲乙丙" and counts.residue == 2


@pytest.mark.parametrize("variant", ["zh-hans", "zh-hant", "zh-tw", "zh"])
def test_rules_no_table_has_and_a_cut_hidden_rule_leave_nothing_of_their_markup(variant):
    # A block of rules for variants no table has shows nothing (each rule dropped and counted), not its rules.
    resolved = resolve_converter_markup("他在-{zh-yue:電腦;zh-xx:abc}-前面。", variant)
    assert sweep_residue(resolved.rules.convert(resolved.wikitext), resolved.counts) == "他在前面。"
    assert resolved.counts.unknown_variant == 2
    # A page cut inside a hidden rule: the cut rule shows nothing, its flag included; a cut A rule shows its text.
    page = "第一段的正文。\n\n第二段。-{H|zh-cn:词3"
    text = shown(page, variant)
    assert text == "第一段的正文。\n\n第二段。" and "zh-cn" not in text and "H|" not in text
    assert shown("第二段。-{A|zh-cn:中文", variant) == "第二段。中文"


def test_the_real_article_has_no_markup_and_one_script_after_resolution():
    wikitext = ARTICLE.read_text(encoding="utf-8")
    plain = clean_wikitext(wikitext, title="量子力学")
    markup_share = sum(len(m) for m in MARKUP.findall(plain)) / len(plain)
    assert markup_share > 0.40  # what extract-wiki kept before: 41.8% of the characters were rules
    mixed_before = [p for p in plain.split("\n\n") if 0.05 < zhconv_rs.is_hans_confidence(p) < 0.95]
    assert len(mixed_before) > 40
    for variant in ("zh-hans", "zh-hant", "zh-cn", "zh-tw", "zh-hk", "zh"):
        resolved = resolve_converter_markup(wikitext, variant)
        text = sweep_residue(
            resolved.rules.convert(clean_wikitext(resolved.wikitext, title="量子力学")), resolved.counts
        )
        assert "-{" not in text and "}-" not in text and "\ue000" not in text and "\ue001" not in text
        assert resolved.counts.blocks > 250 and resolved.counts.page_rules > 500  # the H lines and NoteTA's group
        assert 10_000 < len(text) < 12_500  # the prose, without the 8,000 characters of rules
        if variant in ("zh-hans", "zh-cn"):
            assert text.startswith("量子力学（英语：Quantum mechanics）是物理学的分支学科。")
            assert all(zhconv_rs.is_hans_confidence(p) > 0.95 for p in text.split("\n\n") if len(p) > 30)
        if variant in ("zh-hant", "zh-tw", "zh-hk"):
            assert text.startswith("量子力學（英語：Quantum mechanics）是物理學的分支學科。")
            # The editors' own rule for Einstein keeps a simplified 爱 in zh-tw; every other paragraph is one script.
            mixed = [p for p in text.split("\n\n") if len(p) > 30 and zhconv_rs.is_hans_confidence(p) > 0.05]
            assert len(mixed) <= 1 and all("爱因斯坦" in p for p in mixed)
        assert resolved.rules.convert_title("量子力学") == (
            "量子力学" if variant in ("zh-hans", "zh-cn", "zh") else "量子力學"
        )


def zhwiki_dump(path: Path, pages: list[tuple[int, str, str]]) -> Path:
    """A zhwiki export (siteinfo dbname zhwiki, xml:lang zh) holding the given (id, title, wikitext) pages."""
    head = (
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" xml:lang="zh"><siteinfo><sitename>Wikipedia'
        "</sitename><dbname>zhwiki</dbname><base>https://zh.wikipedia.org/wiki/Wikipedia:%E9%A6%96%E9%A1%B5</base>"
        "</siteinfo>"
    )
    body = "".join(
        f"<page><title>{escape(title)}</title><ns>0</ns><id>{pid}</id><revision><id>{pid * 7}</id>"
        f'<text xml:space="preserve">{escape(text)}</text></revision></page>'
        for pid, title, text in pages
    )
    path.write_text(head + body + "</mediawiki>", encoding="utf-8")
    return path


MALFORMED = (
    "'''甲乙'''是一個測試頁面，-{zh-hans:它有一个没有结束的块;zh-hant:它有一個沒有結束的塊 直到這一行結束。\n\n"
    "第二段有嵌套的 -{A|zh-cn:软件;zh-tw:-{R|軟體}-}- 規則，還有 -{zh-hans:甲;zh-yue:乙}- 這種表裡沒有的變體。"
    "软件工程是计算机科学的一个分支，研究如何系统地开发软件。\n\n"
    "第三段沒有任何轉換標記，只是為了讓這個頁面的正文超過一百個字元的下限。"
)


@pytest.fixture(scope="module")
def zhwiki(tmp_path_factory):
    folder = tmp_path_factory.mktemp("zhwiki")
    dump = zhwiki_dump(
        folder / "zhwiki-test-pages-articles.xml",
        [(13, "量子力学", ARTICLE.read_text(encoding="utf-8")), (21, "甲乙", MALFORMED)],
    )
    return dump


def extract(dump: Path, out: Path, *flags: str) -> dict:
    argv = ["extract-wiki", "--input", str(dump), "--output", str(out), "--runner", "DirectRunner", *flags]
    assert run_cli(argv) == 0
    return json.loads((out / "manifest.json").read_text())


def rows(out: Path) -> list[dict]:
    return [r for f in sorted(out.glob("documents-*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_extract_wiki_writes_a_zh_dump_in_one_script_by_default(zhwiki, tmp_path):
    manifest = extract(zhwiki, tmp_path / "out")
    docs = manifest["documents"]
    assert docs["read"] == docs["kept"] == 2
    assert docs["languages"] == {"zh-Hans": {"documents": 2, "characters": docs["characters"]}}
    assert manifest["config"]["zh_variant"] == "zh-hans"
    assert manifest["inputs"][0]["language"] == "zh" and manifest["inputs"][0]["wiki"] == "zhwiki"
    markup = manifest["converter_markup"]
    assert markup["unclosed"] == 1 and markup["unknown_variant"] == 1 and markup["blocks"] > 250
    by_id = {r["id"]: r for r in rows(tmp_path / "out")}
    assert set(by_id) == {"zhwiki:13", "zhwiki:21"}
    for row in by_id.values():
        assert "-{" not in row["text"] and "}-" not in row["text"] and "zh-hans" not in row["text"]
        assert row["language"] == "zh-Hans" and row["language_confidence"] is None
    assert by_id["zhwiki:21"]["title"] == "甲乙"
    assert "软件工程是计算机科学的一个分支" in by_id["zhwiki:21"]["text"]  # the A rule and the table, in simplified


def test_extract_wiki_both_writes_each_article_in_each_script(zhwiki, tmp_path):
    manifest = extract(zhwiki, tmp_path / "both", "--zh-variant", "both")
    docs = manifest["documents"]
    # Each page is two documents: counted as two read, so that read = kept + skipped + errors still holds.
    assert docs["read"] == docs["kept"] == 4 and manifest["config"]["zh_variant"] == "both"
    assert sorted(docs["languages"]) == ["zh-Hans", "zh-Hant"]
    by_id = {r["id"]: r for r in rows(tmp_path / "both")}
    assert sorted(by_id) == ["zhwiki:13@zh-Hans", "zhwiki:13@zh-Hant", "zhwiki:21@zh-Hans", "zhwiki:21@zh-Hant"]
    assert by_id["zhwiki:13@zh-Hant"]["title"] == "量子力學" and by_id["zhwiki:13@zh-Hans"]["title"] == "量子力学"
    # The page's A rule (软件 → 軟體 for zh-hant, by way of zh-tw) and the table (计算机 → 計算機).
    assert "軟體工程是計算機科學的一個分支" in by_id["zhwiki:21@zh-Hant"]["text"]


def test_zh_variant_on_a_dump_of_another_language_is_one_line(tmp_path, capsys):
    enwiki = DATA / "wiki" / "enwiki-small-sample.xml.bz2"
    argv = ["extract-wiki", "--input", str(enwiki), "--output", str(tmp_path / "o"), "--zh-variant", "zh-tw"]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"bertcorpus extract-wiki: error: --zh-variant converts Chinese Wikipedia dumps, and {enwiki} is enwiki "
        "(en); leave the flag out for it"
    ]
    assert not (tmp_path / "o").exists()


def test_rules_that_multiply_a_page_make_one_error_in_bounded_memory(tmp_path):
    # 量 → ten thousand 爆 for each variant, then 量子 a hundred thousand times: 0.6 MB of wikitext, 1.3 KB of
    # bz2, that would convert to 10^9 characters. A title of 250 characters and {{PAGENAME}} 300,000 times is the
    # same for the title: 75 million characters. Each page is one error; the article beside them is kept.
    burst = "爆" * 10_000
    rules = "".join(f"量=>{variant}:{burst};" for variant in ("zh-cn", "zh-hans", "zh-tw", "zh-hant"))
    pages = [
        (5, "量子爆炸", f"-{{H|{rules}}}-" + "量子" * 100_000),
        (8, "名" * 250, "{{PAGENAME}}" * 300_000),
        (21, "甲乙", MALFORMED),
    ]
    xml = zhwiki_dump(tmp_path / "pages.xml", pages)
    dump = tmp_path / "zhwiki-bomb-pages-articles.xml.bz2"
    dump.write_bytes(bz2.compress(xml.read_bytes(), 9))
    assert dump.stat().st_size < 4096
    done = run_measured(
        "extract-wiki", "--input", dump, "--output", tmp_path / "out", "--zh-variant", "both",
        "--max-error-rate", "1", workdir=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.peak_rss_bytes < 1.5 * 2**30
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    docs = manifest["documents"]
    assert docs["errors_by_reason"] == {"page_too_large": 2}
    assert docs["read"] == docs["kept"] + sum(docs["skipped"].values()) + docs["errors"] == 4
    errors = [json.loads(line) for f in sorted((tmp_path / "out").glob("errors-*.jsonl")) for line in f.open()]
    assert [(e["where"], e["reason"]) for e in errors] == [("page 5", "page_too_large"), ("page 8", "page_too_large")]
    assert errors[0]["detail"].startswith("page '量子爆炸': its text converted to zh-hans is longer than")
    assert sorted(r["id"] for r in rows(tmp_path / "out")) == ["zhwiki:21@zh-Hans", "zhwiki:21@zh-Hant"]


def test_a_two_sentence_chinese_stub_is_kept_at_the_default_min_chars(tmp_path):
    # Two sentences of the zhwiki article 漢語 are 84 characters: under --min-chars 100 counted one a character,
    # about 330 in the characters of English they say (an ideograph counts 4).
    stub = (
        "漢語曾影響過不同的語言，如日語、朝鲜語、越南語，當中都有大量漢語借词以及借用漢字，在泰语、高棉语、马来语中也有"
        "一些汉语借词。在新词汇的产生过程中，亦对不同语言产生影响。"
    )
    dump = zhwiki_dump(tmp_path / "zhwiki-stub-pages-articles.xml", [(34, "漢語的影響", stub)])
    manifest = extract(dump, tmp_path / "out")
    assert manifest["documents"]["kept"] == 1 and manifest["documents"]["skipped"]["too_short"] == 0
    assert [r["text"] for r in rows(tmp_path / "out")] == [
        resolve_converter_markup(stub, "zh-hans").rules.convert(stub)
    ]
