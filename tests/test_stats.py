"""`bertcorpus stats` on real runs: every number against an independent count (records parsed by TensorFlow with
the reference spec, documents read back with pyarrow, words tokenised by the plain-Python reference tokenizer),
the lineage, sampling, warnings, and a report that renders with every plot in headless Chromium."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import VOCAB, run_cli
from full_tokenizer import FullTokenizerEquivalent, _is_control
from wiki_fixtures import ENWIKI_2014, ENWIKI_SMALL

tf = pytest.importorskip("tensorflow")
from trainer.data import feature_spec as spec  # noqa: E402  (the reference trainer's spec)
TOKENS = VOCAB.read_text(encoding="utf-8").splitlines()
UNK, SEP, MASK = (TOKENS.index(t) for t in ("[UNK]", "[SEP]", "[MASK]"))
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)


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
    assert run_cli("create", "--input", run / "wiki" / "documents-*.parquet", run / "small" / "documents-*.parquet",
                   "--vocab", VOCAB, "--output", run / "records", "--seq-configs", "128:20,512:80",
                   "--dupe-factor", "1", "--eval-fraction", "0.1", "--num-buckets", "2") == 0
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
    seen = set()
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
        assert (seg[:first_sep + 1] == 0).all() and (seg[first_sep + 1:count] == 1).all()
        masked[k] += 1
        for p, label in zip(pos, labels):
            shown["mask" if ids[p] == MASK else "original" if ids[p] == label else "random"] += 1
        text = [t for j, t in enumerate(restored[:count]) if j not in (0, first_sep, last_sep)]
        originals.update(text)
        seen.update(ids[:count].tolist())
        seen.update(labels.tolist())

    def hist(counter: Counter, size: int) -> list[int]:
        return [counter[v] for v in range(size + 1)]

    labels = rec["next_sentence_labels"][:, 0]
    total_real = sum(v * c for v, c in real.items())
    total_masked = sum(v * c for v, c in masked.items())
    text_tokens = sum(originals.values())
    return {
        "instances": n, "random_next": int((labels == 1).sum()), "random_next_share": int((labels == 1).sum()) / n,
        "real_tokens": total_real, "mean_real_tokens": total_real / n, "real_tokens_hist": hist(real, length),
        "segment_a_tokens_hist": hist(seg_a, length), "segment_b_tokens_hist": hist(seg_b, length),
        "masked_positions": total_masked, "mean_masked_positions": total_masked / n,
        "masked_positions_hist": hist(masked, predictions),
        "masked_shown_as_mask": shown["mask"], "masked_shown_as_original": shown["original"],
        "masked_shown_as_random": shown["random"], "mask_share": shown["mask"] / total_masked,
        "text_tokens": text_tokens, "unk_tokens": originals[UNK], "unk_token_rate": originals[UNK] / text_tokens,
        "vocab_ids_seen": len(seen), "vocab_coverage": len(seen) / len(TOKENS),
        "full_length_share": real[length] / n,
        "real_tokens_percentiles": {f"p{q}": int(np.percentile(rec["input_mask"].sum(1), q, method="inverted_cdf"))
                                    for q in (1, 10, 50, 90, 99)},
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


def test_document_statistics_equal_an_independent_count(run_dir, run_stats):
    rows = [r for d in ("wiki", "small") for f in sorted((run_dir / d).glob("documents-*.parquet"))
            for r in pq.read_table(f).to_pylist()]
    docs = run_stats["documents"]
    assert docs["documents"] == len(rows) == 200
    assert docs["by_source"] == dict(Counter(r["source"] for r in rows)) == {"wikipedia": 198, "sample": 2}
    chars = np.array([len(r["text"]) for r in rows])
    words = np.array([len(r["text"].split()) for r in rows])
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
        assert (counts["read"], counts["kept"], counts["skipped"], counts["errors_by_reason"]) == \
            (manifest["read"], manifest["kept"], manifest["skipped"], manifest["errors_by_reason"])
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
                for chunk in cleaned.lower().split():
                    if chunk not in verdict:
                        verdict[chunk] = "[UNK]" in reference.tokenize(chunk)
                    words += 1
                    counts[chunk] += verdict[chunk]
    unknown = run_stats["unknown_words"]
    assert (unknown["documents"], unknown["words"], unknown["unk_words"]) == (200, words, sum(counts.values()))
    assert unknown["unk_words"] > 10
    top = sorted(((w, n) for w, n in counts.items() if n), key=lambda wn: (-wn[1], wn[0]))[:20]
    assert [(t["word"], t["count"]) for t in unknown["top"]] == top
    assert unknown["counts_exact"] and unknown["vocab"] == str(VOCAB)


def test_lineage_links_dumps_documents_vocab_and_records(run_dir, run_stats):
    lineage = run_stats["lineage"]
    stages = {s["stage"]: s for s in lineage["stages"]}
    assert {s: stages[s]["kind"] for s in stages} == {"wiki": "documents", "small": "documents",
                                                     "records": "records"}
    dump = stages["wiki"]["inputs"][0]
    assert (dump["path"], dump["sha256"], dump["size"]) == (str(ENWIKI_2014), sha256(ENWIKI_2014),
                                                            ENWIKI_2014.stat().st_size)
    assert "from" not in dump
    assert lineage["links"] == [{"from": "small", "to": "records", "files": 1},
                                {"from": "wiki", "to": "records", "files": 1}]
    vocab = next(i for i in stages["records"]["inputs"] if i["role"] == "vocab")
    assert vocab["sha256"] == sha256(VOCAB) and "from" not in vocab
    assert vocab["checked"] == {"path": str(VOCAB), "sha256_matches": True}
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
        f.write(extra[:12 + length + 4])
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


def _damaged(manifest: dict, damage) -> str:
    damaged = json.loads(json.dumps(manifest))
    damage(damaged)
    return json.dumps(damaged)


def test_an_invalid_manifest_is_named_with_what_is_wrong(tmp_path, records_dir, capsys):
    text = (records_dir / "manifest.json").read_text()
    manifest = json.loads(text)
    cases = {
        # Cut inside the key that opens the line after the middle, wherever the manifest's length puts it.
        "truncated": (text[: text.index('"', text.index("\n", len(text) // 2)) + 2],
                      "it is not JSON (Unterminated string"),
        "array": ("[1, 2]", "it holds an array, not a JSON object"),
        "inputs": (_damaged(manifest, lambda m: m.update(inputs=7)), 'its "inputs" is a number, not an array'),
        "length": (_damaged(manifest, lambda m: m["outputs"]["seq128"].update(max_seq_length="128")),
                   "its output seq128 has no integer max_seq_length and max_predictions_per_seq"),
        "shard": (_damaged(manifest, lambda m: m["outputs"]["seq128"]["train"]["shards"][0].pop("records")),
                  "output seq128: a train shard has no path or record count"),
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
    assert card["warnings"] == [f"{run / 'broken' / 'manifest.json'} is not a valid bertcorpus manifest: it holds "
                                "an array, not a JSON object; skipped"]


def test_the_decoder_reads_examples_serialized_by_tensorflow(records_dir):
    from transforms.record_stats import decode_batch

    rec = parse(sorted((records_dir / "seq128").glob("train-*.tfrecord"))[:1], 128, 20, 50)
    examples = []
    for i in range(50):
        feature = {k: tf.train.Feature(float_list=tf.train.FloatList(value=v[i])) if v.dtype == np.float32 else
                   tf.train.Feature(int64_list=tf.train.Int64List(value=v[i])) for k, v in rec.items()}
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
    assert {"report_files/seq128-lengths.png", "report_files/seq512-masked.png",
            "report_files/document-chars.png"} <= set(pngs)


IMAGE_CHECK = """<script>
addEventListener("load", () => {
  const images = [...document.images];
  const broken = images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute("src"));
  const out = document.createElement("pre");
  out.id = "image-check";
  out.textContent = JSON.stringify({images: images.length, broken: broken});
  document.body.append(out);
});
</script>"""


def rendered_image_check(page: Path, profile: Path) -> dict:
    """Load a page in headless Chromium and return what the injected script saw of its images."""
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
         "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=60)
    found = re.search(r'<pre id="image-check">(.*?)</pre>', result.stdout)
    assert found, f"Chromium gave no result (exit {result.returncode}): {result.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y chromium), "
                                             "so the report cannot be rendered")
def test_the_report_renders_with_every_plot_in_chromium(run_dir, run_stats, tmp_path):
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    # The copy sits next to the report, so that its relative image paths resolve the same way.
    checked = run_dir / "report-image-check.html"
    checked.write_text(page.replace("</body>", IMAGE_CHECK + "</body>"), encoding="utf-8")
    seen = rendered_image_check(checked, tmp_path / "profile")
    assert seen == {"images": len(list((run_dir / "report_files").glob("*.png"))), "broken": []}
    # The check does notice a missing image.
    checked.write_text(page.replace("</body>", '<img src="report_files/none.png">' + IMAGE_CHECK + "</body>"),
                       encoding="utf-8")
    assert rendered_image_check(checked, tmp_path / "profile")["broken"] == ["report_files/none.png"]
    checked.unlink()


def test_stats_has_help():
    with pytest.raises(SystemExit) as exit_:
        run_cli("stats", "--help")
    assert exit_.value.code == 0
