"""The vocab on Chinese text with its default flags: bert-base-chinese's layout, a line for every CJK ideograph seen
twice and for the everyday ones of both scripts, no filler, and at most 0.1% [UNK] on held-out text; tokens the
same as the reference FullTokenizer's on Chinese in both scripts, cased and uncased."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import zstandard

from bertcorpus.pipeline.cli.commands import main as run_cli
from bertcorpus.transforms.book_cleaning import clean_book
from bertcorpus.transforms.book_decoding import decode_book
from bertcorpus.transforms.wikitext import clean_wikitext
from bertcorpus.transforms.zh_variants import PageRules, resolve_converter_markup
from bertcorpus.wordpiece.cjk import IDEOGRAPH, common_ideographs, wide_forms
from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer
from bertcorpus.wordpiece.vocab import Vocab

from full_tokenizer import FullTokenizerEquivalent, basic_tokens

pytest.importorskip("zhconv_rs")

ZH = Path(__file__).parent / "data" / "zh"


def chinese_documents() -> list[dict]:
    """The bundled real Chinese text as documents, in simplified characters as extract-wiki writes a zh dump."""
    to_hans = PageRules("zh-hans").convert
    article = resolve_converter_markup(
        (ZH / "zhwiki-quantum-mechanics.wikitext").read_text(encoding="utf-8"), "zh-hans"
    )
    docs = [
        ("量子力学", article.rules.convert(clean_wikitext(article.wikitext))),
        ("汉语", to_hans((ZH / "zhwiki-hanyu-plain.txt").read_text(encoding="utf-8"))),
        ("豆棚闲话", to_hans(clean_book(decode_book((ZH / "pg25328-tou-peng-hsien-hua.txt").read_bytes()).text).text)),
    ]
    sentences = [
        line.replace(" ", "") for line in (ZH / "gsdsimp-test-words.txt").read_text(encoding="utf-8").split("\n")
    ]
    docs += [(f"gsd-{i}", "\n\n".join(sentences[i : i + 50])) for i in range(0, len(sentences), 50)]
    prose = zstandard.ZstdDecompressor().decompress((ZH / "huzheng-fofa-public-domain.txt.zst").read_bytes()).decode()
    paragraphs = [p for p in prose.split("\n") if p.strip()]
    docs += [(f"prose-{i}", "\n\n".join(paragraphs[i : i + 200])) for i in range(0, len(paragraphs), 200)]
    return [{"id": name, "text": text, "language": "zh-Hans"} for name, text in docs]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("zh-corpus") / "zh.jsonl"
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in chinese_documents()), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("zh-vocab") / "vocab.txt"
    assert run_cli(["vocab", "--input", str(corpus), "--output", str(out)]) == 0
    return out, json.loads(out.with_name("manifest.json").read_text())


def test_default_flags_cover_chinese(trained, corpus):
    out, manifest = trained
    tokens = out.read_text(encoding="utf-8").split("\n")[:-1]
    held_out = manifest["held_out"]
    assert held_out["words"] > 10_000  # a character is a word: enough to measure 0.1% on
    assert held_out["unk_word_rate"] <= 0.001  # 18% with the limit of 1,000 characters before
    assert manifest["tokens"]["layout"] == "bert-chinese"
    assert manifest["tokens"]["filler_share"] <= 0.05  # 86% before, [unused] lines padding 30,000
    assert len(tokens) == manifest["tokens"]["lines"] < 30_000  # as long as what was learned
    vocab = set(tokens)
    assert common_ideographs() <= vocab
    seen = Counter(IDEOGRAPH.findall(corpus.read_text(encoding="utf-8")))
    assert all(c in vocab for c, n in seen.items() if n >= 4)  # seen twice outside the held-out lines, surely
    assert manifest["tokens"]["ideographs"] > 7_000


def test_bert_chinese_layout_and_hugging_face(trained, tmp_path):
    out, _ = trained
    tokens = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert tokens[:106] == [
        "[PAD]",
        *[f"[unused{i}]" for i in range(1, 100)],
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "<S>",
        "<T>",
    ]
    transformers = pytest.importorskip("transformers")
    text = "量子力学是物理学的分支学科。豆棚闲话，吾乡先辈诗人徐菊潭有《豆棚吟》一册。"
    hf = transformers.AutoTokenizer.from_pretrained(str(out.parent))
    ours = WordPieceTokenizer(Vocab.load(str(out)), lowercase=True)
    assert hf(text, add_special_tokens=False)["input_ids"] == ours.encode(text).tolist()


def test_bert_base_chinese_recipe_has_its_size(corpus, tmp_path, capsys):
    out = tmp_path / "v" / "vocab.txt"
    argv = ["vocab", "--input", str(corpus), "--output", str(out), "--layout", "bert-chinese"]
    assert run_cli([*argv, "--vocab-size", "21128", "--fill-to-size"]) == 0
    assert len(out.read_text(encoding="utf-8").split("\n")[:-1]) == 21128
    padding = json.loads(out.with_name("manifest.json").read_text())["tokens"]["padding"]
    assert padding > 10_000  # 4.4 MB of text fills about half of bert-base-chinese's size
    assert f"{padding:,} of them --fill-to-size padding" in capsys.readouterr().err


@pytest.mark.parametrize("size, warned", [(15000, True), (11000, False)])
def test_padding_past_a_tenth_of_the_lines_is_warned_about(corpus, tmp_path, capsys, size, warned):
    """A third of the lines padding (the recipe's size on a small corpus gave 46-60%) is warned about; a vocab a few
    hundred lines short of its size only gets a note."""
    out = tmp_path / "v" / "vocab.txt"
    argv = ["vocab", "--input", str(corpus), "--output", str(out), "--layout", "bert-chinese", "--fill-to-size"]
    assert run_cli([*argv, "--vocab-size", str(size)]) == 0
    padding = json.loads(out.with_name("manifest.json").read_text())["tokens"]["padding"]
    assert (0.1 * size < padding < 0.5 * size) if warned else (0 < padding < 0.1 * size)
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith(("warning:", "note:"))]
    assert len(err) == 1
    if warned:
        assert err[0].startswith("warning:") and f"{padding:,} of them --fill-to-size padding" in err[0]
        assert f"leave out --fill-to-size for a vocab of the {size - padding:,} lines made" in err[0]
    else:
        assert err[0].startswith("note:") and f"the last {padding:,} lines are [unusedN] padding" in err[0]


def wide_form_lines() -> list[str]:
    """The lines of the bundled prose that write digits, Latin letters or punctuation in full-width or small forms
    (１、布施波罗蜜..., 注２：...)."""
    prose = zstandard.ZstdDecompressor().decompress((ZH / "huzheng-fofa-public-domain.txt.zst").read_bytes()).decode()
    return [line for line in prose.split("\n") if any(c in wide_forms() for c in line if c not in "，！：）？（；")]


def test_full_width_and_small_forms_are_in_the_vocab_when_the_text_lacks_them(tmp_path):
    """Trained on text that writes no full-width digits or letters (the wiki articles, the book, the treebank), the
    vocab still covers prose that does, as bert-base-chinese's vocab does: ０-９, ａ-ｚ, ﹐﹑︰﹏ are not [UNK]."""
    corpus = tmp_path / "zh.jsonl"
    docs = [d for d in chinese_documents() if not d["id"].startswith("prose-")]
    assert not any(c in "０１２３４５６７８９ａｂｃｄｅＡＢＣＤＥ" for d in docs for c in d["text"])
    corpus.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    out = tmp_path / "v" / "vocab.txt"
    assert run_cli(["vocab", "--input", str(corpus), "--output", str(out)]) == 0
    vocab = Vocab.load(str(out))
    assert wide_forms() - set("ＡＢＣＤＥＦＧＨＩＪＫＬＭＮＯＰＱＲＳＴＵＶＷＸＹＺ") <= set(vocab.tokens)  # uncased
    assert {"##１", "##９", "##ｚ"} <= set(vocab.tokens) and "##，" not in vocab.tokens  # punctuation is split off
    words = [w for line in wide_form_lines() for w in basic_tokens(line, True)]
    wide = [w for w in words if any(c.upper() in wide_forms() or c in wide_forms() for c in w)]
    assert len(wide) > 2000  # １, ２５, ａｂｃ, ﹐ ... as the reference's BasicTokenizer cuts them
    tokenizer = WordPieceTokenizer(vocab)
    assert [w for w in wide if "[UNK]" in tokenizer.tokenize(w)] == []  # 257 of the 2,022 were [UNK] before


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize("script", ["zh-hans", "zh-hant"])
def test_tokens_are_the_reference_tokenizers_on_chinese(trained, lowercase, script):
    out, _ = trained
    vocab = Vocab.load(str(out))
    convert = PageRules(script).convert
    texts = [convert(d["text"][:20_000]) for d in chinese_documents()[:4]]
    texts.append("混合 Mixed 文字：Ångström、ＡＢＣ１２３、〇、日本語のかな、한국어。")
    reference = FullTokenizerEquivalent(list(vocab.tokens), lowercase)
    ours = WordPieceTokenizer(vocab, lowercase)
    for text in texts:
        assert ours.tokenize(text) == reference.tokenize(text)
