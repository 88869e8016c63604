"""`bertcorpus order`: which batch holds which instance (and, with provenance, which documents), for every step and
rank of a loader's configuration, as Parquet, without reading a token (trainer/batch_order.py). It is what
PretrainingLoader serves for the same settings: the data order of a run, written before or after it trains."""

from __future__ import annotations

import time

from bertcorpus.pipeline.cli.shared_flags import positive_int

ACCEPTS_BEAM_OPTIONS = False


def add_arguments(parser) -> None:
    from bertcorpus.pipeline.cli.shared_flags import BooleanFlag
    from bertcorpus.trainer.loader import LAYOUTS

    parser.add_argument("--input", required=True, metavar="OUTPUT", help="a `bertcorpus create` output folder")
    parser.add_argument("--output", required=True, metavar="FILE", help="the order file to write (Parquet)")
    loader = parser.add_argument_group("the loader's configuration (as PretrainingLoader takes it)")
    loader.add_argument("--seq-length", type=positive_int, default=None, help="(default: the output's only one)")
    loader.add_argument("--split", choices=("train", "eval"), default="train", help="(default: %(default)s)")
    loader.add_argument("--batch-size", type=positive_int, default=None, help="instances per rank and step")
    loader.add_argument(
        "--tokens-per-batch", type=positive_int, default=None, help="with --layout packed: tokens per rank and step"
    )
    loader.add_argument("--layout", choices=LAYOUTS, default="reference", help="(default: %(default)s)")
    loader.add_argument("--world-size", type=positive_int, default=1, help="ranks (default: %(default)s)")
    loader.add_argument("--seed", type=int, default=0, help="the loader's seed (default: %(default)s)")
    loader.add_argument(
        "--epochs",
        default="0",
        metavar="E[,E...]",
        help="the epochs to write, e.g. 0,1,2 or 0-9 (default: %(default)s)",
    )
    loader.add_argument(
        "--drop-remainder", action=BooleanFlag, default=True, help="as the loader's drop_remainder (default: on)"
    )
    loader.add_argument(
        "--documents",
        action=BooleanFlag,
        default=None,
        help="each instance's documents beside it, from the output's provenance (default: where it has some)",
    )


def parse_epochs(text: str) -> list[int]:
    """'0,1,2' or '0-2' (or both, comma-separated) → [0, 1, 2]."""
    epochs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, _, last = part.partition("-")
        try:
            lo, hi = int(first), int(last or first)
        except ValueError:
            raise ValueError(f"--epochs wants numbers such as 0,1,2 or 0-9, not {text!r}") from None
        if lo < 0 or hi < lo:
            raise ValueError(f"--epochs {part!r}: need 0 <= first <= last")
        epochs += range(lo, hi + 1)
    if not epochs:
        raise ValueError("--epochs is empty")
    return epochs


def create_manifest(folder: str) -> dict:
    """The manifest of a create output, or one line saying why the folder is none."""
    import json

    from bertcorpus.pipeline.errors import UserError
    from bertcorpus.trainer.storage import join, read_bytes

    try:
        manifest = json.loads(read_bytes(join(folder, "manifest.json")))
    except FileNotFoundError:
        raise UserError(f"{folder} has no manifest.json: not a finished `bertcorpus create` output") from None
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read {folder}/manifest.json: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("job") != "create":
        raise UserError(f"{folder} is not a `bertcorpus create` output")
    return manifest


def only_seq_length(folder: str, manifest: dict) -> int:
    from bertcorpus.pipeline.errors import UserError

    lengths = sorted(int(out["max_seq_length"]) for out in (manifest.get("outputs") or {}).values())
    if len(lengths) != 1:
        raise UserError(f"{folder} holds the seq lengths {', '.join(map(str, lengths))}: choose one with --seq-length")
    return lengths[0]


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline.cli.job_skeleton import print_summary
    from bertcorpus.pipeline.errors import UserError
    from bertcorpus.pipeline.sinks import output
    from bertcorpus.trainer.loader import PretrainingLoader

    started = time.time()
    epochs = parse_epochs(args.epochs)
    manifest = create_manifest(args.input)
    if manifest.get("version") != output.TOOL_VERSION:
        raise UserError(
            f"{args.input} was made by bertcorpus {manifest.get('version')}: its batches are in the order of that "
            f"version's loader, which this one ({output.TOOL_VERSION}) does not promise to keep; write the order with "
            "the version that made it, or create the output again"
        )
    seq_length = args.seq_length or only_seq_length(args.input, manifest)
    loader = PretrainingLoader(
        args.input,
        seq_length=seq_length,
        split=args.split,
        batch_size=args.batch_size if args.layout != "packed" else None,
        tokens_per_batch=args.tokens_per_batch,
        world_size=args.world_size,
        seed=args.seed,
        epoch=epochs[0],
        drop_remainder=args.drop_remainder,
        layout=args.layout,
    )
    rows = loader.write_batch_order(args.output, epochs, args.documents)
    steps = sum(len(loader.plan_of(e)) for e in epochs)
    print_summary(
        "order",
        [
            ("input", f"{args.input} seq{seq_length} {args.split}"),
            ("epochs", ", ".join(map(str, epochs))),
            ("steps", f"{steps:,} × {args.world_size} rank{'s' * (args.world_size != 1)}"),
            ("rows", f"{rows:,} (an instance of a batch each)"),
            ("documents", "yes" if (args.documents is not False and loader.dataset.provenance) else "no"),
            ("output", args.output),
            ("time", f"{time.time() - started:.1f} s"),
        ],
    )
    return 0
