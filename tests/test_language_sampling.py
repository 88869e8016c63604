"""`create --language-sampling-alpha A`: languages mixed by smoothed shares, on real Wikipedia articles of five
languages in very different amounts (tests/data/wiki/multilingual)."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bertcorpus.transforms.language_sampling import rates_by_output, sampling_rates, smoothed_shares

from conftest import VOCAB, run_cli
from wiki_fixtures import write_language_articles

LOCAL = ["--runner", "DirectRunner"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_language_articles(tmp_path_factory.mktemp("languages") / "articles.jsonl")


def create(corpus: Path, out: Path, *flags) -> dict:
    assert run_cli("create", "--input", corpus, "--vocab", VOCAB, "--output", out, *LOCAL, *flags) == 0
    return json.loads((out / "manifest.json").read_text())


def shares(manifest: dict, split: str) -> tuple[dict[str, int], int]:
    entry = manifest["outputs"]["seq128"][split]
    return {lang: e["instances"] for lang, e in entry["languages"].items() if e["instances"]}, entry["instances"]


@pytest.fixture(scope="module")
def runs(corpus, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    made = {}
    for name, flags in {
        "plain": ["--masking", "dynamic"],
        "0.3": ["--masking", "dynamic", "--language-sampling-alpha", "0.3"],
        "0.7": ["--masking", "dynamic", "--language-sampling-alpha", "0.7"],
        "static 0.7": ["--dupe-factor", "2", "--language-sampling-alpha", "0.7"],
        "none": ["--masking", "dynamic", "--pair-objective", "none"],
        "none 0.3": ["--masking", "dynamic", "--pair-objective", "none", "--language-sampling-alpha", "0.3"],
    }.items():
        create(corpus, root / name, *flags)
        made[name] = root / name
    return made


def manifest_of(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


@pytest.mark.parametrize("alpha", ["0.3", "0.7"])
@pytest.mark.parametrize("split", ["train", "eval"])
def test_each_language_gets_its_smoothed_share_of_an_unsampled_run_in_every_split(runs, alpha, split):
    plain, plain_total = shares(manifest_of(runs["plain"]), split)
    sampled, total = shares(manifest_of(runs[alpha]), split)
    assert len(plain) >= 2 and sum(plain.values()) == plain_total
    targets = smoothed_shares(plain, float(alpha))
    assert set(sampled) == set(targets)
    for lang, target in targets.items():
        assert abs(sampled[lang] / total - target) <= 0.01, (lang, sampled[lang] / total, target)
    # About the same total: the frequent language under-sampled, the rare ones repeated.
    assert abs(total - plain_total) <= 0.05 * plain_total
    largest = max(plain, key=plain.get)
    assert sampled[largest] < plain[largest]
    assert all(sampled[lang] > plain[lang] for lang in plain if plain[lang] < plain_total / 10)


@pytest.mark.parametrize("split", ["train", "eval"])
def test_without_a_pair_objective_the_languages_are_mixed_as_xlmr_mixed_them(runs, split):
    # Packed segments all have the label 0: a draw that balanced labels kept one instance per bucket and language.
    plain, plain_total = shares(manifest_of(runs["none"]), split)
    sampled, total = shares(manifest_of(runs["none 0.3"]), split)
    assert len(plain) >= 2 and plain_total >= 600
    assert abs(total - plain_total) <= 0.05 * plain_total
    for lang, target in smoothed_shares(plain, 0.3).items():
        assert abs(sampled[lang] / total - target) <= 0.01, (lang, sampled[lang] / total, target)


def test_the_manifest_records_each_languages_instances_target_and_achieved_share(runs):
    manifest = manifest_of(runs["0.3"])
    assert manifest["form"]["language_sampling_alpha"] == 0.3
    for split in ("train", "eval"):
        report = manifest["outputs"]["seq128"][split]["languages"]
        unsampled = {lang: e["unsampled_instances"] for lang, e in report.items() if e["unsampled_instances"]}
        targets = smoothed_shares(unsampled, 0.3)
        total = manifest["outputs"]["seq128"][split]["instances"]
        for lang, entry in report.items():
            assert entry["target_share"] == pytest.approx(targets.get(lang, 0.0), abs=1e-6)
            assert entry["achieved_share"] == pytest.approx(entry["instances"] / total, abs=1e-6)
            assert abs(entry["achieved_share"] - entry["target_share"]) <= 0.01


def test_dynamic_instances_carry_their_language(runs):
    for name in ("plain", "0.3"):
        manifest = manifest_of(runs[name])
        for split in ("train", "eval"):
            found = Counter(
                language
                for path in sorted((runs[name] / "seq128").glob(f"{split}-*.parquet"))
                for language in pq.read_table(path, columns=["language"]).column("language").to_pylist()
            )
            assert dict(found) == shares(manifest, split)[0]


def test_static_records_are_sampled_alike(runs):
    manifest = manifest_of(runs["static 0.7"])
    plain = shares(manifest_of(runs["plain"]), "train")[0]
    sampled, total = shares(manifest, "train")
    targets = smoothed_shares(plain, 0.7)
    assert all(abs(sampled[lang] / total - targets[lang]) <= 0.01 for lang in targets)
    records = sum(s["records"] for s in manifest["outputs"]["seq128"]["train"]["shards"])
    assert records == total


def test_a_language_too_small_for_any_instance_is_named_not_fatal(capsys, corpus, tmp_path):
    # A Russian document of one sentence: sentence-order prediction can make no pair of it.
    with_ru = tmp_path / "with_ru.jsonl"
    line = json.dumps({"id": "ru:0", "text": "Один.", "language": "ru"}, ensure_ascii=False)
    with_ru.write_text(corpus.read_text(encoding="utf-8") + line + "\n", encoding="utf-8")
    flags = ["--masking", "dynamic", "--pair-objective", "sop", "--language-sampling-alpha", "0.5"]
    manifest = create(with_ru, tmp_path / "o", *flags)
    assert manifest["languages"]["ru"]["documents"] == 1
    assert all("ru" not in shares(manifest, split)[0] for split in ("train", "eval"))
    out = capsys.readouterr()
    assert re.search(r"\n  languages without instances +ru \(1 document\)\n", out.out)
    assert "no instance was made of the documents of ru (1 document)" in out.err


def digests(out: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((out / "seq128").glob("*"))}


def test_sampled_runs_are_the_same_bytes_on_every_runner_mode_and_rerun(runs, corpus, tmp_path):
    flags = ["--masking", "dynamic", "--language-sampling-alpha", "0.3"]
    create(corpus, tmp_path / "again", *flags)
    create(
        corpus,
        tmp_path / "processes",
        *flags,
        "--direct_running_mode",
        "multi_processing",
        "--direct_num_workers",
        "2",
    )
    expected = digests(runs["0.3"])
    assert len(expected) >= 5
    assert digests(tmp_path / "again") == expected == digests(tmp_path / "processes")


@pytest.mark.parametrize("alpha", ["0", "1.5", "-0.3", "nan"])
def test_an_alpha_outside_0_1_gets_one_line(corpus, tmp_path, capsys, alpha):
    code = run_cli(
        "create", "--input", corpus, "--vocab", VOCAB, "--output", tmp_path / "o", "--language-sampling-alpha", alpha
    )
    err = capsys.readouterr().err
    assert code == 2 and "--language-sampling-alpha must be in (0, 1]" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_rates_keep_the_total_and_give_the_smoothed_shares():
    instances = {"en": 9000, "sw": 900, "yo": 100}
    for alpha in (0.3, 0.7, 1.0):
        rates = sampling_rates(instances, alpha)
        made = {lang: n * rates[lang] for lang, n in instances.items()}
        assert sum(made.values()) == pytest.approx(10_000)
        expected = {lang: (n / 10_000) ** alpha for lang, n in instances.items()}
        norm = sum(expected.values())
        assert {lang: m / 10_000 for lang, m in made.items()} == pytest.approx(
            {lang: e / norm for lang, e in expected.items()}
        )
    assert sampling_rates(instances, 1.0) == pytest.approx({"en": 1, "sw": 1, "yo": 1})
    by_output = rates_by_output({"seq128:train:en": 90, "seq128:train:yo": 10, "seq128:eval:en": 5}, 0.5)
    assert by_output == pytest.approx({"seq128:train:en": 5 / 6, "seq128:train:yo": 2.5, "seq128:eval:en": 1.0})
