"""Book files for `extract-books`: which files of an input are books, their metadata.csv tables, and their bytes.

Every path goes through Beam's FileSystems, so local and remote inputs (gs://, s3://) are listed and read alike.
Reading never raises on a damaged book: a file that cannot be had comes back as a BookRejection that says why.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import hashlib
import io
import os
import re

from apache_beam.io.filesystems import CompressionTypes, FileSystems

from bertcorpus.pipeline.inputs.discovery import local_glob, local_kind, local_tree, refuse_unreadable, remote_matches
from bertcorpus.pipeline.inputs.formats import InputError
from bertcorpus.pipeline.inputs.streams import ReadProgress
from bertcorpus.pipeline.sinks import output
from bertcorpus.transforms.book_decoding import BookRejection
from bertcorpus.transforms.compression import ZstdFrames

MIB = 2**20
BOOK_EXTENSIONS = (".txt", ".text", ".parquet")  # what a directory is searched for; named files are read whatever
COMPRESSIONS = (".gz", ".bz2", ".zst")
METADATA_NAME = "metadata.csv"
# What an extraction run (extract-books, extract-wiki) and stats write into their output directory. An output
# directory may be an input directory or lie inside one, and a rerun would then list the earlier run's files:
# they are never books, so every listing leaves them out and the command says how many it left.
RUN_OUTPUT = re.compile(
    r"documents-\d{5,}-of-\d{5,}\.parquet|errors-\d{5,}-of-\d{5,}\.jsonl|manifest\.json|"
    r"stats\.json|report\.html"
)


def _strip_compression(name: str) -> str:
    lower = name.lower()
    return next((name[: -len(s)] for s in COMPRESSIONS if lower.endswith(s)), name)


def book_id(path: str) -> str:
    """`books:<stem>`: the file name without its compression suffix and its .txt/.text/.parquet extension."""
    stem = _strip_compression(os.path.basename(path))
    stem = next((stem[: -len(e)] for e in BOOK_EXTENSIONS if stem.lower().endswith(e)), stem)
    return f"books:{stem}"


def _is_book_name(path: str, base: str) -> bool:
    """A book file found below base: a book extension, and no hidden file or directory on the way."""
    parts = path[len(base) :].split("/")
    return not any(p.startswith(".") for p in parts) and _strip_compression(parts[-1]).lower().endswith(BOOK_EXTENSIONS)


def is_run_output(path: str) -> bool:
    return RUN_OUTPUT.fullmatch(os.path.basename(path)) is not None


def _is_metadata(path: str) -> bool:
    return os.path.basename(path).lower() == METADATA_NAME


def _match(pattern: str) -> list[tuple[str, int]]:
    return [
        (m.path, m.size_in_bytes) for m in FileSystems.match([pattern])[0].metadata_list if not m.path.endswith("/")
    ]


def _remote_listing(pattern: str) -> tuple[bool, list[tuple[str, int]]]:
    """(whether the pattern names directories, the (path, size) of the files it stands for). An object is taken by
    its name before that name is read as a pattern; a name that matches no object is a directory."""
    if not pattern.endswith("/"):
        found = remote_matches(pattern, _match)
        if found or output.has_glob(pattern):
            return False, found
    return True, _match(pattern.rstrip("/") + "/**")


def _local_listing(pattern: str) -> tuple[bool, list[tuple[str, int]]]:
    """The same for a local pattern, whose directories are local folders. A name that exists is taken as it is,
    glob characters and all. A broken symbolic link among the files found is listed with no bytes, as a book
    that cannot be read (a dead-letter record); one named itself, and a FIFO, a socket or a device, is refused."""
    name = os.path.abspath(pattern)
    if os.path.lexists(name):
        kind = local_kind(name)
        if kind != "folder":
            refuse_unreadable(name, kind)
            return False, [(name, os.path.getsize(name))]
        directory, base, entries = True, name.rstrip("/") + "/", local_tree(name)
    elif not output.has_glob(name):
        return pattern.endswith("/"), []
    else:
        directory, base = pattern.endswith("/"), output.glob_folder(name + "/")
        entries = local_glob(name + "/**" if directory else name)
    found = []
    for path, kind in entries:
        if directory and not (_is_metadata(path) or _is_book_name(path, base)):
            continue  # not a book by its name, whatever it is
        if kind == "file":
            found.append((path, os.path.getsize(path)))
        elif kind == "broken_symlink":
            found.append((path, 0))
        elif kind != "folder":
            refuse_unreadable(path, kind)
    return directory, found


def list_inputs(pattern: str) -> tuple[list[tuple[str, int]], list[str], list[str]]:
    """A file, a glob, a directory or a glob of directories → ((path, size) of its book files, the metadata.csv
    files among them, the outputs of an earlier run that were left out).

    A directory is searched at every depth for book files by name (*.txt, *.text, *.parquet, compressed or not;
    hidden ones left out), so that notes and images beside the books are not read as books; a file that is named
    or matched by a glob is read whatever its name, except the files a bertcorpus run writes (RUN_OUTPUT). A
    pattern ending in '/' names directories (pg19/*/), and so does a remote name that matches no object, since
    object stores have no directories. A name that exists is taken as it is before it is read as a pattern
    (books[1].txt). Local listings follow _local_listing: a broken link becomes a book that cannot be read, and a
    FIFO, socket or device is refused (InputError).
    """
    directory, found = (_remote_listing if output.is_remote(pattern) else _local_listing)(pattern)
    if directory and output.is_remote(pattern):
        base = output.glob_folder(pattern.rstrip("/") + "/")
        found = [(p, s) for p, s in found if _is_metadata(p) or _is_book_name(p, base)]
    earlier = sorted(p for p, _ in found if is_run_output(p))
    if earlier and not directory and not output.has_glob(pattern):
        raise InputError(f"{pattern} is an output of a bertcorpus run, not a book")
    books = sorted({(p, s) for p, s in found if not _is_metadata(p) and not is_run_output(p)})
    return books, sorted({p for p, _ in found if _is_metadata(p)}), earlier


def beside(path: str) -> list[str]:
    """Where a metadata.csv for this book may lie: its directory, then the one above (pg19/train/x.txt has
    pg19/metadata.csv)."""
    directory = os.path.dirname(path)
    parents = [
        d for d in dict.fromkeys((directory, os.path.dirname(directory))) if d and ("://" in d or "://" not in path)
    ]  # not above the bucket of gs://bucket/x.txt
    return [FileSystems.join(d, METADATA_NAME) for d in parents]


def read_metadata(data: bytes) -> dict[str, tuple[str | None, str | None]]:
    """PG-19's metadata.csv (id, title, year, url; a header row is allowed) → {id: (title, url)}. Bytes that are not
    UTF-8 become U+FFFD and rows of fewer than two fields are passed over; what the csv module cannot split
    raises csv.Error, naming the line."""
    table = {}
    reader = csv.reader(io.StringIO(data.decode("utf-8-sig", errors="replace"), newline=None))  # CR, LF or CRLF
    try:
        for row in reader:
            if len(row) < 2 or row[0].strip().lower() in ("_id", "id", "book_id"):
                continue
            url = row[3].strip() if len(row) > 3 and "://" in row[3] else None
            table[row[0].strip()] = (row[1].strip() or None, url)
    except csv.Error as e:
        raise csv.Error(f"line {reader.line_num}: {e}") from None
    return table


def metadata_table(path: str) -> dict[str, tuple[str | None, str | None]]:
    """The table of the metadata.csv at path; one that cannot be read is the user's to repair (InputError)."""
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            return read_metadata(f.read())
    except csv.Error as e:
        raise InputError(f"{path} is not a metadata CSV: {e}") from None
    except OSError as e:
        raise InputError(f"cannot read the metadata file {path}: {e}") from None


def _read_limited(stream, limit: int) -> bytes:
    """At most limit + 1 bytes, so that the caller can tell a file over the limit without reading all of it."""
    chunks, size = [], 0
    while size <= limit:
        chunk = stream.read(min(MIB, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _read_zstd(raw: bytes, limit: int) -> bytes:
    """Every frame of a .zst file, at most limit + 1 bytes; a frame cut short raises EOFError, as gzip and bz2 do."""
    frames = ZstdFrames(io.BytesIO(raw))
    data = _read_limited(io.BufferedReader(frames, MIB), limit)
    if frames.cut:
        raise EOFError("the zstd stream ends inside a frame")
    return data


def _decompress(raw: bytes, path: str, limit: int) -> bytes:
    """The file's bytes, decompressed by the suffix of its name; at most limit + 1 bytes. A file of no bytes is
    empty, whatever its suffix."""
    name = path.lower()
    if not raw:
        return raw
    if name.endswith(".gz"):
        return _read_limited(gzip.GzipFile(fileobj=io.BytesIO(raw)), limit)
    if name.endswith(".bz2"):
        return _read_limited(bz2.BZ2File(io.BytesIO(raw)), limit)
    if name.endswith(".zst"):
        return _read_zstd(raw, limit)
    return raw


def _parquet_lines(raw: bytes) -> bytes | BookRejection:
    """An HF bookcorpus Parquet file (one line or sentence per row, in a `text` column) → its lines, as UTF-8."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(io.BytesIO(raw))
        schema = parquet.schema_arrow
        if "text" not in schema.names:
            return BookRejection("bad_parquet", f"no text column (has {', '.join(schema.names)})")
        if not (pa.types.is_string(schema.field("text").type) or pa.types.is_large_string(schema.field("text").type)):
            return BookRejection("bad_parquet", f"the text column holds {schema.field('text').type}, not strings")
        lines = parquet.read(columns=["text"]).column("text").to_pylist()
    except Exception as e:  # pyarrow raises several types for a damaged file
        return BookRejection("bad_parquet", f"not a readable Parquet file: {e}")
    return "\n".join(line for line in lines if line is not None).encode("utf-8")


def load_book(path: str, size: int, max_bytes: int) -> tuple[dict, bytes | BookRejection]:
    """A book file and its listed size → (its size and sha256 as stored, its bytes decompressed or why they cannot
    be had).

    Never raises: a file that cannot be opened, a damaged archive and a file over the size limit are rejections,
    like the ones decode_book makes."""
    source = {"path": path, "size": size}
    too_large = BookRejection("too_large", f"over --max-book-mb ({max_bytes:,} bytes)")
    if size > max_bytes:
        return source, too_large
    try:
        with (
            FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as opened,
            ReadProgress(opened) as f,
        ):
            raw = _read_limited(f, max_bytes)
    except Exception as e:  # each filesystem raises its own types
        return source, BookRejection("read_error", f"cannot read the file: {type(e).__name__}: {e}")
    if len(raw) > max_bytes:  # it grew since it was listed
        return source, too_large
    source.update(size=len(raw), sha256=hashlib.sha256(raw).hexdigest())
    try:
        data = _decompress(raw, path, max_bytes)
    except Exception as e:  # gzip, bz2 and zstandard each raise their own types for damaged data
        return source, BookRejection("read_error", f"cannot decompress: {type(e).__name__}: {e}")
    if path.lower().endswith(".parquet"):
        data = _parquet_lines(data)
    if isinstance(data, bytes) and len(data) > max_bytes:
        return source, too_large
    return source, data
