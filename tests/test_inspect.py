"""`bertcorpus inspect` on the shards of real create runs: Parquet instances unmasked, read against pyarrow; with
--epoch, the masks trainer.loader draws for them (other each epoch, the same again for the same epoch and seed); the
label named by the run's pair objective; and one line for each mistake."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bertcorpus.trainer.loader import PretrainingLoader

from conftest import BOOKS, SAMPLE_TEXT, VOCAB, run_cli

TOKENS = VOCAB.read_text(encoding="utf-8").splitlines()


def create_dynamic(out: Path, *flags: str) -> Path:
    """Instances (masks drawn at load time) in length bins, with an eval split: Parquet, or MDS with its flag."""
    recipe = ["--masking", "dynamic", "--bin-size", "32", "--seq-configs", "128:20", "--dupe-factor", "1"]
    argv = ["create", "--input", SAMPLE_TEXT, *BOOKS, "--vocab", VOCAB, "--output", out, *recipe]
    assert run_cli(*argv, "--eval-fraction", "0.1", "--runner", "DirectRunner", *flags) == 0
    return out


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory) -> Path:
    return create_dynamic(tmp_path_factory.mktemp("dynamic") / "out")


def shards(out: Path, split: str) -> list[dict]:
    return json.loads((out / "manifest.json").read_text())["outputs"]["seq128"][split]["shards"]


def inspect(capsys, *argv) -> list[str]:
    capsys.readouterr()
    assert run_cli("inspect", *argv) == 0
    return capsys.readouterr().out.splitlines()


def records(lines: list[str]) -> dict[str, list[str]]:
    """{the record's heading: its lines}."""
    found: dict[str, list[str]] = {}
    for line in lines:
        if line.startswith("record "):
            found[line] = []
        else:
            found[list(found)[-1]].append(line)
    return found


@pytest.mark.parametrize("split, shard", [("train", 1), ("eval", 0)])
def test_a_parquet_instance_is_shown_unmasked_with_its_segments_and_label(dynamic, split, shard, capsys):
    entries = shards(dynamic, split)
    before = sum(s["records"] for s in entries[:shard])
    rows = pq.read_table(dynamic / entries[shard]["path"]).to_pylist()[1:3]
    shown = records(inspect(capsys, dynamic / entries[shard]["path"], "-n", "2", "--skip", "1"))  # vocab: the copy
    assert list(shown) == [f"record {n} ({split} instance {before + n} of seq128):" for n in (1, 2)]
    for row, lines in zip(rows, shown.values()):
        b = row["segment_b_start"]
        a_tokens = " ".join(TOKENS[i] for i in row["input_ids"][:b])
        b_tokens = " ".join(TOKENS[i] for i in row["input_ids"][b:])
        assert lines == [
            f"  tokens ({row['length']}): {a_tokens} || {b_tokens}",
            f"  segment A {b} tokens, segment B {row['length'] - b} tokens",
            f"  next_sentence_label: {row['next_sentence_label']} "
            f"({'random next' if row['next_sentence_label'] else 'actual next'})",
        ]
        assert "[MASK]" not in lines[0]


def loader_row(out: Path, instance: int, epoch: int, seed: int, cache: Path) -> dict[str, list]:
    """The instance as the loader gives it in that epoch: batches of one, searched for it."""
    loader = PretrainingLoader(out, seq_length=128, batch_size=1, epoch=epoch, seed=seed, cache_dir=cache)
    for i in range(len(loader)):
        if loader.batch_instances(i)[0] == instance:
            return {name: values[0].tolist() for name, values in loader[i].items()}
    raise AssertionError(f"instance {instance} is in no batch")


def test_with_an_epoch_the_masks_are_the_loaders_other_each_epoch_and_reproducible(dynamic, capsys, tmp_path):
    entries = shards(dynamic, "train")
    shard = dynamic / entries[2]["path"]
    before = entries[0]["records"] + entries[1]["records"]

    def masks(*flags) -> dict[str, list[str]]:
        return {heading: lines[3:] for heading, lines in records(inspect(capsys, shard, "-n", "3", *flags)).items()}

    first, second, again = masks("--epoch", "0"), masks("--epoch", "1"), masks("--epoch", "1")
    other_seed = masks("--epoch", "1", "--seed", "7")
    assert second == again and first != second and other_seed != second
    unmasked, whole = (
        records(inspect(capsys, shard, "-n", "3")),
        records(inspect(capsys, shard, "-n", "3", "--epoch", "1")),
    )
    for n, (heading, lines) in enumerate(second.items()):
        assert whole[heading][:3] == unmasked[heading]  # the instance as stored, then its masks
        assert lines[0].startswith("  epoch 1, seed 0: ") and lines[1].startswith("  masked (")
        # The loader's own batch for that instance: the tokens as the model sees them and the masked positions.
        row = loader_row(dynamic, before + n, 1, 0, tmp_path)
        length = sum(row["input_mask"])
        b = row["segment_ids"].index(1)
        seen = [TOKENS[i] for i in row["input_ids"][:length]]
        assert lines[0] == f"  epoch 1, seed 0: {' '.join(seen[:b])} || {' '.join(seen[b:])}"
        count = int(sum(row["masked_lm_weights"]))
        predictions = [
            f"{p}:{json.dumps(seen[p])}→{json.dumps(TOKENS[i])}"
            for p, i in zip(row["masked_lm_positions"][:count], row["masked_lm_ids"][:count])
        ]
        assert lines[1] == f"  masked ({count}): {', '.join(predictions)}"
        assert count == min(20, max(1, round(length * 0.15)))


@pytest.mark.parametrize("objective, labels", [("sop", ("in order", "swapped")), ("none", None)])
def test_the_label_is_named_by_the_pair_objective(objective, labels, tmp_path, capsys):
    out = tmp_path / "out"
    assert (
        run_cli(
            "create",
            "--input",
            SAMPLE_TEXT,
            BOOKS[0],
            "--vocab",
            VOCAB,
            "--output",
            out,
            "--pair-objective",
            objective,
            "--dupe-factor",
            "1",
            "--runner",
            "DirectRunner",
            "--masking",
            "static" if objective == "sop" else "dynamic",
        )
        == 0
    )
    shard = sorted((out / "seq128").glob("train-*"))[0]
    lines = inspect(capsys, shard, "-n", "20", *(["--vocab", VOCAB] if objective == "sop" else []))
    label_lines = [line for line in lines if "next_sentence_label" in line]
    assert len(label_lines) == 20
    if labels:  # static TFRecords: the manifest beside them says what label 1 means
        assert {re.sub(r".*\((.*)\)", r"\1", line) for line in label_lines} == set(labels)
    else:  # one segment, [SEP]s between its documents
        assert set(label_lines) == {"  next_sentence_label: 0 (unused: no pair objective)"}
        assert all(line.startswith("  one segment of ") for line in lines if "segment" in line)
        assert not any(" || " in line for line in lines)


def test_mistakes_are_one_line(dynamic, tmp_path, capsys):
    shard = dynamic / shards(dynamic, "train")[0]["path"]

    def error(*argv) -> str:
        capsys.readouterr()
        assert run_cli("inspect", *argv) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1, err
        return err.strip()

    alone = tmp_path / "copied" / "seq128" / shard.name
    alone.parent.mkdir(parents=True)
    shutil.copy(shard, alone)
    assert error(alone, "--epoch", "0") == (
        f"bertcorpus inspect: error: {alone}: no manifest.json in {tmp_path / 'copied'}; a shard of instances is "
        "read inside the create output it belongs to (OUT/seq{L}/FILE, with OUT/manifest.json)"
    )
    run = tmp_path / "run"
    shutil.copytree(dynamic, run)
    stray = run / "seq128" / "stray.parquet"
    shutil.copy(shard, stray)
    assert error(stray) == f"bertcorpus inspect: error: {stray} is not a shard that {run / 'manifest.json'} lists"
    records_file = tmp_path / "x.tfrecord"
    records_file.write_bytes(b"")
    assert "--epoch shows the masks drawn at load time for Parquet or MDS instances" in error(
        records_file, "--vocab", VOCAB, "--epoch", "1"
    )
    assert error(records_file) == "bertcorpus inspect: error: give --vocab: the vocab.txt the records were made with"
    assert (
        error(shard, "--seed", "3")
        == "bertcorpus inspect: error: --seed chooses the loader's masks; give --epoch with it"
    )
    for epoch in ("-1", str(2**64)):
        assert error(shard, "--epoch", epoch) == "bertcorpus inspect: error: --epoch must be >= 0 and below 2**63"


def test_a_tfrecord_in_its_create_output_is_read_with_the_vocab_its_manifest_names(capsys, tmp_path, records_dir):
    shard = sorted((records_dir / "seq128").glob("train-*.tfrecord"))[0]
    named = inspect(capsys, shard, "-n", "2")
    assert named == inspect(capsys, shard, "-n", "2", "--vocab", VOCAB)
    assert named[0] == "record 0:" and "[CLS]" in named[1]
    # A vocab that changed since create would decode the records into other words: refused, naming it.
    run = tmp_path / "run"
    shutil.copytree(records_dir, run)
    manifest = json.loads((run / "manifest.json").read_text())
    changed = tmp_path / "vocab.txt"
    changed.write_text(VOCAB.read_text(encoding="utf-8").replace("the\n", "teh\n", 1), encoding="utf-8")
    manifest["vocab"]["path"] = str(changed)
    (run / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert run_cli("inspect", run / "seq128" / shard.name) == 2
    assert capsys.readouterr().err == (
        f"bertcorpus inspect: error: the vocab {changed} has changed since {run / 'manifest.json'} was written (its "
        "sha256 differs); give --vocab: the vocab.txt the records were made with\n"
    )


def test_an_mds_shard_shows_the_instances_of_the_parquet_shard(dynamic, tmp_path, capsys):
    """An MDS shard (OUT/seq{L}/{split}/FILE) is read as the instances it holds, with the output's vocab copy: the
    same lines as the Parquet shard of the same instances, masks of an epoch included, in both ids encodings."""
    for ids in ("int64", "compact"):
        mds = create_dynamic(tmp_path / ids, "--record-format", "mds", "--mds-ids", ids)
        for split in ("train", "eval"):
            shard = mds / shards(mds, split)[0]["path"]
            assert shard.parent.name == split
            flags = ["-n", "2", "--skip", "1", "--epoch", "1"]
            shown = inspect(capsys, shard, *flags)
            assert shown == inspect(capsys, dynamic / shards(dynamic, split)[0]["path"], *flags)
            assert shown[0] == f"record 1 ({split} instance 1 of seq128):"
    stray = tmp_path / "stray.mds"
    stray.write_bytes(b"not an MDS shard at all")
    capsys.readouterr()
    assert run_cli("inspect", stray) == 2
    assert "a shard of instances is read inside the create output it belongs to (OUT/seq{L}/{split}/FILE" in (
        capsys.readouterr().err
    )


def test_masked_tokens_are_quoted_so_punctuation_reads_as_itself():
    from bertcorpus.pipeline.stats.example_format import format_example

    tokens = ("[PAD]", "[CLS]", "[SEP]", "[MASK]", "history", ",", "of")
    features = {
        "input_ids": [1, 4, 3, 5, 2, 0, 0],
        "input_mask": [1, 1, 1, 1, 1, 0, 0],
        "segment_ids": [0, 0, 0, 0, 0, 0, 0],
        "masked_lm_positions": [1, 2, 0],
        "masked_lm_ids": [5, 6, 0],
        "masked_lm_weights": [1.0, 1.0, 0.0],
        "next_sentence_labels": [0],
    }
    lines = format_example(features, tokens).splitlines()
    # "history" kept in place of a comma (the 10% shown as a random token): once 1:history→,, now unambiguous.
    assert lines[-1] == '  masked (2): 1:"history"→",", 2:"[MASK]"→"of"'
