"""`bertcorpus demo`: the whole chain on the bundled samples, with a short training run; run again, it keeps every
stage whose output is up to date."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent


def table_of(printed: str) -> list[str]:
    return printed[printed.index("bertcorpus demo summary") :].splitlines()[1:]


def test_demo_runs_the_whole_chain_and_run_again_keeps_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "demo"
    assert run_cli("demo", "--output", "demo", "--train-steps", "3") == 0
    printed = capsys.readouterr().out
    table = table_of(printed)
    # Within 100 columns, the outputs named relative to the demo's folder, which is named relative to the working one.
    assert "\nbertcorpus demo summary (outputs in demo/)\n" in printed
    assert max(len(line) for line in table) <= 100, table
    rows = {line.split()[0]: line for line in table if line.startswith("  ") and line[2] != " "}
    assert list(rows) == ["stage", "extract-wiki", "extract-books", "vocab", "create", "stats", "train"]
    assert " vocab/ " in rows["vocab"] and " records/ " in rows["create"] and " report.html " in rows["stats"]
    assert printed.rstrip().endswith("data card: demo/report.html")
    assert (out / "report.html").exists() and json.loads((out / "stats.json").read_text())
    records = json.loads((out / "records" / "manifest.json").read_text())
    assert set(records["outputs"]) == {"seq128", "seq512"}
    # The vocab in a folder of its own, so that the card's lineage goes from the documents through it to the records.
    lines = sum(1 for _ in open(out / "vocab" / "vocab.txt", encoding="utf-8"))
    assert 7900 < lines <= 8000 and f" {lines:,} tokens" in rows["vocab"]  # what was learned, no filler
    assert not (out / "manifest.json").exists()
    assert records["vocab"]["path"] == str(out / "vocab" / "vocab.txt")
    results = json.loads((out / "train" / "eval_results.json").read_text())
    at_chance = abs(results["next_sentence_accuracy"] - results["next_sentence_baseline_accuracy"]) < 0.05
    assert ("note: train: next-sentence accuracy at chance is expected" in " ".join(printed.split())) == at_chance
    assert {"masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy", "next_sentence_loss"} <= set(results)
    train = " ".join(" ".join(table[table.index(rows["train"]) :]).split())
    assert (
        f"masked_lm_accuracy {results['masked_lm_accuracy']:.3f} "
        f"(most frequent token {results['masked_lm_baseline_accuracy']:.3f}), "
        f"next_sentence_accuracy {results['next_sentence_accuracy']:.3f} "
        f"(chance {results['next_sentence_baseline_accuracy']:.3f})"
    ) in train

    # A stage's line is its command, without the flags that only say how the demo reruns.
    stage_lines = [line for line in printed.splitlines() if line.startswith("=== ")]
    assert len(stage_lines) == 6 and not any("--reuse" in line or "--overwrite" in line for line in stage_lines)
    # README.md quotes the table of a run: its stages, outputs and counts are this run's.
    (tmp_path / "printed.txt").write_text(printed)
    drift = subprocess.run(
        [sys.executable, ROOT / ".ci" / "docs_figures.py", "--check", "demo", "--printed", tmp_path / "printed.txt"],
        capture_output=True,
        text=True,
    )
    assert drift.returncode == 0, drift.stderr
    # The notes under the table say why the truncated sample's error and the chance-level NSP accuracy are expected.
    notes = " ".join(" ".join(table[table.index(rows["train"]) :]).split())
    assert "note: extract-wiki: the one error is expected" in notes
    # The data card names no path of this machine, and each source's licence.
    card_text = (out / "report.html").read_text() + (out / "stats.json").read_text() + (out / "README.md").read_text()
    assert str(tmp_path) not in card_text and str(ROOT) not in card_text
    assert "CC BY-SA 3.0 and GFDL" in card_text and "Public domain in the USA" in card_text

    card = (out / "report.html").stat().st_mtime_ns
    assert run_cli("demo", "--output", "demo", "--train-steps", "3") == 0
    again = capsys.readouterr().out
    for stage, folder in (("extract-wiki", "wiki"), ("extract-books", "books"), ("create", "records")):
        assert f"{stage}: {out / folder} is up to date (same inputs, config and bertcorpus version); kept" in again
    assert f"vocab: {out / 'vocab' / 'vocab.txt'} is up to date" in again
    assert "finished in" not in again and (out / "report.html").stat().st_mtime_ns == card
    kept = {line.split()[0]: line.split()[1] for line in table_of(again) if line.startswith("  ") and line[2] != " "}
    assert kept == dict.fromkeys(["extract-wiki", "extract-books", "vocab", "create", "stats", "train"], "kept") | {
        "stage": "time"
    }


def test_the_english_demos_card_names_only_its_own_sources_and_no_none(tmp_path, capsys, monkeypatch):
    """The demo's --source-info file describes the Chinese demo's sources too: the English card leaves them out."""
    monkeypatch.chdir(tmp_path)
    assert run_cli("demo", "--skip-train", "--output", "demo") == 0
    capsys.readouterr()
    page = (tmp_path / "demo" / "report.html").read_text(encoding="utf-8")
    readme = (tmp_path / "demo" / "README.md").read_text(encoding="utf-8")
    header = yaml.safe_load(readme.split("---\n")[1])
    assert header["license"] == ["cc-by-sa-3.0", "gfdl", "other"]  # the English Wikipedia's and the books'
    assert header["license_name"] == "Public domain in the USA (Project Gutenberg texts)"
    assert header["language"][0] == "en" and "zh" not in header["language"]  # the books may be undetermined
    card = json.loads((tmp_path / "demo" / "stats.json").read_text())
    assert [s["source"] for s in card["datasheet"]["sources"]] == ["books", "wikipedia"]
    for text in (page, readme):
        assert not re.search("zhwiki|zhbooks|cc-by-sa-4.0|豆棚", text)
    assert re.findall(r"^### (.+)$", readme, re.M) == ["books", "wikipedia"]
    assert not re.search(r"\bNone\b", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def test_the_chinese_demo(tmp_path, capsys, monkeypatch):
    """demo --zh: the zhwiki sample and the Chinese book, each in both scripts, bert-base-chinese's layout, whole-word
    masks over jieba's words, and a data card that counts characters and names the characters behind [UNK]."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "demo-zh-out"
    assert run_cli("demo", "--zh", "--skip-train") == 0
    table = table_of(capsys.readouterr().out)
    rows = {line.split()[0]: line for line in table if line.startswith("  ") and line[2] != " "}
    assert list(rows) == ["stage", "extract-wiki", "extract-books", "vocab", "create", "stats"]
    assert "read 2, kept 2, skipped 0, errors 0" in rows["extract-wiki"]  # one page, in both scripts
    assert any("converter blocks" in line for line in table)
    wiki = json.loads((out / "wiki" / "manifest.json").read_text())
    assert sorted(wiki["documents"]["languages"]) == ["zh-Hans", "zh-Hant"]
    vocab = json.loads((out / "vocab" / "manifest.json").read_text())
    assert vocab["tokens"]["layout"] == "bert-chinese" and vocab["tokens"]["filler_share"] < 0.05
    records = json.loads((out / "records" / "manifest.json").read_text())
    assert records["form"]["whole_word_mask"] and records["form"]["word_segmenter"]["name"] == "jieba"
    card = json.loads((out / "stats.json").read_text())
    assert set(card["languages"]) == {"zh-Hans", "zh-Hant"}
    for row in card["languages"].values():
        assert row["documents"] == 2 and row["unk_word_rate"] < 0.002 and row["tokens"] > 90_000
    top = card["unknown_words"]["top"]
    assert top and all(len(w["word"]) == 1 for w in top)  # characters, not clauses
    words, chars = card["documents"]["words"]["total"], card["documents"]["chars"]["total"]
    assert 0.9 * chars < words <= chars  # a character is a word
    assert "Languages" in (out / "report.html").read_text(encoding="utf-8")
    # The Hub's header: the language code of both scripts, and only the Chinese sources' licences.
    readme = (out / "README.md").read_text(encoding="utf-8")
    header = yaml.safe_load(readme.split("---\n")[1])
    assert header["language"] == ["zh"] and header["license"] == ["cc-by-sa-4.0", "other"]
    assert re.findall(r"^### (.+)$", readme, re.M) == ["zhbooks", "zhwiki"]
