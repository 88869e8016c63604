"""`vocab` on real articles of five Wikipedias in very different amounts: each language measured on its own held-out
words, and `--language-sampling-alpha` smoothing the languages' word counts as multilingual BERT did."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bertcorpus.transforms.language_sampling import smoothed_shares

from conftest import run_cli
from wiki_fixtures import LANGUAGE_ARTICLES, write_language_articles


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_language_articles(tmp_path_factory.mktemp("languages") / "articles.jsonl")


@pytest.fixture(scope="module")
def vocabs(corpus, tmp_path_factory) -> dict[str, tuple[dict, str]]:
    made = {}
    for alpha in ("1", "0.3"):
        out = tmp_path_factory.mktemp(f"alpha{alpha}") / "vocab.txt"
        flags = ["--vocab-size", "4000", "--holdout-fraction", "0.2", "--language-sampling-alpha", alpha]
        assert run_cli("vocab", "--input", corpus, "--output", out, *flags) == 0
        made[alpha] = json.loads((out.parent / "manifest.json").read_text())
    return made


def test_each_language_is_measured_on_its_own_held_out_words(vocabs):
    manifest = vocabs["1"]
    languages = manifest["languages"]
    assert set(languages) == set(LANGUAGE_ARTICLES)
    assert sum(e["held_out_words"] for e in languages.values()) == manifest["held_out"]["words"]
    for entry in languages.values():
        assert entry["pieces_per_word"] >= 1 and 0 <= entry["unk_token_share"] <= entry["unk_word_rate"]
    # A vocab of 4,000 lines trained mostly on Japanese serves the rare scripts worst.
    assert languages["ja"]["pieces_per_word"] < min(languages[lang]["pieces_per_word"] for lang in ("bn", "uk", "el"))


def test_smoothed_counts_give_rare_languages_more_of_the_vocab(vocabs):
    plain, smoothed = vocabs["1"]["languages"], vocabs["0.3"]["languages"]
    words = {lang: e["words"] for lang, e in smoothed.items()}
    targets = smoothed_shares(words, 0.3)
    for lang, entry in smoothed.items():
        assert entry["smoothed_share"] == pytest.approx(targets[lang], abs=1e-6)
        assert entry["scale"] * entry["share"] == pytest.approx(entry["smoothed_share"], rel=1e-3)
    assert smoothed["ja"]["scale"] < 1 < smoothed["bn"]["scale"]
    for lang in ("bn", "uk", "el"):
        assert smoothed[lang]["pieces_per_word"] < plain[lang]["pieces_per_word"] - 0.3
    assert smoothed["ja"]["pieces_per_word"] > plain["ja"]["pieces_per_word"]
    assert vocabs["0.3"]["config"]["language_sampling_alpha"] == 0.3


def test_the_summary_names_the_languages_served_badly(corpus, tmp_path, capsys):
    out = tmp_path / "vocab.txt"
    assert (
        run_cli("vocab", "--input", corpus, "--output", out, "--vocab-size", "4000", "--holdout-fraction", "0.2") == 0
    )
    summary = capsys.readouterr().out
    badly = re.search(r"languages served badly +(.*)", summary).group(1)
    assert {"bn", "uk"} <= set(re.findall(r"(\w+) \(", badly)) and "ja (" not in badly


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--language-sampling-alpha", "0"], "--language-sampling-alpha must be in (0, 1], not 0"),
        (["--language-sampling-alpha", "2"], "--language-sampling-alpha must be in (0, 1], not 2"),
        (
            ["--language-sampling-alpha", "0.7", "--count-with-beam"],
            "--language-sampling-alpha counts each language apart in this process; leave out --count-with-beam",
        ),
    ],
)
def test_a_bad_alpha_gets_one_line(corpus, tmp_path, capsys, flags, message):
    code = run_cli("vocab", "--input", corpus, "--output", tmp_path / "vocab.txt", *flags)
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "vocab.txt").exists()
