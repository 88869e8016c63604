"""create --record-format mds: MosaicML streaming shards written with our own code, byte-identical on any runner,
listed in the manifest; read back by the real mosaicml-streaming package (StreamingDataset, and sample by sample as
ModernBERT's NoStreamingDataset reads them), and by our loader, as the same instances as the Parquet form."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bertcorpus.trainer.loader import LoaderError, PretrainingLoader
from bertcorpus.trainer.mds_files import streaming_dataset

from conftest import BOOKS, SAMPLE_TEXT, VOCAB, run_cli

FLAGS = ["--masking", "dynamic", "--seq-configs", "128:20", "--num-shards", "3", "--eval-fraction", "0.1"]


def create(out: Path, *flags: str) -> dict:
    argv = ["create", "--input", *BOOKS, SAMPLE_TEXT, "--vocab", VOCAB, "--output", out, *FLAGS, *flags]
    assert run_cli(*argv) == 0
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, Path]:
    """The same instances as Parquet and as MDS (nsp), the MDS one again on two worker processes and with compact
    ids."""
    base = tmp_path_factory.mktemp("mds")
    create(base / "parquet", "--runner", "DirectRunner")
    create(base / "mds", "--record-format", "mds", "--runner", "DirectRunner")
    create(base / "mds-compact", "--record-format", "mds", "--mds-ids", "compact", "--runner", "DirectRunner")
    create(
        base / "mds-2",
        "--record-format",
        "mds",
        "--runner",
        "DirectRunner",
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=2",
    )
    return {name: base / name for name in ("parquet", "mds", "mds-2", "mds-compact")}


def parquet_rows(out: Path, split: str) -> list[dict]:
    paths = sorted((out / "seq128").glob(f"{split}-*.parquet"))
    return [row for path in paths for row in pq.read_table(path).to_pylist()]


def test_mds_files_are_listed_hashed_and_the_same_on_any_runner(outputs):
    out = outputs["mds"]
    assert "streaming" not in sys.modules  # create wrote them in this process without mosaicml-streaming
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["form"]["file_format"] == "mds" and manifest["form"]["mds_input_ids"] == "ndarray:int64"
    assert manifest["config"]["mds_ids"] == "int64"
    for split in ("train", "eval"):
        entry = manifest["outputs"]["seq128"][split]
        assert entry["mds_index"] == f"seq128/{split}/index.json"
        names = sorted(p.name for p in (out / "seq128" / split).iterdir())
        assert names == sorted(["index.json", *(Path(s["path"]).name for s in entry["shards"])])
        for shard in entry["shards"]:
            data = (out / shard["path"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == shard["sha256"] and len(data) == shard["bytes"]
        index = json.loads((out / entry["mds_index"]).read_text())
        assert [(s["raw_data"]["basename"], s["samples"]) for s in index["shards"]] == [
            (Path(s["path"]).name, s["records"]) for s in entry["shards"]
        ]
        assert {s["compression"] for s in index["shards"]} == {None}
        assert index["shards"][0]["column_encodings"] == ["ndarray:int64", "str", "uint16", "uint8", "uint16"]
    for path in sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file() and p.name != "manifest.json"):
        assert (outputs["mds-2"] / path).read_bytes() == (out / path).read_bytes(), path


# mosaicml-streaming imports PyTorch and Triton, whose LLVM aborts a process that has loaded TensorFlow's (as other
# tests here do): it reads in a process of its own, and hands back the samples as JSON.
_READ_WITH_STREAMING = """
import json, sys
from streaming.base.util import clean_stale_shared_memory
from bertcorpus.trainer.mds_files import streaming_dataset
clean_stale_shared_memory()
dataset = streaming_dataset(sys.argv[1], 128, sys.argv[2], shuffle=False, batch_size=1)
samples = [dataset[i] for i in range(len(dataset))]
print(json.dumps([{k: v.tolist() if hasattr(v, "tolist") else v for k, v in s.items()} for s in samples]))
print(json.dumps(sorted({str(s["input_ids"].dtype) for s in samples})))
"""

# ModernBERT's NoStreamingDataset: the split's index.json, a reader per shard from streaming's own format code, each
# sample's input_ids in turn; and its StreamingTextDataset's rule for pretokenized samples on each of them.
_READ_LIKE_MODERNBERT = """
import json, os, sys
import numpy as np
from streaming.base.format import reader_from_json
local, split = sys.argv[1], sys.argv[2]
index = json.load(open(os.path.join(local, split, "index.json")))
def text_dataset(sample):
    try:
        return np.frombuffer(sample["input_ids"], np.int64).tolist()
    except ValueError:  # ids whose bytes are not a multiple of 8
        return None
ids, text_dataset_ids = [], []
for info in index["shards"]:
    shard = reader_from_json(local, split, info)
    assert os.path.isfile(os.path.join(local, split, shard.raw_data.basename))
    shard.validate(True)
    ids += [shard[i]["input_ids"].tolist() for i in range(shard.samples)]
    text_dataset_ids += [text_dataset(shard[i]) for i in range(shard.samples)]
print(json.dumps(ids))
print(json.dumps(text_dataset_ids))
"""


def in_own_process(code: str, *args) -> list:
    if importlib.util.find_spec("streaming") is None:  # found, not imported: see above
        pytest.skip("mosaicml-streaming is not installed: pip install -e '.[mds]'")
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.strip().splitlines()]


def test_streaming_dataset_reads_the_parquet_forms_instances(outputs):
    for split in ("train", "eval"):
        samples, dtypes = in_own_process(_READ_WITH_STREAMING, outputs["mds"], split)
        rows = parquet_rows(outputs["parquet"], split)
        assert len(samples) == len(rows) > 0 and dtypes == ["int64"]
        for sample, row in zip(samples, rows):
            assert sample["input_ids"] == row["input_ids"] and sample["len"] == row["length"]
            assert sample["segment_b_start"] == row["segment_b_start"]
            assert sample["next_sentence_label"] == row["next_sentence_label"]
            assert sample["language"] == row["language"]


def test_uncompressed_shards_read_sample_by_sample_as_modernbert_does(outputs):
    ids, text_dataset_ids = in_own_process(_READ_LIKE_MODERNBERT, outputs["mds"] / "seq128", "train")
    assert ids == text_dataset_ids == [row["input_ids"] for row in parquet_rows(outputs["parquet"], "train")]
    compact, compact_in_text_dataset = in_own_process(_READ_LIKE_MODERNBERT, outputs["mds-compact"] / "seq128", "train")
    assert compact == ids and compact_in_text_dataset != ids  # uint16 ids: NoStreamingDataset only


def input_ids_bytes(shard: bytes) -> list[bytes]:
    """Each sample's input_ids values, as an MDS reader hands them over, found by the format alone: the sample's
    offset, a u32 per column of variable size (input_ids and language: the first is the ids' byte size), then the
    ndarray's header (a byte of ndim and the shape's width, the shape) before the values."""
    samples = int(np.frombuffer(shard, "<u4", 1)[0])
    offsets = np.frombuffer(shard, "<u4", samples + 1, 4)
    config = json.loads(shard[4 + 4 * (samples + 1) : int(offsets[0])])
    assert config["column_names"][:2] == ["input_ids", "language"] and config["column_sizes"][:2] == [None, None]
    found = []
    for at in offsets[:-1].tolist():
        size = int(np.frombuffer(shard, "<u4", 1, at)[0])
        header = 1 + (1 << (shard[at + 8] & 3))  # one dimension: its length in 1 or 2 bytes
        found.append(shard[at + 8 + header : at + 8 + size])
    return found


def test_create_writes_the_ids_modernberts_text_dataset_reads_and_compact_ids_on_request(outputs):
    """ModernBERT's StreamingTextDataset reads a pretokenized sample as np.frombuffer(sample["input_ids"],
    np.int64): create's default shards give it the instances; --mds-ids compact does not (and says so in the
    manifest), while our loader reads both alike."""
    rows = [row["input_ids"] for row in parquet_rows(outputs["parquet"], "train")]
    for name, readable in (("mds", True), ("mds-compact", False)):
        entry = manifests(outputs[name])["train"]
        decoded = []
        for shard in entry["shards"]:
            for raw in input_ids_bytes((outputs[name] / shard["path"]).read_bytes()):
                decoded.append(np.frombuffer(raw, np.int64).tolist() if len(raw) % 8 == 0 else None)
        assert (decoded == rows) is readable
    form = json.loads((outputs["mds-compact"] / "manifest.json").read_text())["form"]
    assert form["mds_input_ids"] == "ndarray:uint16"
    kw = {"seq_length": 128, "seed": 2, "batch_size": 16, "masked_lm_prob": 0.3}
    int64, compact = PretrainingLoader(outputs["mds"], **kw), PretrainingLoader(outputs["mds-compact"], **kw)
    for i in (0, len(int64) - 1):
        for name, values in int64[i].items():
            np.testing.assert_array_equal(compact[i][name], values, err_msg=name)
    sizes = [sum(s["bytes"] for s in manifests(outputs[n])["train"]["shards"]) for n in ("mds", "mds-compact")]
    assert sizes[1] < sizes[0]


def test_our_loader_gives_the_same_batches_from_mds_as_from_parquet(outputs, tmp_path):
    for layout, size in (("reference", {"batch_size": 64}), ("packed", {"tokens_per_batch": 4096})):
        kw = {"seq_length": 128, "seed": 4, "masked_lm_prob": 0.3, "layout": layout, "cache_dir": tmp_path, **size}
        mds, parquet = PretrainingLoader(outputs["mds"], **kw), PretrainingLoader(outputs["parquet"], **kw)
        assert len(mds) == len(parquet)
        for i in (0, len(mds) - 1):
            for name, values in parquet[i].items():
                np.testing.assert_array_equal(mds[i][name], values, err_msg=name)


def test_an_index_that_disagrees_with_its_shards_is_named(outputs, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(outputs["mds"], bad)
    path = bad / "seq128" / "train" / "index.json"
    index = json.loads(path.read_text())
    index["shards"][1]["samples"] += 1
    path.write_text(json.dumps(index))
    with pytest.raises(LoaderError) as e:
        PretrainingLoader(bad, seq_length=128, batch_size=8, cache_dir=tmp_path)
    message = str(e.value)
    assert "index.json disagrees with the shards of the manifest (shard.00001.mds:" in message and "\n" not in message
    path.unlink()
    with pytest.raises(LoaderError) as e:
        PretrainingLoader(bad, seq_length=128, batch_size=8, cache_dir=tmp_path)
    assert "index.json is missing" in str(e.value)


def test_without_mosaicml_streaming_the_extra_is_named(outputs, monkeypatch):
    monkeypatch.setitem(sys.modules, "streaming", None)  # import streaming now raises ImportError
    with pytest.raises(LoaderError) as e:
        streaming_dataset(outputs["mds"], 128, "train")
    assert "pip install 'bertcorpus[mds]'" in str(e.value)


def test_mds_ids_need_the_mds_form(tmp_path, capsys):
    argv = ["create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", tmp_path / "o", "--masking", "dynamic"]
    assert run_cli(*argv, "--mds-ids", "compact") == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "bertcorpus create: error: --mds-ids chooses how MDS shards store input_ids: it needs --record-format mds "
        "(not parquet)"
    ]
    assert not (tmp_path / "o").exists()


def test_mds_needs_dynamic_masking(tmp_path, capsys):
    argv = ["create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", tmp_path / "o", "--record-format", "mds"]
    assert run_cli(*argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "bertcorpus create: error: --record-format mds needs --masking dynamic (its instances are stored "
        "unmasked and masked at load time)"
    ]


def test_stats_reads_the_mds_form_as_the_parquet_form(outputs, tmp_path):
    """`bertcorpus stats` counts the MDS form through the loader, as it counts Parquet: the same figures."""
    records = {}
    for name in ("parquet", "mds"):
        assert run_cli("stats", outputs[name], "--output", tmp_path / name) == 0
        card = json.loads((tmp_path / name / "stats.json").read_text())
        records[name] = card["records"]["."]["seq_configs"]["seq128"]
        shards = records[name].pop("shards")
        assert [(s["records"], s["file_bytes"] == s["bytes"]) for s in shards] == [
            (s["records"], True) for split in ("train", "eval") for s in manifests(outputs[name])[split]["shards"]
        ]
    assert records["mds"] == records["parquet"]


def manifests(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())["outputs"]["seq128"]


def test_whole_words_of_english_add_no_column(tmp_path):
    """chinese_ref is stored only where a segmenter grouped words (Chinese text): English shards made with
    --whole-word-mask keep the columns ModernBERT's readers take."""
    alice = Path(__file__).parent / "data" / "create" / "11-0.txt"
    argv = ["create", "--input", alice, "--vocab", VOCAB, "--output", tmp_path / "out", "--whole-word-mask"]
    assert run_cli(*argv, "--masking", "dynamic", "--record-format", "mds", "--eval-fraction", "0") == 0
    index = json.loads((tmp_path / "out" / "seq128" / "train" / "index.json").read_text())
    assert {tuple(s["column_names"]) for s in index["shards"]} == {
        ("input_ids", "language", "len", "next_sentence_label", "segment_b_start")
    }


def mds_languages(out: Path, split: str) -> list[str]:
    """The language of every sample of an MDS output's split, in order, as read_languages reads them."""
    from bertcorpus.transforms.instance_mds import MdsColumns, read_header, read_languages

    found = []
    for shard in json.loads((out / "manifest.json").read_text())["outputs"]["seq128"][split]["shards"]:
        data = (out / shard["path"]).read_bytes()
        samples, config = read_header(data)
        found += read_languages(data, 0, samples, MdsColumns.from_config(config))
    return found


def test_each_sample_carries_the_language_of_its_parquet_row(outputs):
    for split in ("train", "eval"):
        found = mds_languages(outputs["mds"], split)
        rows = parquet_rows(outputs["parquet"], split)
        assert found == [row["language"] for row in rows] and set(found) == {"und"}  # the samples name none


# ------------------------------------------------------------------------------------------------ damaged shards


@pytest.fixture(scope="module")
def chinese_words(tmp_path_factory) -> Path:
    """The MDS form of real Chinese text with whole-word masking: every sample has a chinese_ref column."""
    out = tmp_path_factory.mktemp("mds-zh") / "out"
    text = Path(__file__).parent / "data" / "zh" / "zhwiki-hanyu-plain.txt"
    argv = ["create", "--input", text, "--vocab", VOCAB, "--output", out, "--masking", "dynamic", "--whole-word-mask"]
    assert run_cli(*argv, "--record-format", "mds", "--eval-fraction", "0", "--num-shards", "1") == 0
    return out


def first_sample(path: Path) -> int:
    """Where the first sample of a shard starts: its first u32 is the size of its first variable-size column."""
    return int(np.frombuffer(path.read_bytes(), "<u4", 1, 4)[0])


def damaged_in_place(path: Path, at: int, damage) -> None:
    """The bytes at `at` changed in place, the file's size, inode and modification time kept: a loader that hashed
    this version of the file before does not hash it again."""
    status = path.stat()
    with open(path, "r+b") as f:
        f.seek(at)
        old = f.read(4)
        f.seek(at)
        f.write(damage(old))
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))


def test_a_damaged_size_field_is_a_loader_error_naming_the_shard(chinese_words, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(chinese_words, out)
    shard = out / "seq128" / "train" / "shard.00000.mds"
    names = json.loads((out / "seq128" / "train" / "index.json").read_text())["shards"][0]["column_names"]
    assert names[0] == "chinese_ref"  # its size is the sample's first field
    kw = {"seq_length": 128, "batch_size": 8, "cache_dir": tmp_path / "cache"}
    PretrainingLoader(out, **kw)  # hashes the shard, and remembers this version of it
    damaged_in_place(shard, first_sample(shard), lambda old: (0xFFFFFFF0).to_bytes(4, "little"))
    loader = PretrainingLoader(out, **kw)
    with pytest.raises(LoaderError) as e:
        for _ in loader:
            pass
    message = str(e.value)
    assert (
        message.startswith(f"{shard} is damaged: sample 0: its columns' sizes add up to 4,294,96")
        and "\n" not in message
    )
    assert run_cli("inspect", shard) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"bertcorpus inspect: error: {shard} is not a readable MDS shard: {message.split(': ', 1)[1]}"]


def test_inspect_names_a_damaged_or_cut_shard_not_the_vocab(outputs, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(outputs["mds"], out)
    shard = out / "seq128" / "train" / "shard.00000.mds"
    # The first id's high byte: two u32 sizes (input_ids, language), the shape byte and a one-byte shape, then int64s.
    damaged_in_place(shard, first_sample(shard) + 8 + 2 + 4, lambda old: bytes(b ^ 0x40 for b in old))
    assert run_cli("inspect", shard, "-n", "1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"bertcorpus inspect: error: {shard} is not the file that `create` wrote (its sha256 differs from the "
        "manifest's); recreate the output or restore the file"
    ]
    size = shard.stat().st_size
    with open(shard, "r+b") as f:
        f.truncate(size // 2)
    assert run_cli("inspect", shard, "-n", "1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"bertcorpus inspect: error: {shard} is not the file that `create` wrote (it has {size // 2:,} bytes, the "
        f"manifest lists {size:,}); recreate the output or restore the file"
    ]
