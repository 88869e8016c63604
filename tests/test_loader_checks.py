"""The loader refuses what it cannot serve as `create` wrote it, in one line: a shard changed or damaged after create
(by size, row count or sha256, and a row group that cannot be decoded, by number), a damaged index cache (rebuilt,
never blamed on the shard), bins that give no batch, and the numbers a user types (epochs, saved states).

The outputs are the session's real `create` runs of conftest.py (static TFRecords and their dynamic copy)."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from bertcorpus.trainer.loader import LoaderError, PretrainingLoader

L = 128


def loader(out: Path, cache: Path, **kw) -> PretrainingLoader:
    kw.setdefault("batch_size", 8)
    return PretrainingLoader(out, seq_length=L, cache_dir=cache, **kw)


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert isinstance(error.value, LoaderError) and "\n" not in message
    return message


def first_shard(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())["outputs"][f"seq{L}"]["train"]["shards"][0]


def xor_middle(path: Path, count: int = 300) -> None:
    """Damage `count` bytes in the middle of a file, keeping its size."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    for i in range(middle, middle + count):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def test_a_shard_rewritten_after_create_is_refused(sample_dynamic_copy, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(sample_dynamic_copy, out)
    shard = first_shard(out)
    table = pq.read_table(out / shard["path"])
    column = table.schema.get_field_index("next_sentence_label")
    labels = pc.multiply(table.column(column), 0).cast(table.schema.field(column).type)
    pq.write_table(table.set_column(column, "next_sentence_label", labels), out / shard["path"])
    assert (out / shard["path"]).stat().st_size != shard["bytes"]
    with pytest.raises(LoaderError) as e:
        loader(out, tmp_path / "cache")[5]
    assert shard["path"] in one_line(e) and f"the manifest lists {shard['bytes']:,}" in str(e.value)


def test_a_damaged_parquet_shard_is_named_with_its_row_group(sample_dynamic_copy, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(sample_dynamic_copy, out)
    shard = first_shard(out)
    before = loader(out, tmp_path / "cache", batch_size=512)  # made, and the shard hashed, while it was intact
    xor_middle(out / shard["path"])
    assert (out / shard["path"]).stat().st_size == shard["bytes"]
    with pytest.raises(LoaderError) as e:  # a new loader hashes this version of the file
        loader(out, tmp_path / "cache")
    assert shard["path"] in one_line(e) and "sha256 differs; row group" in str(e.value)
    with pytest.raises(LoaderError) as e:  # the loader made before reads the damage
        for i in range(len(before)):
            before[i]
    assert f"corrupt Parquet file {out / shard['path']}: row group" in one_line(e)


def test_a_chinese_ref_column_of_another_type_is_refused():
    import pyarrow as pa

    from bertcorpus.trainer.record_files import _check_instance_schema
    from bertcorpus.transforms.instance_parquet import CHINESE_REF, instance_schema

    _check_instance_schema(instance_schema(100).append(pa.field(CHINESE_REF, pa.list_(pa.uint16()))), "ours")
    foreign = instance_schema(100).append(pa.field(CHINESE_REF, pa.list_(pa.string())))
    with pytest.raises(LoaderError) as e:
        _check_instance_schema(foreign, "theirs.parquet")
    assert one_line(e) == (
        "theirs.parquet is not a bertcorpus instances file: chinese_ref is list<item: string>, "
        "expected list<item: uint16>"
    )


def test_stats_names_a_damaged_parquet_shard_in_one_line(sample_dynamic_copy, tmp_path, capsys):
    from conftest import run_cli

    out = tmp_path / "copy"
    shutil.copytree(sample_dynamic_copy, out)
    shard = first_shard(out)
    xor_middle(out / shard["path"])
    assert run_cli("stats", out, "--output", tmp_path / "card") == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and shard["path"] in err and "row group" in err and "Traceback" not in err


def test_a_damaged_offsets_cache_is_rebuilt_not_blamed_on_the_shard(sample_static, tmp_path):
    cache = tmp_path / "cache"
    expected = loader(sample_static, cache, seed=1)[3]
    shard = first_shard(sample_static)
    index = cache / f"{shard['sha256']}.offsets.npy"
    offsets = np.load(index)
    for damaged in (
        offsets[:-1],  # a record short
        np.concatenate((offsets[:-1], [offsets[-1] + 100])),  # another file's end
        np.concatenate(([0], offsets[1:-1] + 1, offsets[-1:])),  # every boundary a byte late
    ):
        np.save(index, damaged)
        batch = loader(sample_static, cache, seed=1)[3]
        for name, values in expected.items():
            np.testing.assert_array_equal(batch[name], values, err_msg=name)
        np.testing.assert_array_equal(np.load(index), offsets)  # and the cache holds the true offsets again


def test_bins_smaller_than_a_global_batch(sample_dynamic_copy, tmp_path):
    """A binned output (the dynamic copy's manifest given bins of 32): a bin that a global batch cannot fill is
    left out with a warning; when that is every bin, the loader says so instead of giving no batch."""
    out = tmp_path / "binned"
    shutil.copytree(sample_dynamic_copy, out)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["form"]["bin_size"] = 32
    (out / "manifest.json").write_text(json.dumps(manifest))
    lengths = np.concatenate(
        [pq.read_table(p, columns=["length"]).column(0).to_numpy() for p in sorted(out.glob(f"seq{L}/train-*"))]
    )
    per_bin = np.bincount((lengths - 1) // 32)
    assert len(per_bin) == 4 and per_bin.max() < per_bin.sum() // 2
    with pytest.raises(LoaderError) as e:
        loader(out, tmp_path / "cache", batch_size=int(per_bin.max()) + 1)
    assert "every length bin" in one_line(e) and "drop_remainder=False" in str(e.value)
    assert len(loader(out, tmp_path / "cache", batch_size=int(per_bin.max()) + 1, drop_remainder=False)) == 4
    with pytest.warns(UserWarning, match=f"{per_bin.min():,} instances .* left out of every epoch"):
        loader(out, tmp_path / "cache", batch_size=int(per_bin.min()) + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        loader(out, tmp_path / "cache", batch_size=int(per_bin.min()))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"epoch": -1}, "epoch must be in [0, 9,223,372,036,854,775,808), not -1"),
        ({"epoch": 2**64}, "epoch must be in [0,"),
        ({"epoch": 1.5}, "epoch must be a whole number, not 1.5"),
        ({"epoch": "1"}, "epoch must be a whole number, not '1'"),
        ({"batch_size": 8.0}, "batch_size must be a whole number"),
        ({"batch_size": True}, "batch_size must be a whole number"),
        ({"rank": -1}, "rank must be at least 0"),
        ({"world_size": 0}, "world_size must be at least 1"),
        ({"seed": None}, "seed must be a whole number"),
        ({"drop_remainder": "False"}, "drop_remainder must be True or False, not 'False'"),
        ({"whole_word_mask": "false"}, "whole_word_mask must be True or False, not 'false'"),
    ],
)
def test_typed_arguments_give_one_line(sample_static, index_cache, arguments, message):
    with pytest.raises(LoaderError) as e:
        loader(sample_static, index_cache, **arguments)
    assert message in one_line(e)


def test_set_epoch_takes_whole_epochs_only(sample_static, index_cache):
    batches = loader(sample_static, index_cache)
    for bad in (-1, 2**64, 1.5, np.float64(2)):
        with pytest.raises(LoaderError) as e:
            batches.set_epoch(bad)
        assert "epoch must be" in one_line(e)
    batches.set_epoch(np.int64(3))
    assert batches.state_dict(0)["epoch"] == 3 and type(batches.state_dict(0)["epoch"]) is int


def test_a_bad_saved_state_gives_one_line(sample_static, index_cache):
    batches = loader(sample_static, index_cache, seed=2)
    good = batches.state_dict(4)
    json.dumps(good)  # plain values
    cases = [
        ({**good, "batch": 10**6}, f"batch 1,000,000 is past the end of an epoch of {len(batches):,} batches"),
        ({**good, "batch": -5}, "batch must be at least 0, not -5"),
        ({**good, "batch": 2.5}, "batch must be a whole number"),
        ({k: v for k, v in good.items() if k != "seed"}, "the saved state has no seed"),
        ({**good, "epoch": "x"}, "epoch must be a whole number, not 'x'"),
        ({**good, "epoch": -1}, "epoch must be in [0,"),
        ({**good, "version": 99}, "not a state saved by"),
        ([good], "not a state saved by"),
    ]
    for state, message in cases:
        with pytest.raises(LoaderError) as e:
            loader(sample_static, index_cache, seed=2).load_state_dict(state)
        assert message in one_line(e), state
    resumed = loader(sample_static, index_cache, seed=2)
    resumed.load_state_dict(good)
    np.testing.assert_array_equal(resumed[0]["input_ids"], batches[4]["input_ids"])


def test_batch_counts_and_indexes_that_are_no_place_in_the_epoch_give_one_line(sample_static, index_cache):
    batches = loader(sample_static, index_cache)
    n = len(batches)
    for bad, message in ((-1, "batches must be in [0, "), (n + 1, f"batches must be in [0, {n + 1:,}), not {n + 1:,}")):
        with pytest.raises(LoaderError) as e:
            batches.state_dict(bad)
        assert message in one_line(e)
    assert batches.state_dict(n)["epoch"] == 1 and batches.state_dict(n)["batch"] == 0  # an epoch done: the next
    with pytest.raises(LoaderError) as e:
        batches[1.0]
    assert one_line(e) == "a batch index must be a whole number, not 1.0"
    with pytest.raises(IndexError):  # the end of a sequence, for `for batch in loader`
        batches[n]


def test_a_vocab_copy_changed_after_create_is_refused(sample_dynamic_copy, tmp_path):
    """The masks of the dynamic form draw from the output's own vocab copy: swapping two of its entries would
    serve other tokens without a word."""
    out = tmp_path / "copy"
    shutil.copytree(sample_dynamic_copy, out)
    lines = (out / "vocab.txt").read_text(encoding="utf-8").splitlines()
    lines[2000], lines[2001] = lines[2001], lines[2000]
    (out / "vocab.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(LoaderError) as e:
        loader(out, tmp_path / "cache")  # when the loader is made, not at its first batch in a worker
    assert f"vocab {out / 'vocab.txt'} is not the one the ids came from" in one_line(e)
    with pytest.raises(LoaderError) as e:
        loader(out, tmp_path / "cache", vocab=str(tmp_path))
    assert one_line(e).startswith(f"cannot read vocab {tmp_path}: ")
    loader(out, tmp_path / "cache", vocab=str(sample_dynamic_copy / "vocab.txt"))[0]  # the same file elsewhere
