"""`bertcorpus inspect FILE`: decoded examples of a shard that create wrote.

    .tfrecord ─ records as stored: tokens with [MASK], segments, masked positions and labels
    .parquet  ─ instances as stored, unmasked: tokens, segments, label; with --epoch, also the masks that
                trainer.loader draws for them in that epoch (a function of seed, epoch and instance only)
    .mds      ─ the same instances as MosaicML streaming shards, shown as the Parquet ones

A shard lies inside its output, OUT/seq{L}/FILE (OUT/seq{L}/{split}/FILE for MDS), whose manifest.json says what
label 1 means and which vocab the records were made with, and for the instances forms the shard's split and place
among the split's instances and the masking settings. Instances are read only inside their output; a TFRecord
anywhere (a reference file too, with --vocab). Tokens in the masked positions' list are quoted (JSON strings), so
that a punctuation token such as "," reads as itself.
"""

from __future__ import annotations

import itertools
import json
import os
import posixpath

from apache_beam.io.filesystems import FileSystems

from bertcorpus.pipeline.stats.example_format import format_example, format_instance, format_masks
from bertcorpus.transforms.manifest_paths import manifest_paths_problem
from bertcorpus.transforms.tfrecord import FEATURE_NAMES, is_frame_header, iter_tfrecords, parse_example
from bertcorpus.wordpiece.tokenizer_file import TokenizerFile, TokenizerFileError, read_tokenizer_source
from bertcorpus.wordpiece.vocab import Vocab

ACCEPTS_BEAM_OPTIONS = False
MANIFEST = "manifest.json"
SEARCH_BATCH = 4096  # instances per loader batch while finding the batches that hold the instances shown
SHARD_SUFFIXES = (".tfrecord", ".parquet", ".mds")


def add_arguments(parser) -> None:
    parser.add_argument(
        "file",
        help="a .tfrecord, .parquet or .mds shard written by `bertcorpus create` (TFRecords of the reference too)",
    )
    parser.add_argument(
        "--vocab",
        help="the vocab.txt the records were made with; needed for a TFRecord outside a create output "
        "(default: the one the output's manifest names, or for Parquet and MDS the output's own copy)",
    )
    parser.add_argument("-n", "--num", type=int, default=3, help="how many records to show (default: 3)")
    parser.add_argument("--skip", type=int, default=0, help="records to skip first (default: 0)")
    parser.add_argument(
        "--epoch",
        type=int,
        metavar="E",
        help="Parquet and MDS: also show the masks that bertcorpus.trainer.loader draws for these instances in epoch E",
    )
    parser.add_argument(
        "--seed", type=int, metavar="S", help="Parquet, with --epoch: the loader's seed (default: the loader's own, 0)"
    )
    parser.add_argument(
        "--provenance",
        action="store_true",
        help="also show where each segment's tokens came from: the pieces of document text, with their documents' "
        "titles and sources, read from the inputs the manifest lists (an output made with create --provenance)",
    )


# ---------------------------------------------------------------------------------------------- the output around


def _depth(path: str) -> int:
    """How many folders down the output a shard lies: seq{L}/FILE, or seq{L}/{split}/FILE for MDS."""
    return 3 if path.endswith(".mds") else 2


def _output_of(path: str) -> str:
    """OUT for OUT/seq{L}/FILE (OUT/seq{L}/{split}/FILE for MDS), local or remote."""
    remote = "://" in path
    folder = path if remote else os.path.abspath(path)
    for _ in range(_depth(path)):
        folder = posixpath.dirname(folder) if remote else os.path.dirname(folder)
    return folder


def _join(directory: str, name: str) -> str:
    return posixpath.join(directory, name) if "://" in directory else os.path.join(directory, name)


def read_manifest(output: str) -> dict | None:
    """The output's manifest, or None when there is none."""
    from bertcorpus.pipeline.errors import UserError

    path = _join(output, MANIFEST)
    if not FileSystems.exists(path):
        return None
    try:
        with FileSystems.open(path, compression_type="uncompressed") as f:
            manifest = json.loads(f.read())
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read {path}: {e}") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("outputs"), dict):
        raise UserError(f"{path} is not the manifest of a create output")
    if problem := manifest_paths_problem(manifest):
        raise UserError(f"{path} is not a manifest bertcorpus reads: {problem}")
    return manifest


def find_shard(manifest: dict, path: str) -> tuple[str, int, str, int, int, dict] | None:
    """(seq name, seq length, split, instances before this shard in the split's manifest order, instances of the
    split, the shard's manifest entry) of the file."""
    parts = path.replace(os.sep, "/").split("/")[-_depth(path) :]
    seq, name = parts[0], "/".join(parts)
    entry = manifest["outputs"].get(seq)
    if not isinstance(entry, dict):
        return None
    for split in ("train", "eval"):
        shards = (entry.get(split) or {}).get("shards", [])
        counts = [int(shard.get("records", 0)) for shard in shards]
        for number, shard in enumerate(shards):
            if shard.get("path") == name:
                return seq, int(entry["max_seq_length"]), split, sum(counts[:number]), sum(counts), shard
    return None


def check_unchanged(path: str, shard: dict, hashed: bool = False) -> None:
    """UserError where a shard is not the file its manifest entry lists: another size (cut short, added to), or,
    with `hashed`, another sha256 (damaged in place). The hash is taken only where the file's contents look wrong,
    so that a look at a few records of a large remote shard does not download it whole."""
    import hashlib

    from bertcorpus.pipeline.errors import UserError

    listed = shard.get("bytes")
    size = FileSystems.get_filesystem(path).size(path) if "://" in path else os.path.getsize(path)
    if listed is not None and size != listed:
        why = f"it has {size:,} bytes, the manifest lists {listed:,}"
    elif hashed and shard.get("sha256"):
        digest = hashlib.sha256()
        with FileSystems.open(path, compression_type="uncompressed") as f:
            while chunk := f.read(8 << 20):
                digest.update(chunk)
        if digest.hexdigest() == shard["sha256"]:
            return
        why = "its sha256 differs from the manifest's"
    else:
        return
    raise UserError(f"{path} is not the file that `create` wrote ({why}); recreate the output or restore the file")


def _manifest_listing(path: str) -> dict | None:
    """The manifest of the create output that lists this TFRecord file, if it lies in one: a file elsewhere (the
    reference's, a copy) is read all the same, as records of the reference's NSP form."""
    from bertcorpus.pipeline.errors import UserError

    try:
        manifest = read_manifest(_output_of(path))
    except UserError:
        return None
    return manifest if manifest is not None and find_shard(manifest, path) else None


def manifest_vocab(output: str, manifest: dict, instances: bool) -> str:
    """The vocab an output's records were made with: the copy that an output of instances (Parquet, MDS) holds, else
    the file its manifest names, which must still hold the bytes it had then (its sha256)."""
    import hashlib

    from bertcorpus.pipeline.errors import UserError

    tokenizer = manifest.get("tokenizer")
    if isinstance(tokenizer, dict) and tokenizer.get("copy"):  # every form of a tokenizer.json's output holds a copy
        return _join(output, str(tokenizer["copy"]))
    entry = manifest.get("vocab") if isinstance(manifest.get("vocab"), dict) else {}
    if instances:
        return _join(output, str(entry.get("copy") or "vocab.txt"))
    path, named_in = entry.get("path"), _join(output, MANIFEST)
    if not path or not FileSystems.exists(path):
        missing = f"names the vocab {path}, which is not there" if path else "names no vocab"
        raise UserError(f"{named_in} {missing}; give --vocab: the vocab.txt the records were made with")
    with FileSystems.open(path, compression_type="uncompressed") as f:
        sha256 = hashlib.sha256(f.read()).hexdigest()
    if entry.get("sha256") and sha256 != entry["sha256"]:
        raise UserError(
            f"the vocab {path} has changed since {named_in} was written (its sha256 differs); give --vocab: the "
            "vocab.txt the records were made with"
        )
    return path


def _label_kind(manifest: dict | None) -> str:
    form = (manifest or {}).get("form")
    return form.get("label", "random_next") if isinstance(form, dict) else "random_next"


# ---------------------------------------------------------------------------------------------- the command


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline.errors import UserError

    if args.num < 0 or args.skip < 0:
        raise UserError("--num and --skip must be >= 0")
    if args.epoch is not None and not 0 <= args.epoch < 2**63:
        raise UserError("--epoch must be >= 0 and below 2**63")
    if args.seed is not None and args.epoch is None:
        raise UserError("--seed chooses the loader's masks; give --epoch with it")
    if not FileSystems.exists(args.file):
        raise UserError(f"no such file: {args.file}")
    if not args.file.endswith(SHARD_SUFFIXES) and not starts_as_tfrecord(args.file):
        raise UserError(
            f"{args.file} is not a shard: inspect reads the .tfrecord, .parquet and .mds shards that create writes "
            "(and TFRecords of the reference under any name)"
        )
    if args.file.endswith((".parquet", ".mds")):
        return inspect_instances(args)
    if args.epoch is not None:
        raise UserError(
            "TFRecords hold the masks create drew; --epoch shows the masks drawn at load time for "
            "Parquet or MDS instances (create --masking dynamic)"
        )
    manifest = _manifest_listing(args.file)
    if not args.vocab and manifest is None:
        raise UserError("give --vocab: the vocab.txt the records were made with")
    if args.provenance and manifest is None:
        raise UserError(f"--provenance: {args.file} lies in no create output, whose manifest lists its provenance")
    vocab = load_vocab(args.vocab or manifest_vocab(_output_of(args.file), manifest, instances=False), manifest)
    records = read_records(args.file, args.skip, args.num)
    label_kind = _label_kind(manifest)
    sources = shown_provenance(args, manifest, args.file, len(records)) if args.provenance else None
    for n, record in enumerate(records, start=args.skip):
        features = decoded_example(record, n, len(vocab))
        print(f"record {n}:")
        print(format_example(features, vocab.tokens, label_kind))
        if sources is not None:
            print("\n".join(sources(n)))
    if not records:
        print("no records")
    return 0


def load_vocab(path: str, manifest: dict | None) -> Vocab | TokenizerFile:
    """The vocab.txt, or for an output made with a tokenizer.json its tokenizer (the copy's folder, its special
    tokens as the manifest names them)."""
    from bertcorpus.pipeline.errors import UserError

    tokenizer = (manifest or {}).get("tokenizer")
    if not isinstance(tokenizer, dict):
        return Vocab.load(path)
    try:
        return TokenizerFile(read_tokenizer_source(path, tokenizer.get("specials") or {}))
    except TokenizerFileError as e:
        raise UserError(str(e)) from None


def shown_provenance(args, manifest: dict, path: str, shown: int):
    """A function of a record's number that gives the lines of its provenance: its pieces and their source text."""
    from bertcorpus.pipeline.errors import UserError
    from bertcorpus.pipeline.stats.provenance_text import documents_named, provenance_lines
    from bertcorpus.trainer.provenance_files import shard_provenance
    from bertcorpus.trainer.record_files import LoaderError, Shard

    place = find_shard(manifest, path)
    if place is None or not (manifest.get("config") or {}).get("provenance"):
        raise UserError(f"--provenance: {path} has none (its output was made without create --provenance)")
    entry = place[-1]
    output = _output_of(path)
    beside = entry.get("provenance")
    shard = Shard(
        path,
        entry["path"],
        int(entry["records"]),
        entry["sha256"],
        entry.get("bytes"),
        (_join(output, beside["path"]), beside["sha256"]) if beside else None,
    )
    try:
        pieces = shard_provenance(manifest["form"]["file_format"], shard)[args.skip : args.skip + shown]
    except LoaderError as e:
        raise UserError(str(e)) from None
    documents = documents_named(manifest, {p["document"] for row in pieces for p in row})
    return lambda n: provenance_lines(pieces[n - args.skip], documents)


def starts_as_tfrecord(path: str) -> bool:
    """Whether a file named as no shard is a TFRecord all the same (the reference names its own
    tf_examples.tfrecord-00000-of-00010): its first frame's length CRC holds. An empty file is one of no records;
    a file that cannot be opened is left for the reader to name its trouble."""
    try:
        with FileSystems.open(path, compression_type="uncompressed") as f:
            head = f.read(12)
    except OSError:
        return True
    return not head or is_frame_header(head)


def read_records(path: str, skip: int, num: int) -> list[bytes]:
    from bertcorpus.pipeline.errors import UserError

    try:
        with FileSystems.open(path, compression_type="uncompressed") as f:
            return list(itertools.islice(iter_tfrecords(f), skip, skip + num))
    except ValueError as e:
        raise UserError(f"{path}: {e}") from None
    except OSError as e:  # a directory, a file it may not read
        raise UserError(f"{path}: {e.strerror or e}") from None


FEATURES = frozenset(FEATURE_NAMES)


def decoded_example(record: bytes, n: int, vocab_size: int) -> dict[str, list]:
    """The record's features, checked to be a pretraining example whose ids the vocab has."""
    from bertcorpus.pipeline.errors import UserError

    try:
        features = parse_example(record)
    except (IndexError, ValueError, UnicodeDecodeError):
        raise UserError(f"record {n} is not a tf.train.Example") from None
    missing = FEATURES - features.keys()
    if missing:
        raise UserError(f"record {n} is not a pretraining example (lacks {', '.join(sorted(missing))})")
    beyond = max(features["input_ids"] + features["masked_lm_ids"], default=0)
    if beyond >= vocab_size:
        raise UserError(
            f"record {n} has token id {beyond}, beyond the {vocab_size:,} tokens of --vocab; "
            "give the vocab the records were made with"
        )
    return features


INSTANCE_COLUMNS = ("input_ids", "segment_b_start", "next_sentence_label", "length")


def read_mds_instances(path: str, skip: int, num: int) -> list[dict]:
    """Samples skip .. skip + num - 1 of an MDS shard of create's instances, as read_instances gives Parquet rows."""
    from bertcorpus.pipeline.errors import UserError
    from bertcorpus.transforms.instance_mds import MdsColumns, read_header, read_samples

    try:
        with FileSystems.open(path, compression_type="uncompressed") as f:
            data = f.read()
        samples, config = read_header(data)
        columns = MdsColumns.from_config(config)
        if columns not in MdsColumns.ours(("nsp", "none")) or config.get("compression"):
            raise UserError(
                f"{path} is not an uncompressed MDS shard of create's instances (columns "
                f"{', '.join(columns.names) or 'none'}, compression {config.get('compression')})"
            )
        first, stop = min(skip, samples), min(skip + num, samples)
        ids, starts, length, b_start, label, *_ = read_samples(data, first, stop, columns)
    except (ValueError, IndexError, TypeError, AttributeError) as e:  # not MDS, or damaged
        raise UserError(f"{path} is not a readable MDS shard: {e}") from None
    except OSError as e:  # a directory, a file it may not read
        raise UserError(f"{path}: {e.strerror or e}") from None
    return [
        {
            "input_ids": ids[starts[i] : starts[i] + length[i]].tolist(),
            "segment_b_start": int(b_start[i]),
            "next_sentence_label": int(label[i]),
            "length": int(length[i]),
        }
        for i in range(stop - first)
    ]


def read_instances(path: str, skip: int, num: int) -> list[dict]:
    """Rows skip .. skip + num - 1 of a Parquet shard of the instances form, reading only the row groups that hold
    them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bertcorpus.pipeline.errors import UserError

    try:
        with FileSystems.open(path, compression_type="uncompressed") as f:
            shard = pq.ParquetFile(f)
            missing = [c for c in INSTANCE_COLUMNS if c not in shard.schema_arrow.names]
            if missing:
                raise UserError(
                    f"{path} is not a Parquet file of instances (create --masking dynamic): it has no "
                    f"column {', '.join(missing)}"
                )
            meta, rows, first = shard.metadata, [], 0
            for group in range(meta.num_row_groups):
                size = meta.row_group(group).num_rows
                if first + size > skip and first < skip + num:
                    table = shard.read_row_group(group, columns=list(INSTANCE_COLUMNS))
                    low = max(skip - first, 0)
                    rows += table.slice(low, min(skip + num - first, size) - low).to_pylist()
                first += size
            return rows
    except pa.ArrowException as e:  # not Parquet, or damaged
        raise UserError(f"{path} is not a readable Parquet file: {str(e).splitlines()[0]}") from None
    except OSError as e:  # a directory, a file it may not read
        raise UserError(f"{path}: {e.strerror or e}") from None


def loader_masks(
    output: str, seq_length: int, split: str, split_instances: int, instances: list[int], epoch: int, seed: int | None
) -> tuple[dict[int, dict[str, list]], int]:
    """{instance: its features with the masks trainer.loader draws in that epoch}, and the seed used.

    A mask depends on (seed, epoch, instance) only, never on the batch: the loader's batches are searched for the
    instances, and only those that hold one are drawn."""
    import tempfile

    from bertcorpus.pipeline.errors import UserError
    from bertcorpus.trainer.loader import LoaderError, PretrainingLoader

    wanted, found = set(instances), {}
    with tempfile.TemporaryDirectory(prefix="bertcorpus-inspect-") as cache:  # leave no index cache behind
        try:
            # Without dropping a remainder, every instance is in some batch of the epoch.
            loader = PretrainingLoader(
                output,
                seq_length=seq_length,
                split=split,
                batch_size=min(SEARCH_BATCH, split_instances),
                epoch=epoch,
                drop_remainder=False,
                cache_dir=cache,
                **({} if seed is None else {"seed": seed}),
            )
            chosen_seed = loader.state_dict(0)["seed"]
            for i in range(len(loader)):
                ids = loader.batch_instances(i).tolist()
                hits = [k for k, instance in enumerate(ids) if instance in wanted and instance not in found]
                if not hits:
                    continue
                batch = loader[i]
                for k in hits:
                    found[ids[k]] = {name: values[k].tolist() for name, values in batch.items()}
                if len(found) == len(wanted):
                    break
        except LoaderError as e:
            raise UserError(str(e)) from None
    return found, chosen_seed


def inspect_instances(args) -> int:
    """A shard of instances (Parquet or MDS), inside its create output."""
    from bertcorpus.pipeline.errors import UserError

    output = _output_of(args.file)
    manifest = read_manifest(output)
    if manifest is None:
        where = "OUT/seq{L}/{split}/FILE" if args.file.endswith(".mds") else "OUT/seq{L}/FILE"
        raise UserError(
            f"{args.file}: no {MANIFEST} in {output}; a shard of instances is read inside the create output "
            f"it belongs to ({where}, with OUT/{MANIFEST})"
        )
    place = find_shard(manifest, args.file)
    if place is None:
        raise UserError(f"{args.file} is not a shard that {_join(output, MANIFEST)} lists")
    seq, seq_length, split, before, split_instances, shard = place
    check_unchanged(args.file, shard)
    vocab_path = args.vocab or manifest_vocab(output, manifest, instances=True)
    vocab = load_vocab(vocab_path, manifest)
    read = read_mds_instances if args.file.endswith(".mds") else read_instances
    rows = read(args.file, args.skip, args.num)
    label_kind = _label_kind(manifest)
    for n, row in enumerate(rows, start=args.skip):
        beyond = max(row["input_ids"], default=0)
        if beyond >= len(vocab):
            check_unchanged(args.file, shard, hashed=True)  # ids a damaged file holds are no fault of the vocab
            raise UserError(
                f"record {n} has token id {beyond}, beyond the {len(vocab):,} tokens of {vocab_path}; "
                "give the vocab the instances were made with"
            )
    instances = [before + n for n in range(args.skip, args.skip + len(rows))]
    masks, seed = (
        ({}, None)
        if args.epoch is None
        else loader_masks(output, seq_length, split, split_instances, instances, args.epoch, args.seed)
    )
    sources = shown_provenance(args, manifest, args.file, len(rows)) if args.provenance else None
    for n, row in enumerate(rows, start=args.skip):
        print(f"record {n} ({split} instance {before + n} of {seq}):")
        print(format_instance(row, vocab.tokens, label_kind))
        if args.epoch is not None:
            print(format_masks(masks[before + n], vocab.tokens, args.epoch, seed))
        if sources is not None:
            print("\n".join(sources(n)))
    if not rows:
        print("no records")
    return 0
