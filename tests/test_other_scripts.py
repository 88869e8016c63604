"""Text in scripts other than the Latin, through sentence splitting and `create`: sentences end at their own stops
(CJK, Devanagari, Bengali, Armenian, Ethiopic, Myanmar, Khmer, Tibetan, Yi, Canadian syllabics), a "sentence" too
long for any pair is cut into pieces and counted, and a corpus its vocab cannot read draws the [UNK] warning.

The text is real: Article 1 of the Universal Declaration of Human Rights in 15 languages, and other articles in
Chinese and Thai (tests/data/scripts/DATA.md says where each comes from)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bertcorpus.transforms.instances import cut_long_sentences
from bertcorpus.transforms.sentences import document_sentences, split_sentences
from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer
from bertcorpus.wordpiece.vocab import Vocab

from conftest import DATA, SAMPLE_TEXT, VOCAB, run_cli

SCRIPTS = DATA / "scripts"
ARTICLE_1 = dict(line.rstrip("\n").split("\t") for line in (SCRIPTS / "udhr_article1.tsv").open(encoding="utf-8"))
# Sentences of Article 1 in each language: its two sentences wherever the script has a stop of its own or the Latin
# full stop; the four clauses that Tibetan ends with a shad; one "sentence" in Thai, which has no sentence stop.
SENTENCES = {code: 2 for code in ARTICLE_1} | {"bo": 4, "tha": 1}


def rejoined(sentences: list[str], paragraph: str) -> str:
    """The sentences put back together, with a space where the paragraph had whitespace between them."""
    text = sentences[0]
    for sentence in sentences[1:]:
        gap = paragraph[paragraph.index(text[-8:]) + len(text[-8:]) :][:1] if text else ""
        text += (" " if gap.isspace() else "") + sentence
    return text


@pytest.mark.parametrize("code", sorted(ARTICLE_1))
def test_article_1_ends_its_sentences_at_the_stops_of_its_script(code):
    paragraph = ARTICLE_1[code]
    sentences = split_sentences(paragraph)
    assert len(sentences) == SENTENCES[code], sentences
    assert all(s and s == s.strip() for s in sentences)
    assert rejoined(sentences, paragraph) == " ".join(paragraph.split())  # nothing dropped, moved or added


def test_a_length_in_characters_of_english_is_about_the_same_in_every_script():
    # Article 1 is 170 characters in English; --min-chars counts the dense scripts' characters by what they say.
    from bertcorpus.transforms.text_length import long_enough, weighted_length

    plain = {code: len(ARTICLE_1[code]) for code in ("cmn", "jpn", "kor")}
    weighted = {code: weighted_length(ARTICLE_1[code]) for code in ("cmn", "jpn", "kor")}
    assert plain == {"cmn": 43, "jpn": 85, "kor": 87}
    assert weighted == {"cmn": 160, "jpn": 160, "kor": 153}
    # Alphabets count one a letter, as Latin letters do.
    assert all(weighted_length(ARTICLE_1[code]) == len(ARTICLE_1[code]) for code in ("hye", "tha", "hin", "bn"))
    assert long_enough(ARTICLE_1["cmn"], 150) and not long_enough(ARTICLE_1["cmn"], 170)


def test_cjk_stops_need_no_space_or_capital_after_them():
    assert document_sentences("今天天气很好。我们去公园散步吧！你想去吗？") == [
        "今天天气很好。",
        "我们去公园散步吧！",
        "你想去吗？",
    ]
    chinese = ARTICLE_1["cmn"]
    assert split_sentences(chinese) == [
        "人人生而自由,在尊严和权利上一律平等。",
        "他们赋有理性和良心,并应以兄弟关系的精神相对待。",
    ]
    # A quotation that a particle continues is one sentence; a full-width full stop between digits is a decimal point.
    assert split_sentences("「行こう。」と彼は言った。そして歩いた。") == [
        "「行こう。」と彼は言った。",
        "そして歩いた。",
    ]
    assert split_sentences("円周率は３．１４である。次の文。") == ["円周率は３．１４である。", "次の文。"]
    # English is untouched by the new stops.
    assert split_sentences("He paid 3.50 dollars. Then he left.") == ["He paid 3.50 dollars.", "Then he left."]


def test_over_long_sentences_are_cut_into_pieces_a_pair_can_hold():
    lengths = np.array([30, 125, 126, 400, 7], np.int32)
    cut, count = cut_long_sentences(lengths, 125)
    assert count == 2  # 126 and 400 tokens; 125 fits a pair of the shortest config as it is
    assert cut.tolist() == [30, 125, 42, 42, 42, 58, 57, 57, 57, 57, 57, 57, 7]  # pieces of at most 125 // 2
    assert cut.sum() == lengths.sum() and cut.dtype == lengths.dtype
    short = lengths[:2]
    assert cut_long_sentences(short, 125)[0] is short  # nothing to cut: the same array


@pytest.fixture(scope="module")
def mixed_corpus(tmp_path_factory) -> Path:
    """English (the reference sample), the Chinese articles and preamble, and the Thai articles, one document each."""
    path = tmp_path_factory.mktemp("scripts") / "mixed.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for name in ("udhr_cmn_hans.txt", "udhr_tha.txt"):
            for block in (SCRIPTS / name).read_text(encoding="utf-8").strip().split("\n\n"):
                title, text = block.split("\n", 1)
                f.write(json.dumps({"id": f"{name}:{title}", "text": text}, ensure_ascii=False) + "\n")
        for number, document in enumerate(SAMPLE_TEXT.read_text(encoding="utf-8").strip().split("\n\n")):
            f.write(json.dumps({"id": f"sample:{number}", "text": document}) + "\n")
    return path


def documents_of(jsonl: Path) -> list[str]:
    return [json.loads(line)["text"] for line in jsonl.read_text(encoding="utf-8").splitlines()]


def test_create_pairs_chinese_sentences_cuts_the_long_preamble_and_warns_of_thai(mixed_corpus, tmp_path, capsys):
    out = tmp_path / "out"
    flags = ["--vocab", VOCAB, "--pair-objective", "sop", "--eval-fraction", "0", "--masking", "dynamic"]
    assert run_cli("create", "--input", mixed_corpus, "--output", out, *flags) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    counts = manifest["counts"]
    thai = (SCRIPTS / "udhr_tha.txt").read_text(encoding="utf-8").count("ข้อ ")
    # Each Thai article is one sentence (Thai has no sentence stop; its tokens, all [UNK] here, are few): those are
    # the only single-sentence documents. Every Chinese article has two sentences or more, and the preamble (one
    # sentence of 463 tokens) is cut into pieces of at most 62, as is every sentence longer than a pair can hold.
    assert counts["single_sentence_documents"] == thai
    # Each is a paragraph kept whole, and counted so: the Thai articles' paragraphs, and nothing else.
    paragraphs = [p for d in documents_of(mixed_corpus) for p in d.split("\n\n")]
    thai_paragraphs = [p for p in paragraphs if any("\u0e00" <= c <= "\u0e7f" for c in p)]
    assert counts["unsplit_paragraphs"] == len(thai_paragraphs) >= thai
    # The data card says so among the records' limits, in the page and in the Hub card
    assert run_cli("stats", out) == 0
    [limit] = json.loads((out / "stats.json").read_text())["datasheet"]["record_limits"]
    assert limit.startswith(f"{len(thai_paragraphs):,} paragraphs of scripts without sentence stops (Thai, Lao)")
    assert (
        f"- {limit}" in (out / "README.md").read_text() and "Limit of the records" in (out / "report.html").read_text()
    )
    tokenizer = WordPieceTokenizer(Vocab.load(str(VOCAB)), lowercase=True)
    documents = documents_of(mixed_corpus)
    too_long = [s for d in documents for s in document_sentences(d) if len(tokenizer.encode(s)) > 128 - 3]
    assert counts["long_sentences_cut"] == len(too_long) and too_long[0].startswith("鉴于对人类家庭所有成员")
    assert manifest["outputs"]["seq128"]["train"]["sop_draws_skipped"].get("single_sentence_document", 0) <= thai * 10
    err = capsys.readouterr().err
    assert "are [UNK] with" in err and "check --do-lower-case, and that the vocab was made for this kind of text" in err
