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


def run(args, beam_args: list[str]) -> int:
    from pipeline.errors import UserError

    vocab = Vocab.load(args.vocab)
    if not FileSystems.exists(args.file):
        raise UserError(f"no such file: {args.file}")
    with FileSystems.open(args.file, compression_type="uncompressed") as f:
        try:
            records = list(itertools.islice(iter_tfrecords(f), args.skip, args.skip + args.num))
        except ValueError as e:
            raise UserError(f"{args.file}: {e}") from None
    for n, record in enumerate(records, start=args.skip):
        features = parse_example(record)
        missing = {"input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                   "masked_lm_weights", "next_sentence_labels"} - features.keys()
        if missing:
            raise UserError(f"record {n} is not a pretraining example (lacks {', '.join(sorted(missing))})")
        print(f"record {n}:")
        print(format_example(features, vocab.tokens))
    if not records:
        print("no records")
    return 0
