"""`bertcorpus demo`: the whole chain on the bundled samples, with a short training run."""

from __future__ import annotations

import json

from conftest import run_cli


def test_demo_runs_the_whole_chain(tmp_path, capsys):
    out = tmp_path / "demo"
    assert run_cli("demo", "--output", out, "--train-steps", "3") == 0
    printed = capsys.readouterr().out
    table = printed[printed.index("bertcorpus demo summary") :]
    for stage in ("extract-wiki", "extract-books", "vocab", "create", "stats", "train"):
        assert f"\n  {stage} " in table
    assert (out / "report.html").exists() and json.loads((out / "stats.json").read_text())
    records = json.loads((out / "records" / "manifest.json").read_text())
    assert set(records["outputs"]) == {"seq128", "seq512"}
    assert sum(1 for _ in open(out / "vocab.txt", encoding="utf-8")) == 8000
    results = json.loads((out / "train" / "eval_results.json").read_text())
    assert {"masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy", "next_sentence_loss"} <= set(results)
    train_row = next(line for line in table.splitlines() if line.startswith("  train "))
    assert (
        f"masked_lm_accuracy {results['masked_lm_accuracy']:.3f} "
        f"(most frequent token {results['masked_lm_baseline_accuracy']:.3f}), "
        f"next_sentence_accuracy {results['next_sentence_accuracy']:.3f} "
        f"(chance {results['next_sentence_baseline_accuracy']:.3f})"
    ) in train_row
