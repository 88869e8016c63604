"""Outputs of `create` in the forms the loader reads, made from a real static run of `create` in the tests.

`dynamic_copy` writes the dynamic form as `create --masking dynamic` does (Parquet instances, unpadded and
unmasked, zstd, row groups of 2048; vocab.txt; manifest.json with its form) from the instances of a static output,
each record with its masks undone: the same instances in both forms, so that the loader's masks at load time can
be set against the masks create drew for them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

ROW_GROUP = 2048
LABELS = {"nsp": "random_next", "sop": "swapped", "none": "unused"}


def create_sample(out: Path, seq_length: int, predictions: int, *flags: str) -> Path:
    """`bertcorpus create` on the real samples: about 7,500 train instances at 128/20 in 3 shards."""
    from conftest import BOOKS, SAMPLE_TEXT, VOCAB, run_cli

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
            f"{seq_length}:{predictions}",
            "--dupe-factor",
            "3",
            "--num-shards",
            "3",
            "--runner",
            "DirectRunner",
            *flags,
        )
        == 0
    )
    return out


def read_static(paths: list[Path], seq_length: int, predictions: int) -> dict[str, np.ndarray]:
    """Every record of the files, in order, parsed by TensorFlow with the reference trainer's feature spec."""
    import tensorflow as tf

    from bertcorpus.trainer.data import feature_spec

    spec = feature_spec(seq_length, predictions)
    batches = [tf.io.parse_example(b, spec) for b in tf.data.TFRecordDataset([str(p) for p in paths]).batch(4096)]
    return {k: np.concatenate([b[k].numpy() for b in batches]) for k in spec}


def unmasked_instances(records: dict[str, np.ndarray]) -> list[tuple[list[int], int, int]]:
    """(input_ids unpadded with the masks undone, segment_b_start, label) of each record."""
    out = []
    for i in range(len(records["input_ids"])):
        length = int(records["input_mask"][i].sum())
        ids = records["input_ids"][i][:length].copy()
        k = int(records["masked_lm_weights"][i].sum())
        ids[records["masked_lm_positions"][i][:k]] = records["masked_lm_ids"][i][:k]
        b_start = int(np.argmax(records["segment_ids"][i])) if records["segment_ids"][i].any() else length
        out.append((ids.tolist(), b_start, int(records["next_sentence_labels"][i][0])))
    return out


def write_instances(path: Path, instances: list[tuple[list[int], int, int]]) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "input_ids": pa.array([ids for ids, _, _ in instances], pa.list_(pa.uint16())),
            "segment_b_start": pa.array([b for _, b, _ in instances], pa.uint16()),
            "next_sentence_label": pa.array([label for _, _, label in instances], pa.uint8()),
            "length": pa.array([len(ids) for ids, _, _ in instances], pa.uint16()),
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=ROW_GROUP, compression="zstd")
    data = path.read_bytes()
    return {
        "path": f"{path.parent.name}/{path.name}",
        "records": len(instances),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def bin_counts(lengths: list[int], bin_size: int, seq_length: int) -> list[dict]:
    """Instances per bin as create's manifest lists them: [{"width": 32, "instances": n}, ...] by width."""
    counts: dict[int, int] = {}
    for n in lengths:
        edge = min(((n - 1) // bin_size + 1) * bin_size, seq_length)
        counts[edge] = counts.get(edge, 0) + 1
    return [{"width": edge, "instances": k} for edge, k in sorted(counts.items())]


def dynamic_copy(static: Path, out: Path, pair_objective: str = "nsp", bin_size: int | None = None) -> Path:
    """The static output's instances in the dynamic form. With pair_objective "none", each pair becomes one segment
    ([CLS] A [SEP] B [SEP] read as two documents with a [SEP] between them) and its label 0."""
    manifest = json.loads((static / "manifest.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(manifest["vocab"]["path"], out / "vocab.txt")
    for seq_name, entry in manifest["outputs"].items():
        seq_length = entry["max_seq_length"]
        for split in ("train", "eval"):
            if split not in entry:
                continue
            shards, lengths = [], []
            for shard in entry[split]["shards"]:
                records = read_static([static / shard["path"]], seq_length, entry["max_predictions_per_seq"])
                instances = unmasked_instances(records)
                if pair_objective == "none":
                    instances = [(ids, len(ids), 0) for ids, _, _ in instances]
                lengths += [len(ids) for ids, _, _ in instances]
                name = Path(shard["path"]).with_suffix(".parquet").name
                shards.append(write_instances(out / seq_name / name, instances))
            entry[split]["shards"] = shards
            if bin_size:
                entry[split]["bins"] = bin_counts(lengths, bin_size, seq_length)
    manifest["form"] = {
        "masking": "dynamic",
        "pair_objective": pair_objective,
        "bin_size": bin_size,
        "file_format": "parquet",
        "label": LABELS[pair_objective],
    }
    manifest["vocab"]["copy"] = "vocab.txt"
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return out
