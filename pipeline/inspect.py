"""`bertcorpus inspect FILE`: decoded examples — tokens with [MASK], segments, masked positions and labels."""
from __future__ import annotations

import itertools

from apache_beam.io.filesystems import FileSystems

from transforms.tfrecord import iter_tfrecords, parse_example
from wordpiece.vocab import Vocab

ACCEPTS_BEAM_OPTIONS = False


def add_arguments(parser) -> None:
    parser.add_argument("file", help="a .tfrecord file written by `bertcorpus create` (or the reference)")
    parser.add_argument("--vocab", required=True, help="the vocab.txt the records were made with")
    parser.add_argument("-n", "--num", type=int, default=3, help="how many records to show (default 3)")
    parser.add_argument("--skip", type=int, default=0, help="records to skip first")


def format_example(features: dict[str, list], tokens: tuple[str, ...]) -> str:
    length = sum(features["input_mask"])
    ids = features["input_ids"][:length]
    segments = features["segment_ids"][:length]
    weights = features["masked_lm_weights"]
    positions = [p for p, w in zip(features["masked_lm_positions"], weights) if w > 0]
    originals = [tokens[i] for i, w in zip(features["masked_lm_ids"], weights) if w > 0]
    seg_a = " ".join(tokens[i] for i, s in zip(ids, segments) if s == 0)
    seg_b = " ".join(tokens[i] for i, s in zip(ids, segments) if s == 1)
    label = features["next_sentence_labels"][0]
    predictions = ", ".join(f"{p}:{tokens[ids[p]]}→{o}" for p, o in zip(positions, originals))
    return "\n".join([
        f"  tokens ({length}): {seg_a} || {seg_b}",
        f"  segment A {segments.count(0)} tokens, segment B {segments.count(1)} tokens",
        f"  next_sentence_label: {label} ({'random next' if label == 1 else 'actual next'})",
        f"  masked ({len(positions)}): {predictions}",
    ])


FEATURES = {"input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
            "next_sentence_labels"}


def run(args, beam_args: list[str]) -> int:
    from pipeline.errors import UserError

    if args.num < 0 or args.skip < 0:
        raise UserError("--num and --skip must be >= 0")
    vocab = Vocab.load(args.vocab)
    records = read_records(args.file, args.skip, args.num)
    for n, record in enumerate(records, start=args.skip):
        features = decoded_example(record, n, len(vocab))
        print(f"record {n}:")
        print(format_example(features, vocab.tokens))
    if not records:
        print("no records")
    return 0


def read_records(path: str, skip: int, num: int) -> list[bytes]:
    from pipeline.errors import UserError

    if not FileSystems.exists(path):
        raise UserError(f"no such file: {path}")
    try:
        with FileSystems.open(path, compression_type="uncompressed") as f:
            return list(itertools.islice(iter_tfrecords(f), skip, skip + num))
    except ValueError as e:
        raise UserError(f"{path}: {e}") from None
    except OSError as e:  # a directory, a file it may not read
        raise UserError(f"{path}: {e.strerror or e}") from None


def decoded_example(record: bytes, n: int, vocab_size: int) -> dict[str, list]:
    """The record's features, checked to be a pretraining example whose ids the vocab has."""
    from pipeline.errors import UserError

    try:
        features = parse_example(record)
    except (IndexError, ValueError, UnicodeDecodeError):
        raise UserError(f"record {n} is not a tf.train.Example") from None
    missing = FEATURES - features.keys()
    if missing:
        raise UserError(f"record {n} is not a pretraining example (lacks {', '.join(sorted(missing))})")
    beyond = max(features["input_ids"] + features["masked_lm_ids"], default=0)
    if beyond >= vocab_size:
        raise UserError(f"record {n} has token id {beyond}, beyond the {vocab_size:,} tokens of --vocab; "
                        "give the vocab the records were made with")
    return features
