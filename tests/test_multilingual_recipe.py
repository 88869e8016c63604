"""The multilingual recipe of docs/recipes.md, end to end on real dumps of five Wikipedias: extract-wiki each → dedup
→ vocab with smoothed counts → create with smoothed language shares → the loader's batches."""

from __future__ import annotations

import json
import unicodedata
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest

from bertcorpus import PretrainingLoader

from conftest import run_cli
from wiki_fixtures import MULTILINGUAL

LOCAL = ["--runner", "DirectRunner"]


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    root = tmp_path_factory.mktemp("multilingual")
    sources = []
    for lang, dump in MULTILINGUAL.items():
        assert run_cli("extract-wiki", "--input", dump, "--output", root / "wiki" / lang, *LOCAL) == 0
        sources.append(f"{lang}={root / 'wiki' / lang}")
    assert run_cli("dedup", "--input", *sources, "--output", root / "dedup", *LOCAL) == 0
    documents = [root / "dedup" / lang / "documents-*.parquet" for lang in MULTILINGUAL]
    vocab = root / "vocab" / "vocab.txt"
    flags = ["--vocab-size", "8000", "--language-sampling-alpha", "0.7", "--holdout-fraction", "0.05"]
    assert run_cli("vocab", "--input", *documents, "--output", vocab, *flags) == 0
    flags = ["--masking", "dynamic", "--language-sampling-alpha", "0.7"]
    assert run_cli("create", "--input", *documents, "--vocab", vocab, "--output", root / "out", *flags, *LOCAL) == 0
    return root


def manifest(path) -> dict:
    return json.loads(path.read_text())


def test_every_stage_keeps_and_reports_the_languages_of_the_dumps(recipe):
    for lang in MULTILINGUAL:
        extracted = manifest(recipe / "wiki" / lang / "manifest.json")["documents"]["languages"]
        assert list(extracted) == [lang] and extracted[lang]["documents"] >= 25
        deduped = manifest(recipe / "dedup" / lang / "manifest.json")["documents"]["languages"]
        assert list(deduped) == [lang]
    vocab = manifest(recipe / "vocab" / "manifest.json")["languages"]
    assert set(vocab) == set(MULTILINGUAL)
    assert all(entry["pieces_per_word"] and entry["smoothed_share"] for entry in vocab.values())
    created = manifest(recipe / "out" / "manifest.json")
    assert set(created["languages"]) == set(MULTILINGUAL)


def test_the_instances_are_mixed_by_smoothed_shares(recipe):
    created = manifest(recipe / "out" / "manifest.json")
    for split in ("train", "eval"):
        entry = created["outputs"]["seq128"][split]
        unsampled = sum(e["unsampled_instances"] for e in entry["languages"].values())
        assert abs(entry["instances"] - unsampled) <= 0.05 * unsampled
        for lang, e in entry["languages"].items():
            assert abs(e["achieved_share"] - e["target_share"]) <= 0.01, (split, lang, e)
        found = Counter(
            language
            for path in sorted((recipe / "out" / "seq128").glob(f"{split}-*.parquet"))
            for language in pq.read_table(path, columns=["language"]).column("language").to_pylist()
        )
        assert dict(found) == {lang: e["instances"] for lang, e in entry["languages"].items() if e["instances"]}
    train = created["outputs"]["seq128"]["train"]["languages"]
    assert len(train) == 5
    # Smoothing at 0.7 lifts the smallest language's share and lowers the largest's.
    smallest = min(train, key=lambda lang: train[lang]["unsampled_share"])
    largest = max(train, key=lambda lang: train[lang]["unsampled_share"])
    assert train[smallest]["achieved_share"] > train[smallest]["unsampled_share"]
    assert train[largest]["achieved_share"] < train[largest]["unsampled_share"]


def test_the_loader_gives_masked_batches_of_every_language(recipe):
    loader = PretrainingLoader(recipe / "out", seq_length=128, batch_size=64, seed=0, epoch=0)
    batch = next(iter(loader))
    assert batch["input_ids"].shape == (64, 128)
    assert np.all(batch["input_ids"][:, 0] == batch["input_ids"][0, 0])  # [CLS]
    assert (batch["masked_lm_weights"].sum(axis=1) > 0).all()


# The dominant script of a segment tells these five languages apart: Latin only where no other script is a
# third of its letters (Vietnamese), since the others quote Latin names and words.
SCRIPT_LANGUAGES = {"CJK": "ja", "HIRAGANA": "ja", "KATAKANA": "ja", "GREEK": "el", "BENGALI": "bn", "CYRILLIC": "uk"}


def segment_language(pieces: list[str]) -> str | None:
    letters = [ch for piece in pieces for ch in piece.removeprefix("##") if ch.isalpha()]
    scripts = Counter(SCRIPT_LANGUAGES.get(unicodedata.name(ch, "").split(" ")[0]) for ch in letters)
    latin = scripts.pop(None, 0)
    if scripts and sum(scripts.values()) >= 0.3 * (sum(scripts.values()) + latin):
        return scripts.most_common(1)[0][0]
    return "vi" if latin else None


def test_a_random_next_segment_is_in_the_language_of_its_first_segment(recipe):
    # Drawn from any document, four in five would be in another script: told apart by that alone, they would
    # teach next-sentence prediction nothing.
    vocab = (recipe / "vocab" / "vocab.txt").read_text(encoding="utf-8").splitlines()
    same = Counter()
    for path in sorted((recipe / "out" / "seq128").glob("*.parquet")):
        for row in pq.read_table(path).to_pylist():
            if row["next_sentence_label"] == 1:
                ids, b = row["input_ids"], row["segment_b_start"]
                a = segment_language([vocab[i] for i in ids[1 : b - 1]])
                b = segment_language([vocab[i] for i in ids[b : row["length"] - 1]])
                same[a == b] += bool(a and b)
    assert same[True] + same[False] > 4000
    assert same[True] >= 0.98 * (same[True] + same[False]), same
    created = manifest(recipe / "out" / "manifest.json")
    for split in ("train", "eval"):
        assert "random_next_of_another_language" not in created["outputs"]["seq128"][split]["nsp_draws_skipped"]


def test_mds_samples_carry_the_languages_of_the_parquet_rows(recipe, tmp_path):
    from test_mds_output import mds_languages

    documents = [recipe / "dedup" / lang / "documents-*.parquet" for lang in MULTILINGUAL]
    flags = ["--masking", "dynamic", "--language-sampling-alpha", "0.7", "--record-format", "mds", *LOCAL]
    argv = ["create", "--input", *documents, "--vocab", recipe / "vocab" / "vocab.txt", "--output", tmp_path / "mds"]
    assert run_cli(*argv, *flags) == 0
    for split in ("train", "eval"):
        found = mds_languages(tmp_path / "mds", split)
        expected = [
            language
            for path in sorted((recipe / "out" / "seq128").glob(f"{split}-*.parquet"))
            for language in pq.read_table(path, columns=["language"]).column("language").to_pylist()
        ]
        assert found == expected and len(set(found)) > 1
