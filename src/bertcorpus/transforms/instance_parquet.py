"""Unmasked instances as Parquet rows: the form `create --masking dynamic` writes and the loader masks at load time.

One row per instance, unpadded (docs/pretraining_data.md, "The Parquet form"):

    input_ids            list<uint16>  [CLS] A [SEP] B [SEP], or the tokenizer's template (list<uint32> for a vocab
                                       past 65,536 ids)
    segment_b_start      uint16        position of B's first token; the row's length when it has one segment
    next_sentence_label  uint8         nsp: 1 = random next; sop: 1 = swapped; none: 0, unused
    length               uint16        len(input_ids)
    chinese_ref          list<uint16>  only from a run with whole-word masking by a segmenter: the positions of the
                                       tokens that continue a Chinese word (its characters after the first), as
                                       Hugging Face's DataCollatorForWholeWordMask reads a `chinese_ref` column
    language             string        the language (BCP 47) of the document the instance's first segment comes
                                       from; und where it is not known
    provenance           list<struct>  only from a run with --provenance: the pieces of document text the tokens
                                       came from, {document, start, end, segment} each (transforms/provenance.py)

Plain pyarrow and `datasets.load_dataset("parquet", ...)` read it as it is.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bertcorpus.transforms.instance_columns import InstanceColumns
from bertcorpus.transforms.provenance import PROVENANCE, Provenance

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


CHINESE_REF = "chinese_ref"
CHINESE_REF_TYPE = pa.list_(pa.uint16())
LANGUAGE = "language"


def instances_table(
    instances: InstanceColumns,
    vocab_size: int,
    languages: list[str] | None = None,
    b_offset: int = 2,
    provenance: Provenance | None = None,
) -> pa.Table:
    """The unmasked instances as rows of instance_schema (their padding dropped), with chinese_ref where they
    carry word_continues, and each one's language where `languages` gives them. B starts b_offset tokens after
    A's first token (2 in [CLS] A [SEP] B [SEP]; the row's length where it has one segment)."""
    schema = instance_schema(vocab_size)
    width = instances.input_ids.shape[1]
    real = np.arange(width)[None, :] < instances.length[:, None]
    offsets = np.concatenate(([0], np.cumsum(instances.length))).astype(np.int32)
    ids = pa.array(instances.input_ids[real], schema.field("input_ids").type.value_type)
    columns = [
        pa.ListArray.from_arrays(pa.array(offsets), ids),
        pa.array(instances.len_a + b_offset, pa.uint16()),
        pa.array(instances.next_sentence, pa.uint8()),
        pa.array(instances.length, pa.uint16()),
    ]
    if instances.word_continues is not None:
        continues = instances.word_continues & real
        per_row = continues.sum(axis=1)
        ref_offsets = np.concatenate(([0], np.cumsum(per_row))).astype(np.int32)
        positions = np.nonzero(continues)[1]  # row by row, ascending
        columns.append(pa.ListArray.from_arrays(pa.array(ref_offsets), pa.array(positions, pa.uint16())))
        schema = schema.append(pa.field(CHINESE_REF, CHINESE_REF_TYPE))
    if languages is not None:
        columns.append(pa.array(languages, pa.string()))
        schema = schema.append(pa.field(LANGUAGE, pa.string()))
    if provenance is not None:
        columns.append(provenance_array(provenance))
        schema = schema.append(pa.field(PROVENANCE, PROVENANCE_TYPE))
    return pa.table(columns, schema=schema)


PROVENANCE_TYPE = pa.list_(
    pa.struct([("document", pa.string()), ("start", pa.int64()), ("end", pa.int64()), ("segment", pa.uint8())])
)


def provenance_array(provenance: Provenance) -> pa.ListArray:
    """Each instance's pieces, as a list of {document, start, end, segment}."""
    names = pa.array(provenance.documents, pa.string()).take(pa.array(provenance.document, pa.int32()))
    pieces = pa.StructArray.from_arrays(
        [
            names,
            pa.array(provenance.start, pa.int64()),
            pa.array(provenance.end, pa.int64()),
            pa.array(provenance.segment, pa.uint8()),
        ],
        fields=list(PROVENANCE_TYPE.value_type),
    )
    return pa.ListArray.from_arrays(pa.array(provenance.offsets.astype(np.int32)), pieces, type=PROVENANCE_TYPE)


def provenance_table(provenance: Provenance, shard_sha256: str) -> pa.Table:
    """A TFRecord shard's provenance, beside it: a row per record, in record order (`record`, `provenance`), and in
    the file's metadata the shard's sha256 and record count, so that a reader can tell it is still that shard's."""
    table = pa.table(
        {"record": pa.array(np.arange(len(provenance)), pa.int64()), PROVENANCE: provenance_array(provenance)}
    )
    return table.replace_schema_metadata(
        {b"bertcorpus.shard_sha256": shard_sha256.encode(), b"bertcorpus.shard_records": str(len(provenance)).encode()}
    )


def write_instances(table: pa.Table, sink) -> None:
    pq.write_table(table, sink, compression="zstd", row_group_size=ROW_GROUP_ROWS)
