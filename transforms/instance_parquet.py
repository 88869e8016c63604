"""Unmasked instances as Parquet rows: the form `create --masking dynamic` writes and the loader masks at load time.

One row per instance, unpadded (docs/pretraining_data.md, "The Parquet form"):

    input_ids            list<uint16>  [CLS] A [SEP] B [SEP] (list<uint32> for a vocab past 65,536 ids)
    segment_b_start      uint16        position of B's first token; the row's length when it has one segment
    next_sentence_label  uint8         nsp: 1 = random next; sop: 1 = swapped; none: 0, unused
    length               uint16        len(input_ids)

Plain pyarrow and `datasets.load_dataset("parquet", ...)` read it as it is.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bertcorpus.transforms.instance_columns import InstanceColumns

ROW_GROUP_ROWS = 2048  # the loader's unit of random access
WIDE_IDS = 1 << 16  # vocab sizes from here on need 32-bit ids


def instance_schema(vocab_size: int) -> pa.Schema:
    return pa.schema(
        [
            ("input_ids", pa.list_(pa.uint32() if vocab_size > WIDE_IDS else pa.uint16())),
            ("segment_b_start", pa.uint16()),
            ("next_sentence_label", pa.uint8()),
            ("length", pa.uint16()),
        ]
    )


def instances_table(instances: InstanceColumns, vocab_size: int) -> pa.Table:
    """The unmasked instances as rows of instance_schema (their padding dropped)."""
    schema = instance_schema(vocab_size)
    width = instances.input_ids.shape[1]
    real = np.arange(width)[None, :] < instances.length[:, None]
    offsets = np.concatenate(([0], np.cumsum(instances.length))).astype(np.int32)
    ids = pa.array(instances.input_ids[real], schema.field("input_ids").type.value_type)
    return pa.table(
        [
            pa.ListArray.from_arrays(pa.array(offsets), ids),
            pa.array(instances.len_a + 2, pa.uint16()),
            pa.array(instances.next_sentence, pa.uint8()),
            pa.array(instances.length, pa.uint16()),
        ],
        schema=schema,
    )


def write_instances(table: pa.Table, sink) -> None:
    pq.write_table(table, sink, compression="zstd", row_group_size=ROW_GROUP_ROWS)
