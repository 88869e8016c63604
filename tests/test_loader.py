"""The loader of pretraining batches on real records made by `create`: the reference arrays, epochs, ranks, the
remainder rule, bins, resume, the Hugging Face layout, remote storage, the `tfrecord` index files, bad input, and
no TensorFlow."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bertcorpus.trainer.loader import LoaderError, PretrainingLoader, write_tfrecord_indexes

from loader_data import create_sample, read_static, write_instances

ROOT = Path(__file__).resolve().parent.parent
L, P = 128, 20
CLS, SEP = 101, 102


def create(out: Path, *flags: str) -> Path:
    return create_sample(out, L, P, *flags)


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory) -> Path:
    return create(tmp_path_factory.mktemp("dynamic") / "out", "--masking", "dynamic")


@pytest.fixture(scope="module")
def static_records(sample_static) -> dict[str, np.ndarray]:
    """The train records in manifest order (the loader's instance numbers), as TensorFlow parses them."""
    manifest = json.loads((sample_static / "manifest.json").read_text())
    return read_static([sample_static / s["path"] for s in manifest["outputs"][f"seq{L}"]["train"]["shards"]], L, P)


def loader(out: Path, index_cache: Path, **kw) -> PretrainingLoader:
    kw.setdefault("batch_size", 64)
    return PretrainingLoader(out, seq_length=L, cache_dir=index_cache, **kw)


def test_static_batches_are_the_records_as_the_reference_spec_parses_them(sample_static, index_cache, static_records):
    batches = loader(sample_static, index_cache, seed=3)
    assert len(batches) == len(static_records["input_ids"]) // 64
    for i in (0, 1, len(batches) - 1):
        batch, ids = batches[i], batches.batch_instances(i)
        assert batch.keys() == static_records.keys()
        for name, values in static_records.items():
            expected = values[ids]
            assert batch[name].dtype == (np.float32 if name == "masked_lm_weights" else np.int32)
            np.testing.assert_array_equal(batch[name], expected.astype(batch[name].dtype), err_msg=name)
    # The offsets index was built once, in the cache, under the shards' sha256; create's files are untouched.
    manifest = json.loads((sample_static / "manifest.json").read_text())
    for shard in manifest["outputs"][f"seq{L}"]["train"]["shards"]:
        assert (index_cache / f"{shard['sha256']}.offsets.npy").exists()
        assert hashlib.sha256((sample_static / shard["path"]).read_bytes()).hexdigest() == shard["sha256"]


@pytest.mark.parametrize("form", ["sample_static", "sample_dynamic_copy"])  # fixture names
def test_the_cached_index_is_used_rather_than_a_new_scan(form, request, index_cache, monkeypatch):
    out = request.getfixturevalue(form)
    loader(out, index_cache)  # builds or finds the index, and hashes the shards once
    import bertcorpus.trainer.loader_checks as checks

    def no_scan(*args, **kwargs):
        raise AssertionError("scanned or hashed again")

    monkeypatch.setattr(checks, "scan_tfrecord_offsets", no_scan)
    monkeypatch.setattr(checks, "file_sha256", no_scan)
    assert len(loader(out, index_cache)[0]["input_ids"]) == 64


def test_dynamic_batches_hold_the_same_instances_unmasked(sample_dynamic_copy, index_cache, static_records):
    batches = loader(sample_dynamic_copy, index_cache, seed=5)
    for i in (0, 7):
        batch, ids = batches[i], batches.batch_instances(i)
        for name in ("input_mask", "segment_ids", "next_sentence_labels"):
            np.testing.assert_array_equal(batch[name], static_records[name][ids])
        restored, original = batch["input_ids"].copy(), static_records["input_ids"][ids].copy()
        for rows, features in ((restored, batch), (original, {k: v[ids] for k, v in static_records.items()})):
            k = features["masked_lm_weights"].sum(axis=1).astype(int)
            for r in range(len(rows)):
                rows[r, features["masked_lm_positions"][r, : k[r]]] = features["masked_lm_ids"][r, : k[r]]
        np.testing.assert_array_equal(restored, original)


@pytest.mark.parametrize("world_size", [1, 3, 8])
@pytest.mark.parametrize("form", ["sample_static", "dynamic"])  # fixture names
def test_ranks_get_equal_batches_and_each_instance_once(form, world_size, request, index_cache):
    out = request.getfixturevalue(form)
    total = json.loads((out / "manifest.json").read_text())["outputs"][f"seq{L}"]["train"]["instances"]
    batch = 100
    ranks = [
        loader(out, index_cache, batch_size=batch, rank=r, world_size=world_size, seed=1, epoch=2)
        for r in range(world_size)
    ]
    assert len({len(r) for r in ranks}) == 1
    seen = np.concatenate([r.batch_instances(i) for r in ranks for i in range(len(r))])
    assert len(seen) == len(set(seen.tolist()))  # one rank each, and once per epoch
    assert 0 <= total - len(seen) < batch * world_size  # drop_remainder: less than one global batch dropped
    assert len(ranks[0]) == total // (batch * world_size)

    full = [
        loader(out, index_cache, batch_size=batch, rank=r, world_size=world_size, seed=1, epoch=2, drop_remainder=False)
        for r in range(world_size)
    ]
    assert len({len(r) for r in full}) == 1 and len(full[0]) == -(-total // (batch * world_size))
    steps = [[r.batch_instances(i) for i in range(len(r))] for r in full]
    everything = np.concatenate([b for rank in steps for b in rank])
    assert set(everything.tolist()) == set(range(total))
    # The last global batch is completed by the epoch's first instances (those of its first global batch).
    extra = len(everything) - total
    last = np.concatenate([rank[-1] for rank in steps])
    first = np.concatenate([rank[0] for rank in steps])
    assert np.array_equal(last[len(last) - extra :], first[:extra])


def test_epochs_are_seeded_shuffles(sample_static, index_cache):
    def order(**kw):
        b = loader(sample_static, index_cache, batch_size=500, **kw)
        return np.concatenate([b.batch_instances(i) for i in range(len(b))])

    first = order(seed=1, epoch=0)
    assert np.array_equal(first, order(seed=1, epoch=0))
    for other in (order(seed=1, epoch=1), order(seed=2, epoch=0)):
        assert not np.array_equal(first, other) and np.mean(first == other) < 0.01
    # Shuffled within windows of blocks: neighbours in the epoch are far apart in the files.
    assert np.median(np.abs(np.diff(first))) > 500


@pytest.mark.parametrize("form", ["sample_static", "dynamic"])  # fixture names
def test_a_resumed_run_gives_the_batches_of_an_unstopped_one(form, request, index_cache):
    out = request.getfixturevalue(form)
    steady = loader(out, index_cache, seed=4, epoch=1, rank=1, world_size=2)
    expected = [steady[i] for i in range(len(steady))]
    stopped = loader(out, index_cache, seed=4, epoch=1, rank=1, world_size=2)
    taken = 0
    for _ in zip(range(5), stopped):
        taken += 1
    state = json.loads(json.dumps(stopped.state_dict()))  # what a checkpoint would store
    assert state["batch"] == taken == 5
    resumed = loader(out, index_cache, seed=4, epoch=0, rank=1, world_size=2)
    resumed.load_state_dict(state)
    assert len(resumed) == len(expected) - 5
    for i in range(len(resumed)):
        for name, values in expected[5 + i].items():
            np.testing.assert_array_equal(resumed[i][name], values, err_msg=name)
    # A DataLoader user says how many batches the loop consumed; an epoch's end resumes at the next epoch.
    at_end = resumed.state_dict(batches=len(resumed))
    assert (at_end["epoch"], at_end["batch"]) == (2, 0)


def test_resume_is_refused_for_another_dataset_or_seed(sample_static, dynamic, index_cache):
    state = loader(sample_static, index_cache, seed=4).state_dict(3)
    with pytest.raises(LoaderError, match="another dataset"):
        loader(dynamic, index_cache, seed=4).load_state_dict(state)
    with pytest.raises(LoaderError, match=r"seed 4.* seed 5|seed 4.*5"):
        loader(sample_static, index_cache, seed=5).load_state_dict(state)
    with pytest.raises(LoaderError, match="global_batch_size"):
        loader(sample_static, index_cache, seed=4, batch_size=32).load_state_dict(state)


def _batch_in_worker(blob: bytes, i: int) -> dict:
    return pickle.loads(blob)[i]


def test_the_loader_pickles_for_worker_processes(dynamic, index_cache):
    batches = loader(dynamic, index_cache, seed=2)
    expected = batches[3]
    blob = pickle.dumps(batches)
    assert len(blob) < 100_000  # no open files, maps or caches travel
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        got = pool.apply(_batch_in_worker, (blob, 3))
    for name, values in expected.items():
        np.testing.assert_array_equal(got[name], values)


@pytest.mark.parametrize("form", ["static", "dynamic"])
def test_bins_one_bin_per_global_batch_padded_to_its_edge(form, index_cache, tmp_path):
    out = create(tmp_path / "binned", "--bin-size", "32", "--masking", form)
    world = 3
    ranks = [loader(out, index_cache, batch_size=40, rank=r, world_size=world, seed=6) for r in range(world)]
    assert len({len(r) for r in ranks}) == 1
    widths = []
    for step in range(len(ranks[0])):
        batches = [r[step] for r in ranks]
        lengths = np.concatenate([b["input_mask"].sum(axis=1) for b in batches])
        bins = set(((lengths - 1) // 32).tolist())
        assert len(bins) == 1  # one bin for the whole global batch, every rank at this step
        width = min((bins.pop() + 1) * 32, L)
        assert all(b["input_ids"].shape == (40, width) for b in batches)
        widths.append(width)
    # Each bin gives all the global batches its instances fill (drop_remainder: less than one per bin dropped).
    per_bin = json.loads((out / "manifest.json").read_text())["outputs"][f"seq{L}"]["train"]["bins"]
    assert {w: widths.count(w) for w in set(widths)} == {
        b["width"]: b["instances"] // (40 * world) for b in per_bin if b["instances"] >= 40 * world
    }
    assert {32, 64, 96, 128} <= set(widths)


def test_a_binned_output_loads_packed_with_every_instance_once(index_cache, tmp_path):
    # Packing plans its own batches by tokens, so the bins' batch sizes are not asked of it.
    out = create(tmp_path / "binned", "--bin-size", "32", "--masking", "dynamic")
    for drop_remainder in (True, False):
        packed = PretrainingLoader(
            out,
            seq_length=L,
            layout="packed",
            tokens_per_batch=16 * L,
            drop_remainder=drop_remainder,
            cache_dir=index_cache,
        )
        seen = np.concatenate([packed.batch_instances(i) for i in range(len(packed))])
        total = packed.dataset.instances
        assert len(np.unique(seen)) == len(seen)
        # drop_remainder leaves out only the least filled batch.
        assert len(seen) > 0.97 * total if drop_remainder else len(seen) == total


def test_huggingface_layout(dynamic, index_cache):
    ref = loader(dynamic, index_cache, seed=8)[2]
    hf = loader(dynamic, index_cache, seed=8, layout="huggingface")[2]
    assert set(hf) == {"input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label"}
    np.testing.assert_array_equal(hf["input_ids"], ref["input_ids"])
    np.testing.assert_array_equal(hf["token_type_ids"], ref["segment_ids"])
    np.testing.assert_array_equal(hf["attention_mask"], ref["input_mask"])
    np.testing.assert_array_equal(hf["next_sentence_label"], ref["next_sentence_labels"][:, 0])
    assert hf["labels"].shape == ref["input_ids"].shape and hf["labels"].dtype == np.int64
    for r in range(len(ref["input_ids"])):
        k = int(ref["masked_lm_weights"][r].sum())
        targets = np.flatnonzero(hf["labels"][r] != -100)
        np.testing.assert_array_equal(targets, ref["masked_lm_positions"][r, :k])
        np.testing.assert_array_equal(hf["labels"][r, targets], ref["masked_lm_ids"][r, :k])
    assert (hf["labels"][:, 0] == -100).all()  # padded prediction slots (position 0) never become targets


def test_remote_output_gives_the_local_batches(gcs, sample_static, dynamic, index_cache):
    for out in (sample_static, dynamic):
        url = gcs.url("loader", out.parent.name)
        for f in sorted(out.rglob("*")):
            if f.is_file():
                gcs.upload(f, f"{url}/{f.relative_to(out)}")
        local = loader(out, index_cache, seed=9, batch_size=50)
        remote = PretrainingLoader(url, seq_length=L, batch_size=50, seed=9, cache_dir=index_cache)
        for i in (0, 5):
            for name, values in local[i].items():
                np.testing.assert_array_equal(remote[i][name], values, err_msg=name)


def test_tfrecord_index_files_point_at_every_record(sample_static, index_cache, tmp_path):
    target = tmp_path / "index"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bertcorpus.loader",
            "index",
            str(sample_static),
            "--to",
            str(target),
            "--cache-dir",
            str(index_cache),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads((sample_static / "manifest.json").read_text())
    shards = [s for split in ("train", "eval") for s in manifest["outputs"][f"seq{L}"][split]["shards"]]
    assert sorted(target.rglob("*.index")) == sorted(target / f"{s['path']}.index" for s in shards)
    for shard in shards:
        data = (sample_static / shard["path"]).read_bytes()
        lines = np.loadtxt(target / f"{shard['path']}.index", dtype=np.int64, ndmin=2)
        assert len(lines) == shard["records"]
        offsets, sizes = lines[:, 0], lines[:, 1]
        assert offsets[0] == 0 and np.array_equal(offsets[1:], np.cumsum(sizes)[:-1])
        assert offsets[-1] + sizes[-1] == len(data)
        # Each line spans one whole frame: its length field plus 16 bytes of header and footer.
        lengths = np.array([int.from_bytes(data[o : o + 8], "little") for o in offsets.tolist()])
        assert np.array_equal(sizes, lengths + 16)
    assert (
        write_tfrecord_indexes(sample_static, tmp_path / "again", index_cache)
        and (tmp_path / "again" / shards[0]["path"]).with_suffix(".tfrecord.index").exists()
    )


def listed_as_is(out: Path, shard: dict) -> None:
    """Make the manifest list a shard's present bytes (a file made elsewhere under a manifest made for it)."""
    manifest = json.loads((out / "manifest.json").read_text())
    data = (out / shard["path"]).read_bytes()
    for split in manifest["outputs"][f"seq{L}"].values():
        for entry in split.get("shards", []) if isinstance(split, dict) else []:
            if entry["path"] == shard["path"]:
                entry.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    (out / "manifest.json").write_text(json.dumps(manifest))


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert isinstance(error.value, ValueError) and "\n" not in message
    return message


def test_bad_input_gets_one_clear_line(sample_static, dynamic, index_cache, tmp_path):
    with pytest.raises(LoaderError) as e:
        PretrainingLoader(sample_static, seq_length=512, batch_size=8, cache_dir=index_cache)
    assert "has no seq_length 512 (it has seq128)" in one_line(e)
    with pytest.raises(LoaderError) as e:
        loader(sample_static, index_cache, rank=3, world_size=3)
    assert "rank 3, world_size 3" in one_line(e)
    with pytest.raises(LoaderError) as e:
        loader(sample_static, index_cache, batch_size=5000, world_size=2)
    assert "global batch of 10000" in one_line(e) and "holds" in str(e.value)
    with pytest.raises(LoaderError) as e:
        PretrainingLoader(tmp_path, seq_length=L, batch_size=8, cache_dir=index_cache)
    assert "no manifest.json" in one_line(e)

    mixed = tmp_path / "mixed"
    shutil.copytree(sample_static, mixed)
    shutil.copy(next((dynamic / f"seq{L}").glob("*.parquet")), mixed / f"seq{L}")
    with pytest.raises(LoaderError) as e:
        loader(mixed, index_cache)
    assert "mixes TFRecord and Parquet" in one_line(e)

    foreign = tmp_path / "foreign"
    shutil.copytree(dynamic, foreign)
    manifest = json.loads((foreign / "manifest.json").read_text())
    shard = manifest["outputs"][f"seq{L}"]["train"]["shards"][0]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"tokens": pa.array([[1, 2, 3]] * shard["records"], pa.list_(pa.int64()))}), foreign / shard["path"]
    )
    listed_as_is(foreign, shard)
    with pytest.raises(LoaderError) as e:
        loader(foreign, index_cache)
    assert shard["path"] in one_line(e) and "no column input_ids" in str(e.value)

    with pytest.raises(LoaderError) as e:
        loader(sample_static, index_cache, masked_lm_prob=0.2)
    assert "masks are fixed" in one_line(e)


def test_a_changed_or_damaged_record_file_is_named(sample_static, index_cache, tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(sample_static, damaged)
    shard = json.loads((damaged / "manifest.json").read_text())["outputs"][f"seq{L}"]["train"]["shards"][0]
    batches = loader(damaged, index_cache, batch_size=500)  # made, and the shard hashed, before the damage
    data = bytearray((damaged / shard["path"]).read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit inside a record's data
    (damaged / shard["path"]).write_bytes(bytes(data))
    for cache in (tmp_path / "fresh-cache", index_cache):  # a first scan, or the index cached for the intact file
        with pytest.raises(LoaderError) as e:  # this version of the file was never hashed: its sha256 differs
            loader(damaged, cache)
        assert shard["path"] in one_line(e) and "sha256 differs" in str(e.value)
    with pytest.raises(LoaderError) as e:  # a loader made before: the damaged record fails its CRC when read
        for i in range(len(batches)):
            batches[i]
    assert shard["path"] in one_line(e) and "checksum" in str(e.value)


def test_a_parquet_file_of_the_wrong_types_is_named(dynamic, index_cache, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "wrong"
    shutil.copytree(dynamic, out)
    shard = json.loads((out / "manifest.json").read_text())["outputs"][f"seq{L}"]["train"]["shards"][0]
    rows = pq.read_table(out / shard["path"])
    pq.write_table(
        rows.set_column(0, "input_ids", pa.array([str(x) for x in rows.column(0).to_pylist()])), out / shard["path"]
    )
    listed_as_is(out, shard)
    with pytest.raises(LoaderError) as e:
        loader(out, index_cache)
    assert shard["path"] in one_line(e) and "input_ids is string" in str(e.value)


def test_the_loader_needs_no_tensorflow(dynamic, sample_static, index_cache):
    script = f"""
import sys
sys.modules["tensorflow"] = None  # any import of TensorFlow now fails
from bertcorpus.trainer.loader import PretrainingLoader
for out in ({str(dynamic)!r}, {str(sample_static)!r}):
    batch = PretrainingLoader(out, seq_length={L}, batch_size=16, cache_dir={str(index_cache)!r})[0]
    assert batch["input_ids"].shape == (16, {L})
heavy = [m for m in ("tensorflow", "keras", "apache_beam", "pyarrow.parquet") if sys.modules.get(m)]
print(heavy)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['pyarrow.parquet']"  # Parquet for the dynamic form; Beam only for remote paths


def test_write_instances_follows_the_schema(tmp_path):
    """The test's Parquet writer itself: the spec's column types, zstd, row groups of 2048."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    entry = write_instances(
        tmp_path / "seq128" / "train-00000-of-00001.parquet", [([CLS, 5, SEP, 6, SEP], 3, 1)] * 5000
    )
    f = pq.ParquetFile(tmp_path / entry["path"])
    schema = f.schema_arrow
    assert schema.names == ["input_ids", "segment_b_start", "next_sentence_label", "length"]
    assert schema.types[0].value_type == pa.uint16() and schema.types[1:] == [pa.uint16(), pa.uint8(), pa.uint16()]
    assert [f.metadata.row_group(i).num_rows for i in range(f.num_row_groups)] == [2048, 2048, 904]
    assert f.metadata.row_group(0).column(0).compression == "ZSTD"
