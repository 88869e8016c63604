"""The values that cross create's three large shuffles, and the Beam coders that turn them into bytes.

    "group into buckets":  (bucket key, SourceDocument)    one document's id, and its text or its sentences
    "gather negatives":    (bucket key, BucketMessage)     a bucket's own tokenised documents, or fragments of
                                                           another bucket's documents sent for its negatives
    "group into shards":   ((seq, split, shard), InstancePiece)  one bucket's instances for one shard

Each type has a deterministic coder registered with Beam's coder registry, so that the job code handles objects
and the runner does the encoding, on every runner and in a local run's spill files (local_shuffle) alike.
Arrays travel as flat little-endian columns, token ids in 16 bits where they fit, and instance pieces
zstd-compressed: most of a run's shuffled bytes are padding that compresses well.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import apache_beam as beam
import numpy as np
import zstandard

from bertcorpus.pipeline.coders import DeterministicCoder
from bertcorpus.pipeline.inputs.formats import SourceDocument
from bertcorpus.transforms.instance_columns import InstanceColumns
from bertcorpus.transforms.instances import Bucket
from bertcorpus.transforms.provenance import Provenance


@dataclass(frozen=True)
class BucketMessage:
    """What a bucket receives before building its instances: its own documents (`sender` is None, with the
    number of buckets in its split), or fragments of the documents of `sender`, for its random next segments."""

    bucket: Bucket
    sender: str | None = None
    ring_size: int = 0


@dataclass(frozen=True)
class InstancePiece:
    """One bucket's instances for one shard: each with its random sort key and its row among the bucket's
    instances, and the bucket's tie-break for equal keys."""

    tiebreak: int
    sort_keys: np.ndarray  # (N,) int64
    rows: np.ndarray  # (N,) int64
    instances: InstanceColumns
    language_tags: tuple = ()  # the languages of the bucket's documents
    languages: np.ndarray | None = None  # (N,) each instance's language, a number into language_tags
    provenance: Provenance | None = None  # where each instance's tokens came from (create --provenance)


class SourceDocumentCoder(DeterministicCoder):
    """id and language, then the text, or the sentences one after another with their lengths in front: sentences
    stay a list."""

    def encode(self, doc: SourceDocument) -> bytes:
        name = doc.id.encode("utf-8", "surrogatepass")
        language = (doc.language or "").encode("ascii")
        parts = [doc.text or ""] if doc.sentences is None else doc.sentences
        encoded = [part.encode("utf-8") for part in parts]
        sizes = [len(name), len(language), doc.sentences is not None, len(encoded), *map(len, encoded)]
        return b"".join([np.array(sizes, "<i8").tobytes(), name, language, *encoded])

    def decode(self, data: bytes) -> SourceDocument:
        size, language_size, has_sentences, count = np.frombuffer(data, "<i8", 4).tolist()
        ends = np.cumsum(np.frombuffer(data, "<i8", count, 32)).tolist()
        at = 32 + 8 * count
        name = data[at : at + size].decode("utf-8", "surrogatepass")
        language = data[at + size : at + size + language_size].decode("ascii") or None
        body = memoryview(data)[at + size + language_size :]
        parts = [str(body[start:end], "utf-8") for start, end in zip([0, *ends[:-1]], ends)]
        if has_sentences:
            return SourceDocument(name, sentences=parts, language=language)
        return SourceDocument(name, text=parts[0], language=language)


class BucketMessageCoder(DeterministicCoder):
    def encode(self, message: BucketMessage) -> bytes:
        sender = (message.sender or "").encode("utf-8")
        header = np.array([message.sender is not None, message.ring_size, len(sender)], "<i8")
        return b"".join([header.tobytes(), sender, bucket_bytes(message.bucket)])

    def decode(self, data: bytes) -> BucketMessage:
        has_sender, ring_size, size = np.frombuffer(data, "<i8", 3).tolist()
        sender = data[24 : 24 + size].decode("utf-8") if has_sender else None
        return BucketMessage(bucket_from_bytes(memoryview(data)[24 + size :]), sender, ring_size)


class InstancePieceCoder(DeterministicCoder):
    def encode(self, piece: InstancePiece) -> bytes:
        n = len(piece.sort_keys)
        compressed = zstandard.ZstdCompressor(level=1).compress(columns_bytes(piece.instances))
        tags = "\n".join(piece.language_tags).encode("utf-8") if piece.languages is not None else b""
        provenance = provenance_bytes(piece.provenance) if piece.provenance is not None else b""
        header = [n, piece.tiebreak, piece.languages is not None, len(tags), len(provenance)]
        return b"".join(
            [
                np.array(header, "<i8").tobytes(),
                piece.sort_keys.astype("<i8").tobytes(),
                piece.rows.astype("<i8").tobytes(),
                tags,
                piece.languages.astype("<i2").tobytes() if piece.languages is not None else b"",
                provenance,
                compressed,
            ]
        )

    def decode(self, data: bytes) -> InstancePiece:
        n, tiebreak, has_languages, tags_size, provenance_size = np.frombuffer(data, "<i8", 5).tolist()
        keys, rows = np.frombuffer(data, "<i8", 2 * n, 40).reshape(2, n)
        at = 40 + 16 * n
        tags, languages = (), None
        if has_languages:
            tags = tuple(data[at : at + tags_size].decode("utf-8").split("\n"))
            languages = np.frombuffer(data, "<i2", n, at + tags_size)
            at += tags_size + 2 * n
        provenance = provenance_from_bytes(memoryview(data)[at : at + provenance_size]) if provenance_size else None
        at += provenance_size
        packed = zstandard.ZstdDecompressor().decompress(memoryview(data)[at:])
        return InstancePiece(tiebreak, keys, rows, columns_from_bytes(packed), tags, languages, provenance)

    def estimate_size(self, piece: InstancePiece) -> int:
        # Beam samples element sizes for its counters; compressing a piece again only to weigh it would cost as
        # much as encoding it.
        columns = (getattr(piece.instances, f.name) for f in fields(InstanceColumns))
        return 32 + 16 * len(piece.sort_keys) + sum(c.nbytes for c in columns if c is not None) // 8


beam.coders.registry.register_coder(SourceDocument, SourceDocumentCoder)
beam.coders.registry.register_coder(BucketMessage, BucketMessageCoder)
beam.coders.registry.register_coder(InstancePiece, InstancePieceCoder)


# ------------------------------------------------------------------------------ the layouts behind the coders


# The header's flags: 32-bit ids; word_continues follows the names, a bit per token; the documents' languages follow
# that, as their distinct tags (one "\n"-joined string, its length first) and each document's tag number; then the
# sentences' stretches of text (provenance), two int64 each.
_WIDE, _GROUPED, _LANGUAGES, _SPANS = 1, 2, 4, 8


def bucket_bytes(bucket: Bucket) -> bytes:
    """A bucket in a few flat arrays: ids in 16 bits where they fit, word_continues (if any) a bit per token."""
    wide = bool(len(bucket.tokens)) and int(bucket.tokens.max()) >= 1 << 16
    grouped = bucket.word_continues is not None
    names = [i.encode("utf-8", "surrogatepass") for i in bucket.doc_ids]
    flags = _WIDE * wide | _GROUPED * grouped | _LANGUAGES * (bucket.languages is not None)
    flags |= _SPANS * (bucket.spans is not None)
    header = np.array([len(names), len(bucket.sentence_starts) - 1, len(bucket.tokens), flags], "<i8")
    return b"".join(
        [
            header.tobytes(),
            bucket.tokens.astype("<i4" if wide else "<u2").tobytes(),
            np.diff(bucket.sentence_starts).astype("<i4").tobytes(),
            np.diff(bucket.doc_first_sentence).astype("<i4").tobytes(),
            np.array([len(n) for n in names], "<i4").tobytes(),
            *names,
            np.packbits(bucket.word_continues).tobytes() if grouped else b"",
            _languages_bytes(bucket.languages) if bucket.languages is not None else b"",
            bucket.spans.astype("<i8").tobytes() if bucket.spans is not None else b"",
        ]
    )


def _languages_bytes(languages: list[str]) -> bytes:
    tags = sorted(set(languages))
    number = {tag: i for i, tag in enumerate(tags)}
    joined = "\n".join(tags).encode("utf-8")
    return b"".join(
        [np.array([len(joined)], "<i8").tobytes(), joined, np.array([number[t] for t in languages], "<u2").tobytes()]
    )


def bucket_from_bytes(data) -> Bucket:
    data = bytes(data)
    docs, sentences, tokens, flags = np.frombuffer(data, "<i8", 4).tolist()
    parts, at = [], 32
    width = "<i4" if flags & _WIDE else "<u2"
    for dtype, count in ((width, tokens), ("<i4", sentences), ("<i4", docs), ("<i4", docs)):
        parts.append(np.frombuffer(data, dtype, count, at))
        at += parts[-1].nbytes
    ids, lengths, per_doc, name_lengths = parts
    ends = (at + np.cumsum(name_lengths)).tolist()
    doc_ids = [data[start:end].decode("utf-8", "surrogatepass") for start, end in zip([at, *ends[:-1]], ends)]
    continues = None
    at = ends[-1] if ends else at
    if flags & _GROUPED:
        bits = np.frombuffer(data, np.uint8, (tokens + 7) // 8, at)
        continues = np.unpackbits(bits, count=tokens).astype(bool)
        at += bits.nbytes
    languages = None
    if flags & _LANGUAGES:
        size = int(np.frombuffer(data, "<i8", 1, at)[0])
        tags = data[at + 8 : at + 8 + size].decode("utf-8").split("\n")
        languages = [tags[i] for i in np.frombuffer(data, "<u2", docs, at + 8 + size).tolist()]
        at += 8 + size + 2 * docs
    spans = np.frombuffer(data, "<i8", 2 * sentences, at).reshape(sentences, 2) if flags & _SPANS else None
    return Bucket(
        doc_ids,
        ids.astype(np.int32),
        np.concatenate(([0], np.cumsum(lengths, dtype=np.int64))),
        np.concatenate(([0], np.cumsum(per_doc, dtype=np.int64))),
        continues,
        languages,
        spans,
    )


def provenance_bytes(provenance: Provenance) -> bytes:
    """The pieces' counts and columns, then the documents' ids, each one's length first."""
    names = [name.encode("utf-8", "surrogatepass") for name in provenance.documents]
    k = len(provenance.document)
    return b"".join(
        [
            np.array([len(provenance), k, len(names)], "<i8").tobytes(),
            np.array([len(name) for name in names], "<i4").tobytes(),
            np.diff(provenance.offsets).astype("<i4").tobytes(),
            provenance.document.astype("<i4").tobytes(),
            provenance.start.astype("<i8").tobytes(),
            provenance.end.astype("<i8").tobytes(),
            provenance.segment.astype("<u1").tobytes(),
            *names,
        ]
    )


def provenance_from_bytes(data) -> Provenance:
    data = bytes(data)
    n, k, documents = np.frombuffer(data, "<i8", 3).tolist()
    name_ends = np.cumsum(np.frombuffer(data, "<i4", documents, 24), dtype=np.int64)
    at = 24 + 4 * documents
    counts = np.frombuffer(data, "<i4", n, at)
    at += 4 * n
    document = np.frombuffer(data, "<i4", k, at)
    start, end = np.frombuffer(data, "<i8", 2 * k, at + 4 * k).reshape(2, k)
    segment = np.frombuffer(data, "<u1", k, at + 20 * k)
    at += 21 * k
    bounds = [at, *(at + name_ends).tolist()]
    names = [data[a:b].decode("utf-8", "surrogatepass") for a, b in zip(bounds, bounds[1:])]
    offsets = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))
    return Provenance(offsets, document.astype(np.int32), start.astype(np.int64), end.astype(np.int64), segment, names)


_WIDTHS = {2: np.dtype("<u2"), 4: np.dtype("<i4")}


def columns_bytes(columns: InstanceColumns) -> bytes:
    """Header (count, L, P and the width of each column), then each column's values in 16 bits where they fit;
    word_continues, where there is one, as a byte per token (width 1), else nothing (width 0)."""
    values = [_narrowest(getattr(columns, f.name)) for f in fields(columns)[:-1]]
    continues = columns.word_continues
    values.append(np.zeros(0, np.uint8) if continues is None else continues.astype(np.uint8))
    widths = [c.dtype.itemsize if c.size or c is not values[-1] else 0 for c in values]
    header = np.array([len(columns), *columns.input_ids.shape[1:], *columns.positions.shape[1:], *widths], "<i8")
    return b"".join([header.tobytes(), *(c.tobytes() for c in values)])


def columns_from_bytes(data) -> InstanceColumns:
    names = [f.name for f in fields(InstanceColumns)]
    header = np.frombuffer(data, "<i8", 3 + len(names))
    n, width, predictions = (int(x) for x in header[:3])
    shapes = {"input_ids": (n, width), "positions": (n, predictions), "label_ids": (n, predictions)}
    shapes["word_continues"] = (n, width)
    offset, values = header.nbytes, []
    for name, itemsize in zip(names, header[3:].tolist()):
        if not itemsize:  # no word_continues
            values.append(None)
            continue
        shape = shapes.get(name, (n,))
        count = int(np.prod(shape))
        dtype = np.uint8 if itemsize == 1 else _WIDTHS[itemsize]
        values.append(np.frombuffer(data, dtype, count, offset).reshape(shape))
        offset += count * itemsize
    if values[-1] is not None:
        values[-1] = values[-1].astype(bool)
    return InstanceColumns(*values)


def _narrowest(values: np.ndarray) -> np.ndarray:
    """Non-negative ints as 16-bit where every value fits, otherwise 32-bit."""
    top = int(values.max(initial=0))
    if (values.size and int(values.min()) < 0) or top >= 1 << 31:
        raise ValueError(f"a column of instances holds a value outside [0, 2**31): {top}")
    return values.astype(_WIDTHS[2] if top < 1 << 16 else _WIDTHS[4])
