"""`bertcorpus stats` on real runs: every number against an independent count (records parsed by TensorFlow with
the reference spec, documents read back with pyarrow, words tokenised by the plain-Python reference tokenizer),
the lineage, sampling, warnings, and a report that references only its own plots (the page as rendered is checked
in test_data_card_page.py)."""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf  # the test extra installs it: the record checks must run, never skip

from bertcorpus.trainer.data import feature_spec as spec

from conftest import BOOKS, SAMPLE_TEXT, VOCAB, run_cli
from full_tokenizer import FullTokenizerEquivalent, _is_control
from wiki_fixtures import ENWIKI_2014, ENWIKI_SMALL

TOKENS = VOCAB.read_text(encoding="utf-8").splitlines()
UNK, SEP, MASK = (TOKENS.index(t) for t in ("[UNK]", "[SEP]", "[MASK]"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def stats(directory: Path, *extra) -> dict:
    assert run_cli("stats", directory, *extra) == 0
    out = Path(extra[extra.index("--output") + 1]) if "--output" in extra else directory
    return json.loads((out / "stats.json").read_text())


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A whole run: two documents stages (two source labels) and records with two seq configs made from them."""
    run = tmp_path_factory.mktemp("run")
    assert run_cli("extract-wiki", "--input", ENWIKI_2014, "--output", run / "wiki") == 0
    assert run_cli("extract-wiki", "--input", ENWIKI_SMALL, "--output", run / "small", "--source", "sample") == 0
    assert (
        run_cli(
            "create",
            "--input",
            run / "wiki" / "documents-*.parquet",
            run / "small" / "documents-*.parquet",
            "--vocab",
            VOCAB,
            "--output",
            run / "records",
            "--seq-configs",
            "128:20,512:80",
            "--dupe-factor",
            "1",
            "--eval-fraction",
            "0.1",
            "--num-buckets",
            "2",
        )
        == 0
    )
    return run


@pytest.fixture(scope="module")
def run_stats(run_dir) -> dict:
    return stats(run_dir)


def parse(files: list[Path], length: int, predictions: int, limit: int | None = None) -> dict[str, np.ndarray]:
    data = tf.data.TFRecordDataset([str(f) for f in files])
    batches = [tf.io.parse_example(b, spec(length, predictions)) for b in data.take(limit or -1).batch(4096)]
    return {k: np.concatenate([b[k].numpy() for b in batches]) for k in spec(length, predictions)}


def independent_summary(rec: dict[str, np.ndarray], length: int, predictions: int) -> dict:
    """The statistics computed record by record, the plain way."""
    n = len(rec["input_ids"])
    real, seg_a, seg_b, masked = Counter(), Counter(), Counter(), Counter()
    shown = Counter()
    originals = Counter()
    for i in range(n):
        ids, m, seg = rec["input_ids"][i], rec["input_mask"][i], rec["segment_ids"][i]
        k = int((rec["masked_lm_weights"][i] > 0).sum())
        pos, labels = rec["masked_lm_positions"][i][:k], rec["masked_lm_ids"][i][:k]
        count = int(m.sum())
        restored = ids.copy()
        restored[pos] = labels
        first_sep, last_sep = np.flatnonzero(restored[:count] == SEP)[[0, -1]]
        real[count] += 1
        seg_a[int(first_sep) - 1] += 1
        seg_b[int(last_sep - first_sep) - 1] += 1
        assert (seg[: first_sep + 1] == 0).all() and (seg[first_sep + 1 : count] == 1).all()
        masked[k] += 1
        for p, label in zip(pos, labels):
            shown["mask" if ids[p] == MASK else "original" if ids[p] == label else "random"] += 1
        text = [t for j, t in enumerate(restored[:count]) if j not in (0, first_sep, last_sep)]
        originals.update(text)

    def hist(counter: Counter, size: int) -> list[int]:
        return [counter[v] for v in range(size + 1)]

    labels = rec["next_sentence_labels"][:, 0]
    total_real = sum(v * c for v, c in real.items())
    total_masked = sum(v * c for v, c in masked.items())
    text_tokens = sum(originals.values())
    return {
        "instances": n,
        "random_next": int((labels == 1).sum()),
        "random_next_share": int((labels == 1).sum()) / n,
        "real_tokens": total_real,
        "mean_real_tokens": total_real / n,
        "real_tokens_hist": hist(real, length),
        "segment_a_tokens_hist": hist(seg_a, length),
        "segment_b_tokens_hist": hist(seg_b, length),
        "masked_positions": total_masked,
        "mean_masked_positions": total_masked / n,
        "masked_positions_hist": hist(masked, predictions),
        "masked_shown_as_mask": shown["mask"],
        "masked_shown_as_original": shown["original"],
        "masked_shown_as_random": shown["random"],
        "mask_share": shown["mask"] / total_masked,
        "text_tokens": text_tokens,
        "unk_tokens": originals[UNK],
        "unk_token_rate": originals[UNK] / text_tokens,
        "vocab_ids_seen": len(originals),  # the text's ids: not the random replacements masking put in
        "vocab_coverage": len(originals) / len(TOKENS),
        "full_length_share": real[length] / n,
        "real_tokens_percentiles": {
            f"p{q}": int(np.percentile(rec["input_mask"].sum(1), q, method="inverted_cdf")) for q in (1, 10, 50, 90, 99)
        },
    }


def check_records(card: dict, stage: str, records: Path) -> None:
    manifest = json.loads((records / "manifest.json").read_text())
    seq_configs = card["records"][stage]["seq_configs"]
    assert set(seq_configs) == set(manifest["outputs"])
    for seq, s in seq_configs.items():
        length, predictions = s["max_seq_length"], s["max_predictions_per_seq"]
        for split in ("train", "eval"):
            files = sorted((records / seq).glob(f"{split}-*.tfrecord"))
            expected = independent_summary(parse(files, length, predictions), length, predictions)
            got = {k: s[split][k] for k in expected}
            assert got == expected, (seq, split)
            assert s["instances"][split] == manifest["outputs"][seq][split]["instances"] == expected["instances"]
            assert round(s[split]["random_next_share"], 6) == manifest["outputs"][seq][split]["random_next_share"]
        assert s["all"]["instances"] == s["train"]["instances"] + s["eval"]["instances"]
        assert not s["sampled"]
        for row in s["shards"]:
            path = records / row["path"]
            assert row["file_bytes"] == path.stat().st_size == row["bytes"]
            assert row["records_read"] == row["records"] == sum(1 for _ in tf.data.TFRecordDataset(str(path)))


def test_record_statistics_equal_an_independent_count(run_dir, run_stats):
    check_records(run_stats, "records", run_dir / "records")
    assert run_stats["warnings"] == []


def test_a_records_directory_alone(records_dir, tmp_path):
    card = stats(records_dir, "--output", tmp_path)
    check_records(card, ".", records_dir)
    assert "absent" in card["documents"]
    assert "no documents" in card["unknown_words"]["absent"]
    assert card["records"]["."]["seq_configs"]["seq128"]["all"]["unk_token_rate"] is not None
    assert not (records_dir / "stats.json").exists()


# The scripts written without spaces, by their Unicode blocks: Thai, Lao, Myanmar, Khmer, kana, CJK ideographs.
UNSPACED_CHARACTER = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]"
)


def test_document_statistics_equal_an_independent_count(run_dir, run_stats):
    rows = [
        r
        for d in ("wiki", "small")
        for f in sorted((run_dir / d).glob("documents-*.parquet"))
        for r in pq.read_table(f).to_pylist()
    ]
    docs = run_stats["documents"]
    assert docs["documents"] == len(rows) == 200
    assert docs["by_source"] == dict(Counter(r["source"] for r in rows)) == {"wikipedia": 198, "sample": 2}
    chars = np.array([len(r["text"]) for r in rows])
    # A word is whitespace-separated, and each character of a script written without spaces (CJK, Thai) is one.
    words = np.array([len(UNSPACED_CHARACTER.sub(" x ", r["text"]).split()) for r in rows])
    for key, values in (("chars", chars), ("words", words)):
        assert (docs[key]["total"], docs[key]["min"], docs[key]["max"]) == (values.sum(), values.min(), values.max())
        assert docs[key]["counts"] == np.histogram(values, bins=docs["bin_edges"])[0].tolist()
    by_size = sorted(rows, key=lambda r: (-len(r["text"]), r["id"]))
    brief = [{"id": r["id"], "source": r["source"], "title": r["title"], "chars": len(r["text"])} for r in by_size]
    assert docs["largest"] == brief[:5]
    assert docs["smallest"] == sorted(brief, key=lambda r: (r["chars"], r["id"]))[:5]
    for name in ("wiki", "small"):
        manifest = json.loads((run_dir / name / "manifest.json").read_text())["documents"]
        counts = docs["stages"][name]
        assert (counts["read"], counts["kept"], counts["skipped"], counts["errors_by_reason"]) == (
            manifest["read"],
            manifest["kept"],
            manifest["skipped"],
            manifest["errors_by_reason"],
        )
    assert docs["stages"]["wiki"]["errors_by_reason"] == {"truncated": 1}
    assert docs["stages"]["small"]["skipped"]["redirect"] == 1


def test_words_that_become_unk_equal_the_reference_tokenizer(run_dir, run_stats):
    reference = FullTokenizerEquivalent(TOKENS)
    verdict: dict[str, bool] = {}
    counts, words = Counter(), 0
    for d in ("wiki", "small"):
        for f in sorted((run_dir / d).glob("documents-*.parquet")):
            for text in pq.read_table(f, columns=["text"]).column(0).to_pylist():
                cleaned = "".join(c for c in text if c not in "\x00\ufffd" and not _is_control(c))
                for chunk in UNSPACED_CHARACTER.sub(r" \g<0> ", cleaned).lower().split():
                    if chunk not in verdict:
                        verdict[chunk] = "[UNK]" in reference.tokenize(chunk)
                    words += 1
                    counts[chunk] += verdict[chunk]
    unknown = run_stats["unknown_words"]
    assert (unknown["documents"], unknown["words"], unknown["unk_words"]) == (200, words, sum(counts.values()))
    assert unknown["unk_words"] > 10
    top = sorted(((w, n) for w, n in counts.items() if n), key=lambda wn: (-wn[1], wn[0]))[:20]
    assert [(t["word"], t["count"]) for t in unknown["top"]] == top
    assert unknown["counts_exact"] and unknown["vocab"] == VOCAB.name


def test_lineage_links_dumps_documents_vocab_and_records(run_dir, run_stats):
    lineage = run_stats["lineage"]
    stages = {s["stage"]: s for s in lineage["stages"]}
    assert {s: stages[s]["kind"] for s in stages} == {"wiki": "documents", "small": "documents", "records": "records"}
    dump = stages["wiki"]["inputs"][0]
    # A file outside the run by its name: with its sha256 it is known wherever it lies.
    assert (dump["path"], dump["sha256"], dump["size"]) == (
        ENWIKI_2014.name,
        sha256(ENWIKI_2014),
        ENWIKI_2014.stat().st_size,
    )
    assert "from" not in dump
    assert lineage["links"] == [
        {"from": "small", "to": "records", "files": 1},
        {"from": "wiki", "to": "records", "files": 1},
    ]
    vocab = next(i for i in stages["records"]["inputs"] if i["role"] == "vocab")
    assert vocab["sha256"] == sha256(VOCAB) and "from" not in vocab
    assert vocab["checked"] == {"path": VOCAB.name, "sha256_matches": True}
    for name in ("wiki", "small", "records"):
        for output in stages[name]["outputs"]:
            assert output["sha256"] == sha256(run_dir / name / output["path"])


def test_max_records_reads_a_sample_from_every_shard(run_dir, tmp_path):
    card = stats(run_dir, "--output", tmp_path, "--max-records", "1000", "--max-documents", "10")
    s = card["records"]["records"]["seq_configs"]["seq128"]
    assert s["sampled"] and s["all"]["instances"] == 1000 == sum(r["records_read"] for r in s["shards"])
    assert all(0 < r["records_read"] < r["records"] for r in s["shards"])
    manifest = json.loads((run_dir / "records" / "manifest.json").read_text())["outputs"]["seq128"]
    assert s["instances"] == {split: manifest[split]["instances"] for split in ("train", "eval")}
    assert s["records_read"] == {split: s[split]["instances"] for split in ("train", "eval")}
    # A sample is the first records of each shard: the same numbers as an independent count of those.
    length, predictions = 128, 20
    parts = [parse([run_dir / "records" / r["path"]], length, predictions, r["records_read"]) for r in s["shards"]]
    joined = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    assert s["all"]["real_tokens"] == int(joined["input_mask"].sum())
    assert s["all"]["masked_positions"] == int((joined["masked_lm_weights"] > 0).sum())
    assert card["unknown_words"]["documents"] == 10
    assert card["documents"]["documents"] == 200  # sizes and sources always cover every document


def test_a_different_vocab_is_named_in_a_warning(records_dir, tmp_path, capsys):
    changed = tmp_path / "vocab.txt"
    changed.write_text(VOCAB.read_text(encoding="utf-8") + "extraword\n", encoding="utf-8")
    card = stats(records_dir, "--output", tmp_path / "out", "--vocab", changed, "--max-records", "200")
    assert len(card["warnings"]) == 1 and sha256(changed) in card["warnings"][0]
    assert "another vocab" in capsys.readouterr().err
    assert card["records"]["."]["vocab"]["manifest_sha256"] == sha256(VOCAB)


def test_shards_unlike_their_manifest(records_dir, tmp_path, capsys):
    copy = tmp_path / "records"
    shutil.copytree(records_dir, copy, ignore=shutil.ignore_patterns("stats.json", "report*"))
    first, second = sorted((copy / "seq128").glob("train-*.tfrecord"))[:2]
    extra = second.read_bytes()
    length = int.from_bytes(extra[:8], "little")
    with open(first, "ab") as f:  # one more whole record than the manifest says
        f.write(extra[: 12 + length + 4])
    card = stats(copy, "--output", tmp_path / "out")
    assert any(first.name in w and "bytes" in w for w in card["warnings"])
    assert any(first.name in w and "does not hold" in w for w in card["warnings"])
    with open(first, "r+b") as f:  # damage a byte inside the first record
        f.seek(40)
        byte = f.read(1)
        f.seek(40)
        f.write(bytes([byte[0] ^ 0xFF]))
    capsys.readouterr()
    assert run_cli("stats", copy, "--output", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert first.name in err and "CRC" in err


def test_clear_errors(tmp_path, records_dir, capsys):
    assert run_cli("stats", tmp_path) == 2
    assert "no manifest.json" in capsys.readouterr().err
    moved = tmp_path / "moved"
    moved.mkdir()
    manifest = json.loads((records_dir / "manifest.json").read_text())
    manifest["vocab"]["path"] = "gone/vocab.txt"
    (moved / "manifest.json").write_text(json.dumps(manifest))
    assert run_cli("stats", moved) == 2
    err = capsys.readouterr().err
    assert "gone/vocab.txt" in err and "pass --vocab" in err
    assert run_cli("stats", moved, "--vocab", VOCAB) == 2
    assert "missing" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- other forms

BIN = 32


def create(out: Path, *flags) -> Path:
    """A small real run of create: the sample text and the books, 128 tokens, one pass."""
    assert (
        run_cli(
            "create",
            "--input",
            SAMPLE_TEXT,
            *BOOKS,
            "--vocab",
            VOCAB,
            "--output",
            out,
            "--seq-configs",
            "128:20",
            "--dupe-factor",
            "1",
            "--eval-fraction",
            "0.1",
            "--runner",
            "DirectRunner",
            *flags,
        )
        == 0
    )
    return out


@pytest.fixture(scope="module")
def dynamic_run(tmp_path_factory) -> Path:
    """Masks at load time and length bins: Parquet instances, with the vocab's copy beside them."""
    return create(tmp_path_factory.mktemp("dynamic") / "out", "--masking", "dynamic", "--bin-size", BIN)


@pytest.fixture(scope="module")
def dynamic_card_dir(dynamic_run, tmp_path_factory) -> Path:
    card = tmp_path_factory.mktemp("dynamic-card")
    assert run_cli("stats", dynamic_run, "--output", card) == 0
    return card


@pytest.fixture(scope="module")
def dynamic_card(dynamic_card_dir) -> dict:
    return json.loads((dynamic_card_dir / "stats.json").read_text())


def parquet_split(out: Path, split: str) -> dict[str, np.ndarray]:
    """The instances of a split in manifest order (shard by shard, row by row), read back with pyarrow."""
    manifest = json.loads((out / "manifest.json").read_text())
    tables = [pq.read_table(out / shard["path"]) for shard in manifest["outputs"]["seq128"][split]["shards"]]
    ids = [row for table in tables for row in table.column("input_ids").to_pylist()]
    return {
        "ids": ids,
        **{
            name: np.concatenate([t.column(name).to_numpy() for t in tables]).astype(np.int64)
            for name in ("length", "segment_b_start", "next_sentence_label")
        },
    }


def padding_by_bin(lengths: np.ndarray, bin_size: int, length: int) -> list[tuple[int, int, float]]:
    """(width, instances, padded share) of each bin of create's rule, from the instances' lengths."""
    widths = np.minimum((lengths - 1) // bin_size * bin_size + bin_size, length)
    edges = [min(k * bin_size, length) for k in range(1, -(-length // bin_size) + 1)]
    return [(w, int((widths == w).sum()), 1 - lengths[widths == w].sum() / ((widths == w).sum() * w)) for w in edges]


def test_the_card_of_the_parquet_form_counts_what_its_files_hold(dynamic_run, dynamic_card, dynamic_card_dir):
    manifest = json.loads((dynamic_run / "manifest.json").read_text())
    info = dynamic_card["records"]["."]
    assert info["form"] == manifest["form"] and info["form"]["file_format"] == "parquet"
    assert dynamic_card["options"]["vocab"] == "vocab.txt"  # the output's own copy, named relative to it
    s = info["seq_configs"]["seq128"]
    assert not s["sampled"] and dynamic_card["warnings"] == []
    for split in ("train", "eval"):
        rows, x, out = parquet_split(dynamic_run, split), s[split], manifest["outputs"]["seq128"][split]
        lengths, b_start, labels = rows["length"], rows["segment_b_start"], rows["next_sentence_label"]
        n = len(lengths)
        assert x["instances"] == s["instances"][split] == out["instances"] == n
        assert round(x["label_share"], 6) == out["label_share"] and x["label_share"] == labels.mean()
        assert x["label"] == "random_next" and x["random_next_share"] == x["label_share"]
        assert x["real_tokens_hist"] == np.bincount(lengths, minlength=129).tolist()
        assert x["segment_a_tokens_hist"] == np.bincount(b_start - 2, minlength=129).tolist()
        assert x["segment_b_tokens_hist"] == np.bincount(lengths - b_start - 1, minlength=129).tolist()
        text = [t for ids in rows["ids"] for t in ids[1:] if t != SEP]
        assert (x["text_tokens"], x["unk_tokens"]) == (len(text), text.count(UNK))
        # Padding per bin: what batches of each bin pad, from the lengths the Parquet files hold.
        padding = x["padding"]
        assert [(b["width"], b["instances"]) for b in padding["bins"]] == [
            (w, k) for w, k, _ in padding_by_bin(lengths, BIN, 128)
        ]
        assert [{"width": b["width"], "instances": b["instances"]} for b in padding["bins"] if b["instances"]] == out[
            "bins"
        ]
        for b, (_, _, share) in zip(padding["bins"], padding_by_bin(lengths, BIN, 128)):
            assert b["padded_share"] == pytest.approx(share, rel=1e-12)
        assert padding["padded_share_without_bins"] == pytest.approx(1 - lengths.sum() / (n * 128), rel=1e-12)
        assert padding["padded_share"] < padding["padded_share_without_bins"]
        # Masks of epoch 0: as many positions as the masking rule gives for each length, shown 80/10/10.
        predictions = np.minimum(20, np.maximum(1, np.round(lengths * 0.15))).astype(int)
        assert x["masked_positions_hist"] == np.bincount(predictions, minlength=21).tolist()
        assert x["masked_token_share"] == pytest.approx(0.15, abs=0.01)
        masked = x["masked_positions"]
        for key, expected in (("mask_share", 0.8), ("keep_share", 0.1), ("random_share", 0.1)):
            assert abs(x[key] - expected) < 5 * (expected * (1 - expected) / masked) ** 0.5, (split, key)
    assert s["masks"] == {
        "drawn_by": "bertcorpus.PretrainingLoader",
        "epoch": 0,
        "seed": 0,
        "masked_lm_prob": 0.15,
        "max_predictions_per_seq": 20,
        "whole_word_mask": False,
    }
    assert [r["records_read"] for r in s["shards"]] == [r["records"] for r in s["shards"]]
    assert all(r["file_bytes"] == r["bytes"] for r in s["shards"])
    page = (dynamic_card_dir / "report.html").read_text(encoding="utf-8")
    assert "Parquet files with masks drawn at load time and next-sentence prediction, in length bins of 32" in page
    assert "draws for epoch 0 with seed 0" in page and "length (bins of 32)" in page
    assert "As the loader pads its batches" in page


def test_the_masks_counted_are_those_the_loader_draws_for_epoch_0(dynamic_run, dynamic_card, tmp_path):
    """Every instance once, one per batch: an instance's mask is the same in any batch of the epoch."""
    from bertcorpus.trainer.loader import PretrainingLoader

    x = dynamic_card["records"]["."]["seq_configs"]["seq128"]["train"]
    loader = PretrainingLoader(dynamic_run, seq_length=128, batch_size=1, cache_dir=tmp_path)
    shown = Counter()
    for i in range(len(loader)):
        batch = loader[i]
        k = int(batch["masked_lm_weights"].sum())
        at, labels = batch["masked_lm_positions"][0, :k], batch["masked_lm_ids"][0, :k]
        seen = batch["input_ids"][0, at]
        shown.update(
            mask=int((seen == MASK).sum()),
            original=int((seen == labels).sum()),
            random=int(((seen != MASK) & (seen != labels)).sum()),
        )
    assert len(loader) == x["instances"]
    assert (x["masked_shown_as_mask"], x["masked_shown_as_original"], x["masked_shown_as_random"]) == (
        shown["mask"],
        shown["original"],
        shown["random"],
    )


def test_a_sample_of_the_parquet_form_is_the_start_of_epoch_0(dynamic_run, tmp_path):
    card = stats(dynamic_run, "--output", tmp_path, "--max-records", "300")
    s = card["records"]["."]["seq_configs"]["seq128"]
    assert s["sampled"] and s["all"]["instances"] == 300 == sum(r["records_read"] for r in s["shards"])
    assert sum(s["records_read"].values()) == 300 and len([r for r in s["shards"] if r["records_read"]]) > 2
    assert sum(b["instances"] for b in s["all"]["padding"]["bins"]) == 300
    assert card["warnings"] == []  # a sample's bins are not the manifest's counts, and that is no warning


@pytest.mark.parametrize("objective, label", [("sop", "swapped"), ("none", "unused")])
def test_the_label_is_named_by_the_pair_objective(objective, label, tmp_path):
    out = create(tmp_path / "out", "--masking", "dynamic", "--pair-objective", objective)
    card = stats(out)
    manifest = json.loads((out / "manifest.json").read_text())
    s = card["records"]["."]["seq_configs"]["seq128"]
    rows = parquet_split(out, "train")
    x = s["train"]
    assert (x["label"], x["random_next"], x["random_next_share"]) == (label, None, None)
    assert x["label_ones"] == int(rows["next_sentence_label"].sum())
    assert x["label_share"] == (None if objective == "none" else rows["next_sentence_label"].mean())
    assert manifest["outputs"]["seq128"]["train"]["label_share"] == (
        None if x["label_share"] is None else round(x["label_share"], 6)
    )
    # [CLS] and every [SEP] are structure, the [SEP]s between packed documents too.
    text = [t for ids in rows["ids"] for t in ids[1:] if t != SEP]
    assert x["text_tokens"] == len(text)
    page = (out / "report.html").read_text(encoding="utf-8")
    lead = page[page.index('<section id="built">') : page.index('<section id="plots">')]
    headers = re.findall(r"<th[^>]*>(.*?)</th>", lead)
    assert [h for h in headers if "(label 1)" in h] == (["swapped (label 1)"] if objective == "sop" else [])
    assert ("there is no label to predict" in lead) == (objective == "none")
    plots = {p.name for p in (out / "report_files").iterdir()}
    assert ("seq128-segments.png" in plots) == (objective == "sop")
    if objective == "none":
        assert x["segment_b_tokens_hist"][0] == x["instances"]


def test_static_records_with_bins_show_what_batching_by_bins_would_pad(tmp_path):
    out = create(tmp_path / "out", "--bin-size", BIN)
    card = stats(out)
    manifest = json.loads((out / "manifest.json").read_text())
    for split in ("train", "eval"):
        files = sorted((out / "seq128").glob(f"{split}-*.tfrecord"))
        lengths = parse(files, 128, 20)["input_mask"].sum(1)
        padding = card["records"]["."]["seq_configs"]["seq128"][split]["padding"]
        for b, (width, instances, share) in zip(padding["bins"], padding_by_bin(lengths, BIN, 128), strict=True):
            assert (b["width"], b["instances"]) == (width, instances)
            assert b["padded_share"] == pytest.approx(share, rel=1e-12)
        assert [{"width": b["width"], "instances": b["instances"]} for b in padding["bins"] if b["instances"]] == (
            manifest["outputs"]["seq128"][split]["bins"]
        )
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "length (bins of 32)" in page and "The records themselves stay padded to the full length" in page
    # The pair draws that create skipped, which the manifest counts, are on the card too.
    skipped = manifest["outputs"]["seq128"]["train"]["nsp_draws_skipped"]
    assert skipped and "Pair draws that create skipped (<code>nsp_draws_skipped</code>)" in page
    assert all(f"{reason.replace('_', ' ')} {n:,}" in page for reason, n in skipped.items())
    # Counts per bin that the lengths do not give are named.
    manifest["outputs"]["seq128"]["train"]["bins"][0]["instances"] += 1
    (out / "manifest.json").write_text(json.dumps(manifest))
    warnings = stats(out, "--output", tmp_path / "again")["warnings"]
    assert len(warnings) == 1 and "seq128 train instances per bin" in warnings[0]


def test_records_of_a_form_stats_does_not_read_are_refused_in_one_line(dynamic_run, tmp_path, capsys):
    copy = tmp_path / "records"
    shutil.copytree(dynamic_run, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["form"]["file_format"] = "arrow"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert run_cli("stats", copy) == 2
    err = capsys.readouterr().err
    assert f"{copy / 'manifest.json'} names records stored as arrow; stats reads tfrecord, parquet, mds records" in err
    assert "Traceback" not in err and not (copy / "report.html").exists()


def _damaged(manifest: dict, damage) -> str:
    damaged = json.loads(json.dumps(manifest))
    damage(damaged)
    return json.dumps(damaged)


def test_an_invalid_manifest_is_named_with_what_is_wrong(tmp_path, records_dir, capsys):
    text = (records_dir / "manifest.json").read_text()
    manifest = json.loads(text)
    cases = {
        # Cut inside the key that opens the line after the middle, wherever the manifest's length puts it.
        "truncated": (
            text[: text.index('"', text.index("\n", len(text) // 2)) + 2],
            "it is not JSON (Unterminated string",
        ),
        "array": ("[1, 2]", "it holds an array, not a JSON object"),
        "inputs": (_damaged(manifest, lambda m: m.update(inputs=7)), 'its "inputs" is a number, not an array'),
        "length": (
            _damaged(manifest, lambda m: m["outputs"]["seq128"].update(max_seq_length="128")),
            "its output seq128 has no integer max_seq_length and max_predictions_per_seq",
        ),
        "shard": (
            _damaged(manifest, lambda m: m["outputs"]["seq128"]["train"]["shards"][0].pop("records")),
            "output seq128: a train shard has no path or record count",
        ),
    }
    for name, (content, why) in cases.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(content)
        assert run_cli("stats", tmp_path / name) == 2, name
        err = capsys.readouterr().err
        assert f"{tmp_path / name / 'manifest.json'} is not a valid" in err and why in err, (name, err)
        assert "no manifest.json" not in err and "Traceback" not in err
    # Beside a valid stage, an invalid one is a warning that says the same.
    run = tmp_path / "run"
    shutil.copytree(records_dir, run / "records", ignore=shutil.ignore_patterns("stats.json", "report*"))
    (run / "broken").mkdir()
    (run / "broken" / "manifest.json").write_text("[1, 2]")
    card = stats(run, "--output", tmp_path / "out", "--max-records", "100")
    assert card["warnings"] == [  # the card names it relative to the run
        "broken/manifest.json is not a valid bertcorpus manifest: it holds an array, not a JSON object; skipped"
    ]


def test_the_decoder_reads_examples_serialized_by_tensorflow(records_dir):
    from bertcorpus.transforms.record_stats import decode_batch

    rec = parse(sorted((records_dir / "seq128").glob("train-*.tfrecord"))[:1], 128, 20, 50)
    examples = []
    for i in range(50):
        feature = {
            k: tf.train.Feature(float_list=tf.train.FloatList(value=v[i]))
            if v.dtype == np.float32
            else tf.train.Feature(int64_list=tf.train.Int64List(value=v[i]))
            for k, v in rec.items()
        }
        examples.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    decoded = decode_batch(examples, 128, 20)
    for k, v in rec.items():
        assert np.array_equal(decoded[k], v), k


class _References(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.found += [v for k, v in attrs if k in ("src", "href", "srcset", "poster", "data") and v]


def test_the_report_references_only_files_that_exist(run_dir, run_stats):
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    parser = _References()
    parser.feed(page)
    assert parser.found, "the report shows no plots"
    for ref in parser.found:
        assert not re.match(r"^[a-z]+:|^//", ref), ref
        assert (run_dir / ref).is_file(), ref
    assert "url(" not in page and "@import" not in page and "<script" not in page
    pngs = sorted(p.relative_to(run_dir).as_posix() for p in (run_dir / "report_files").iterdir())
    assert pngs == sorted(set(parser.found))
    assert all((run_dir / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert {
        "report_files/seq128-lengths.png",
        "report_files/seq512-masked.png",
        "report_files/document-chars.png",
    } <= set(pngs)


def test_stats_has_help():
    with pytest.raises(SystemExit) as exit_:
        run_cli("stats", "--help")
    assert exit_.value.code == 0


# ---------------------------------------------------------------------------------------------- the datasheet


def test_the_card_names_no_path_of_this_machine(run_dir, run_stats):
    assert run_stats["directory"] == run_dir.name
    for text in (json.dumps(run_stats), (run_dir / "report.html").read_text(), (run_dir / "README.md").read_text()):
        assert str(run_dir) not in text and str(ENWIKI_2014.parent) not in text
    assert run_stats["records"]["records"]["vocab"]["path"] == VOCAB.name


def front_matter(readme: str) -> dict:
    import yaml

    assert readme.startswith("---\n")
    return yaml.safe_load(readme.split("---\n")[1])


def test_each_source_has_its_licence_provenance_languages_and_use(run_dir, tmp_path):
    info = tmp_path / "sources.yaml"
    info.write_text(
        "sample:\n  license: cc-by-sa-3.0\n  license_name: CC BY-SA 3.0 (the test's own words)\n"
        "  provenance: three pages of a real export\n  limits: [three pages]\n"
        "wikipedia:\n  limits: one limit, written as a string\n"
    )
    card = stats(run_dir, "--output", tmp_path / "card", "--source-info", info)
    sources = {s["source"]: s for s in card["datasheet"]["sources"]}
    assert set(sources) == {"wikipedia", "sample"}
    wiki, sample = sources["wikipedia"], sources["sample"]
    # Without --source-info: what the extraction's manifest says, and the licence of Wikipedia's text.
    assert wiki["license"] == ["cc-by-sa-4.0", "gfdl"] and "extract-wiki" in wiki["provenance"]
    assert ENWIKI_2014.name in wiki["provenance"] and sha256(ENWIKI_2014)[:12] in wiki["provenance"]
    assert wiki["documents"] == card["documents"]["by_source"]["wikipedia"]
    assert wiki["languages"] == {"en": wiki["documents"]}  # the dump's language, from its header
    skipped = json.loads((run_dir / "wiki" / "manifest.json").read_text())["documents"]["skipped"]
    assert wiki["removed_by_extraction"] == {k: n for k, n in skipped.items() if "duplicate" in k and n}
    assert (sample["license"], sample["provenance"]) == ("cc-by-sa-3.0", "three pages of a real export")
    assert sample["limits"][0] == "three pages" and "article prose only" in sample["limits"][1]
    assert wiki["limits"][0] == "one limit, written as a string"  # one limit, not its characters
    assert card["datasheet"]["removed_by_dedup"] == {}
    readme = (tmp_path / "card" / "README.md").read_text()
    header = front_matter(readme)
    assert header["license"] == ["cc-by-sa-3.0", "cc-by-sa-4.0", "gfdl"] and header["language"] == ["en"]
    rows = max(sum(c["instances"].values()) for c in card["records"]["records"]["seq_configs"].values())
    size = next(name for bound, name in ((1e3, "n<1K"), (1e4, "1K<n<10K"), (1e5, "10K<n<100K")) if rows < bound)
    assert header["task_categories"] == ["fill-mask"] and header["size_categories"] == [size]
    assert "### sample" in readme and "CC BY-SA 3.0 (the test's own words)" in readme
    page = (tmp_path / "card" / "report.html").read_text()
    assert '<section id="sources">' in page and "three pages of a real export" in page


def test_languages_come_from_the_documents_language_column(run_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir / "small", run / "small")
    [path] = (run / "small").glob("documents-*.parquet")
    table = pq.read_table(path)
    tags = ["en"] * (table.num_rows - 1) + ["de"]
    pq.write_table(table.set_column(table.schema.get_field_index("language"), "language", pa.array(tags)), path)
    card = stats(run)
    [sample] = card["datasheet"]["sources"]
    assert sample["languages"] == {"en": table.num_rows - 1, "de": 1}
    assert front_matter((run / "README.md").read_text())["language"] == ["de", "en"]


def documents_of(folder: Path) -> int:
    return sum(pq.ParquetFile(p).metadata.num_rows for p in folder.glob("documents-*.parquet"))


def test_a_records_directory_alone_names_the_sources_of_its_documents(run_dir, tmp_path):
    # create's manifest names the documents files it read, and the runs that wrote them.
    card = stats(run_dir / "records", "--output", tmp_path / "card")
    sources = {s["source"]: s for s in card["datasheet"]["sources"]}
    wiki, sample = documents_of(run_dir / "wiki"), documents_of(run_dir / "small")
    assert {name: s["documents"] for name, s in sources.items()} == {"wikipedia": wiki, "sample": sample}
    assert sources["wikipedia"]["languages"] == {"en": wiki} and sources["sample"]["languages"] == {"en": sample}
    assert sources["sample"]["license"] == ["cc-by-sa-4.0", "gfdl"]  # extract-wiki's, from its run's manifest
    assert ENWIKI_SMALL.name in sources["sample"]["provenance"] and card["datasheet"]["unsourced"] is None
    readme = (tmp_path / "card" / "README.md").read_text()
    header = front_matter(readme)
    assert header["license"] == ["cc-by-sa-4.0", "gfdl"] and header["language"] == ["en"]
    assert "### sample" in readme and "### wikipedia" in readme
    page = html.unescape(re.sub(r"<[^>]+>", " ", (tmp_path / "card" / "report.html").read_text()))
    assert not re.search(r"\bNone\b", page)  # records alone have no characters nor [UNK] words per language


def test_records_of_simplified_chinese_documents_are_zh_and_name_their_book(tmp_path):
    book = Path(__file__).parent / "data" / "zh" / "pg25328-tou-peng-hsien-hua.txt"
    assert run_cli("extract-books", "--input", book, "--output", tmp_path / "books", "--zh-variant", "zh-hans") == 0
    flags = ["--pair-objective", "none", "--eval-fraction", "0", "--dupe-factor", "1"]
    argv = ["create", "--input", tmp_path / "books", "--vocab", VOCAB, "--output", tmp_path / "records", *flags]
    assert run_cli(*argv) == 0
    info = tmp_path / "sources.yaml"
    info.write_text("books:\n  license: other\n  license_name: Public domain in the USA (Project Gutenberg)\n")
    card = stats(tmp_path / "records", "--output", tmp_path / "card", "--source-info", info)
    [source] = card["datasheet"]["sources"]
    assert (source["source"], source["documents"], source["languages"]) == ("books", 1, {"zh-Hans": 1})
    assert book.name in source["provenance"]
    header = front_matter((tmp_path / "card" / "README.md").read_text())
    assert header["language"] == ["zh"] and header["license"] == "other"
    assert header["license_name"] == "Public domain in the USA (Project Gutenberg)"
    # The documents file replaced by another (the book in traditional characters): create's records did not come
    # from this one, so its source is not theirs.
    argv = ["extract-books", "--input", book, "--output", tmp_path / "books", "--zh-variant", "zh-hant", "--overwrite"]
    assert run_cli(*argv) == 0
    card = stats(tmp_path / "records", "--output", tmp_path / "card-after")
    assert card["datasheet"]["sources"] == [] and card["datasheet"]["unsourced"]["documents"] == 1
    assert front_matter((tmp_path / "card-after" / "README.md").read_text())["license"] == "unknown"


def test_records_whose_documents_are_not_documents_files_say_their_sources_are_unknown(records_dir, tmp_path):
    card = stats(records_dir, "--output", tmp_path)
    manifest = json.loads((records_dir / "manifest.json").read_text())
    read = sum(entry["documents"] for entry in manifest["inputs"])
    assert card["datasheet"]["sources"] == [] and card["datasheet"]["unsourced"]["documents"] == read
    readme = (tmp_path / "README.md").read_text()
    header = front_matter(readme)
    assert header["license"] == "unknown" and header["language"] == sorted(manifest["languages"])
    said = f"{read:,} documents that create read come from files"
    assert said in readme and said in (tmp_path / "report.html").read_text()
    assert "## Intended use\n\nPretraining BERT-style masked language models" in readme


def test_a_source_described_but_without_documents_is_left_out_with_a_note(run_dir, tmp_path, capsys):
    info = tmp_path / "sources.yaml"
    info.write_text("zhwiki:\n  license: cc-by-sa-3.0\n  provenance: a dump of another run\n")
    card = stats(run_dir, "--output", tmp_path / "card", "--source-info", info)
    assert {s["source"] for s in card["datasheet"]["sources"]} == {"wikipedia", "sample"}
    readme, page = (tmp_path / "card" / "README.md").read_text(), (tmp_path / "card" / "report.html").read_text()
    assert "zhwiki" not in readme and "zhwiki" not in page and "a dump of another run" not in page
    assert front_matter(readme)["license"] == ["cc-by-sa-4.0", "gfdl"]
    note = "--source-info describes zhwiki, which gave no documents here: the card leaves them out"
    assert note in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, message",
    [
        ("- a list\n", "must map each source to its fields"),
        ("wikipedia:\n  licence: x\n", "source 'wikipedia' has unknown field 'licence'"),
        ("wikipedia: [\n", "is not YAML or JSON"),
        ("wikipedia:\n  license: 5\n", "source 'wikipedia': license takes a Hugging Face licence id"),
        ("wikipedia:\n  license: CC BY-SA 4.0\n", "a name goes in license_name), not 'CC BY-SA 4.0'"),
        ("wikipedia:\n  license: [mit, 3]\n", "license takes a Hugging Face licence id or a list of them"),
        ("wikipedia:\n  limits: [one, {a: b}]\n", "source 'wikipedia': limits takes a text or a list of texts"),
        ("wikipedia:\n  provenance: 2017\n", "source 'wikipedia': provenance takes a text, not 2017"),
    ],
)
def test_a_source_info_file_that_cannot_be_read_is_one_line(run_dir, tmp_path, capsys, text, message):
    info = tmp_path / "sources.yaml"
    info.write_text(text)
    assert run_cli("stats", run_dir, "--output", tmp_path / "card", "--source-info", info) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def drawn(monkeypatch, draw, *args):
    """The figure a plot function draws, instead of its PNG."""
    from bertcorpus.pipeline.stats import plots

    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig))
    draw(*args, Path("unused.png"))
    return figures[0].axes[0]


def test_the_segment_plot_shows_the_spike_and_the_rest_on_a_log_axis(monkeypatch):
    from bertcorpus.pipeline.stats.plots import plot_segments

    spike = [1] * 60 + [5000] + [1] * 68
    summary = {f"segment_{s}_tokens_hist": spike for s in "ab"} | {"mean_segment_a_tokens": 60.0}
    axes = drawn(monkeypatch, plot_segments, summary | {"mean_segment_b_tokens": 59.0}, 128)
    assert axes.get_yscale() == "log"


def test_the_size_plots_show_each_source_as_shares_of_its_own_documents(monkeypatch):
    from bertcorpus.pipeline.stats.plots import plot_sizes

    edges = [0, 1, 10, 100, 1000, 10_000]
    by_source = {
        "wikipedia": {"counts": [0, 0, 150, 50, 2], "documents": 202},
        "books": {"counts": [0, 0, 0, 0, 7], "documents": 7},
    }
    axes = drawn(monkeypatch, plot_sizes, by_source, edges, "characters")
    heights = {patch.get_label().split()[0]: patch.get_data().values for patch in axes.patches}
    assert heights["books"].max() == 1.0  # all seven books in one bin: as tall as any line can be
    assert heights["wikipedia"].max() == pytest.approx(150 / 202)
