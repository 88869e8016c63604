"""Offline language identification (`--language auto`, transforms/language_id.py) on real Wikipedia text: long
articles of six languages, documents that mix two, the minimum confidence, and the flags' one-line refusals."""

from __future__ import annotations

import json
import re

import pytest

from bertcorpus.transforms.language_id import Detected, LanguageSetting, detect_language, windows

from conftest import VOCAB, run_cli
from wiki_fixtures import BGWIKI_UTF16, ENWIKI_2014, MULTILINGUAL, wiki_articles

pytest.importorskip("lingua")

# The languages of the samples and those a detector could take them for: Russian and Bulgarian beside Ukrainian,
# Chinese and Korean beside Japanese, Hindi beside Bengali.
CANDIDATES = ("bg", "bn", "el", "en", "hi", "ja", "ko", "ru", "uk", "vi", "zh")
LONG = 5000


@pytest.fixture(scope="module")
def articles() -> dict[str, list[tuple[str, str]]]:
    found = {lang: wiki_articles(path) for lang, path in MULTILINGUAL.items()}
    found["en"] = wiki_articles(ENWIKI_2014)
    return found


def test_long_articles_of_six_languages_are_told_apart(articles):
    judged = {
        lang: [detect_language(text, CANDIDATES, 0.5) for _, text in docs if len(text) >= LONG]
        for lang, docs in articles.items()
    }
    assert all(len(verdicts) >= 25 for verdicts in judged.values())
    right = {lang: sum(v.language == lang for v in verdicts) for lang, verdicts in judged.items()}
    total = sum(len(v) for v in judged.values())
    assert total >= 250
    assert sum(right.values()) / total >= 0.97
    assert all(right[lang] / len(judged[lang]) >= 0.9 for lang in judged), right
    # A long article in one language is judged with near certainty.
    confidences = sorted(v.confidence for verdicts in judged.values() for v in verdicts)
    assert confidences[len(confidences) // 2] > 0.95


def mixed(first: str, second: str, first_share: float, size: int = 6000) -> str:
    """A document of `size` characters: the start of `first`, then the start of `second`."""
    cut = round(size * first_share)
    return first[:cut] + "\n\n" + second[: size - cut]


def long_article(articles, lang: str) -> str:
    return next(text for _, text in articles[lang] if len(text) >= 8000)


def test_a_mixed_document_gets_its_majority_language_and_the_confidence_records_the_mix(articles):
    uk, el = long_article(articles, "uk"), long_article(articles, "el")
    pure = detect_language(uk[:6000], CANDIDATES)
    # Six windows spread over the document: four fall in the Ukrainian two thirds, two in the Greek third.
    two_thirds = detect_language(mixed(uk, el, 2 / 3), CANDIDATES)
    assert sum(w in uk for w in windows(mixed(uk, el, 2 / 3))) == 4
    assert pure.language == "uk" and pure.confidence > 0.95
    assert two_thirds.language == "uk" and 0.5 < two_thirds.confidence < 0.72
    # The other way round, the other majority.
    assert detect_language(mixed(el, uk, 2 / 3), CANDIDATES).language == "el"


def test_below_the_minimum_confidence_a_document_is_und_with_its_confidence_kept(articles):
    half = mixed(long_article(articles, "ja"), long_article(articles, "bn"), 0.5)
    found = detect_language(half, CANDIDATES, min_confidence=0.6)
    assert found.language == "und" and 0.3 < found.confidence < 0.6
    assert detect_language(half, CANDIDATES, min_confidence=0.3).language in ("ja", "bn")
    setting = LanguageSetting("auto", CANDIDATES, 0.6)
    assert setting.resolve(None, lambda: half) == found
    assert setting.resolve("und", lambda: half) == found  # und carries no language: it is detected
    assert setting.resolve("ja", lambda: half) is None  # a language the document carries is kept
    assert LanguageSetting("vi").resolve(None, lambda: half) == Detected("vi", None)  # given, not detected
    assert detect_language("   \n\n ", CANDIDATES) == Detected("und", 0.0, "lingua")


def test_a_document_in_a_language_outside_the_list_is_und(articles):
    # Restricted to a list, the detector gives a document of another language the listed one it looks most like,
    # with full confidence; the light detector of all languages finds it is another, and it is und.
    bulgarian = next(text for _, text in wiki_articles(BGWIKI_UTF16))
    found = detect_language(bulgarian, ("en", "uk"), 0.5)
    assert found.language == "und" and found.confidence < 0.5
    ukrainian = [text for _, text in articles["uk"] if len(text) >= LONG]
    assert len(ukrainian) >= 25
    assert {detect_language(text, ("en", "ru"), 0.5).language for text in ukrainian} == {"und"}
    # In the list, the same documents keep their language.
    assert detect_language(bulgarian, ("bg", "en", "uk"), 0.5).language == "bg"
    assert {detect_language(text, ("en", "uk"), 0.5).language for text in ukrainian} == {"uk"}


def test_create_detects_the_language_of_documents_that_carry_none(tmp_path, articles):
    lines = []
    for lang in ("ja", "uk", "el", "bn"):
        lines += [{"id": f"{lang}:{n}", "text": text[:3000]} for n, (_, text) in enumerate(articles[lang][:3])]
    # A line that names its language keeps it, whatever its text looks like.
    lines.append({"id": "named", "text": articles["el"][5][1][:3000], "language": "vi"})
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "out"
    code = run_cli(
        "create", "--input", docs, "--vocab", VOCAB, "--output", out, "--dupe-factor", "1", "--eval-fraction", "0",
        "--language", "auto", "--languages", ",".join(CANDIDATES), "--runner", "DirectRunner",
    )  # fmt: skip
    assert code == 0
    languages = json.loads((out / "manifest.json").read_text())["languages"]
    assert {lang: entry["documents"] for lang, entry in languages.items()} == {
        "bn": 3,
        "el": 3,
        "ja": 3,
        "uk": 3,
        "vi": 1,
    }


@pytest.mark.parametrize(
    "languages, message",
    [
        ("en,jp", "argument --languages: unknown language code 'jp'; did you mean ja (Japanese)?"),
        ("en,ua", "argument --languages: unknown language code 'ua'; did you mean uk (Ukrainian)?"),
        ("en,yi", "language identification does not know yi; it knows these 75: af, ar,"),
        ("ja", "--languages needs at least two languages to tell apart; for documents that are all in one, pass "
         "--language ja instead of auto"),
        ("", "argument --languages: '' names no language: give the languages to tell apart (en,zh,ja), or leave "
         "--languages out to tell apart all the detector knows"),
        (" , ", "argument --languages: ' , ' names no language"),
    ],
)  # fmt: skip
def test_a_bad_language_list_gets_one_line(tmp_path, capsys, languages, message):
    try:
        code = run_cli(
            "extract-books", "--input", tmp_path, "--output", tmp_path / "o", "--language", "auto",
            "--languages", languages,
        )  # fmt: skip
    except SystemExit as e:  # argparse's own refusal
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_language_fields_that_are_no_tag_are_counted_and_reported(tmp_path, capsys, articles):
    # A JSONL line's language that is no BCP 47 tag is read as none (und): counted in the manifest and the summary
    # of every job that reads it, never silently.
    values = [5, ["en"], {"a": 1}, "xx-YY", True, "uk", None]
    lines = []
    for n, ((_, text), value) in enumerate(zip(articles["uk"], values)):
        lines.append({"id": f"uk:{n}", "text": text, **({"language": value} if value is not None else {})})
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    assert run_cli("dedup", "--input", docs, "--output", tmp_path / "dedup") == 0
    (source,) = json.loads((tmp_path / "dedup" / "manifest.json").read_text())["sources"]
    assert source["unknown_language_tags"] == 5
    assert {lang: entry["documents"] for lang, entry in source["languages"].items()} == {"uk": 1, "und": 6}
    assert "docs language tags" in capsys.readouterr().out
    assert run_cli("vocab", "--input", docs, "--output", tmp_path / "vocab" / "vocab.txt") == 0
    (entry,) = json.loads((tmp_path / "vocab" / "manifest.json").read_text())["inputs"]
    assert entry["unknown_language_tags"] == 5
    assert re.search(r"\n  language tags +5 unknown, read as und\n", capsys.readouterr().out)
    out = tmp_path / "records"
    assert run_cli("create", "--input", docs, "--vocab", VOCAB, "--output", out, "--dupe-factor", "1") == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["unknown_language_tags"] == 5
    assert {lang: entry["documents"] for lang, entry in manifest["languages"].items()} == {"uk": 1, "und": 6}
    assert re.search(r"\n  unknown language tags +5\n", capsys.readouterr().out)
