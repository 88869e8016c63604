"""The `bertcorpus` command line: one subcommand per job, Beam options passed through unchanged."""
from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import signal
import sys
import threading

from pipeline import flags
from pipeline.errors import user_message

DESCRIPTION = """Build BERT pretraining corpora with Apache Beam.

Beam pipeline options (--runner, --direct_running_mode, --direct_num_workers, --project, --region,
--temp_location, --dry_run, ...) are passed through to Beam unchanged, as Beam's own examples do.
Without --runner, jobs run locally on Beam's direct runner."""


# Commands whose extra flags belong to the command they run (a named job's), which checks them itself.
FORWARDING_COMMANDS = {"run", "graph"}


def _commands() -> dict:
    """name → (module, one-line help)."""
    return {
        "extract-wiki": ("pipeline.extract_wiki", "Wikipedia XML dumps → article prose as documents Parquet"),
        "extract-books": ("pipeline.extract_books", "book files (BookCorpus, Gutenberg, PG-19) → documents Parquet"),
        "vocab": ("pipeline.vocab", "documents → word counts → WordPiece vocab.txt (HF trainer, made deterministic)"),
        "create": ("pipeline.create", "documents → NSP pairs + masked-LM instances → sharded TFRecords"),
        "inspect": ("pipeline.inspect", "print decoded examples from a TFRecord file"),
        "stats": ("pipeline.stats", "a data card for documents, records or a run: stats.json, report.html, plots"),
        "run": ("pipeline.jobs", "run a named job from beam_jobs.yaml with a runner profile"),
        "demo": ("pipeline.demo", "run the chain on the real samples bundled in the repository"),
        "train": ("pipeline.train", "pretrain a BERT model on the TFRecords (Keras; TPU, GPUs or CPU)"),
        "graph": ("pipeline.graph", "draw a named job's Beam graph offline (.dot, and .png with graphviz)"),
    }


def job_commands() -> list[str]:
    """The commands a named job may run: every command but those that run named jobs themselves."""
    return [name for name in _commands() if name not in FORWARDING_COMMANDS]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only the chosen command's module is imported (so `create` never loads the trainer)."""
    return _build_parsers(command)[0]


def _build_parsers(command: str | None) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser | None]:
    """The parser, and the chosen command's own parser (None if the command is not known)."""
    import importlib

    parser = argparse.ArgumentParser(prog="bertcorpus", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = None
    for name, (module, summary) in _commands().items():
        p = sub.add_parser(name, help=summary, description=summary)
        p.add_argument("-v", "--verbose", action="store_true", help="show log messages from Beam and others")
        p.set_defaults(module=module)
        if name == command:
            loaded = importlib.import_module(module)
            loaded.add_arguments(p)
            if getattr(loaded, "ACCEPTS_BEAM_OPTIONS", True):
                p.epilog = "Beam pipeline options may follow, e.g. --runner DataflowRunner --dry_run=True."
            chosen = p
    return parser, chosen


def command_flags(command: str) -> set[str]:
    """The flags a command defines itself (--x and --no-x for booleans), without Beam's."""
    return _own_flags(_build_parsers(command)[1])


def _own_flags(command_parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in command_parser._actions for flag in action.option_strings if flag.startswith("--")}


def main(argv: list[str] | None = None) -> int:
    import importlib

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    verbose = bool({"-v", "--verbose"} & set(argv if argv is not None else sys.argv[1:]))
    # Set before Beam is imported: it warns about optional cloud libraries on import, which is noise here.
    logging.basicConfig(level=logging.INFO if verbose else logging.CRITICAL,
                        format="%(levelname)s %(name)s: %(message)s")
    words = argv if argv is not None else sys.argv[1:]
    command = next((w for w in words if not w.startswith("-")), None)
    parser, command_parser = _build_parsers(command)
    args, beam_args = parser.parse_known_args(argv)
    module = importlib.import_module(args.module)
    if not gc.isenabled():  # entry_point's process: what the modules made lives to the end, so freeze it
        gc.freeze()
        gc.enable()
    running = False
    try:
        if args.command not in FORWARDING_COMMANDS:
            flags.check_unknown_flags(beam_args, _own_flags(command_parser),
                                      getattr(module, "ACCEPTS_BEAM_OPTIONS", True))
        running = True
        return module.run(args, beam_args)
    except KeyboardInterrupt:
        with _second_ctrl_c_ignored():
            if running:
                _discard_staging(args, module, beam_args)
            print(f"bertcorpus {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 — the one place that turns errors into exit codes
        if running:
            _discard_staging(args, module, beam_args)
        message = user_message(e)
        if message is None:
            raise
        print(f"bertcorpus {args.command}: error: {message}", file=sys.stderr)
        return 2


@contextlib.contextmanager
def _second_ctrl_c_ignored():
    """Ctrl-C pressed again while the first one's clean-up runs would break it off and leave staged files."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _discard_staging(args, module, beam_args: list[str]) -> None:
    """A failed or interrupted local run leaves no staged files behind: on a full disk they would keep it full.
    (A remote job may still be running and using its staging.) The output itself may be what failed, so trouble
    here only leaves them in place."""
    if not getattr(module, "ACCEPTS_BEAM_OPTIONS", True) or args.command in FORWARDING_COMMANDS:
        return
    from pipeline import output, runners

    try:
        if not runners.is_local(runners.pipeline_options(beam_args)):
            return
        for name in ("output", "counts_dir"):
            path = getattr(args, name, None)
            if isinstance(path, str) and path:
                output.discard_staging(path)
    except Exception:  # noqa: BLE001 — the run's own error is the one to report
        logging.getLogger(__name__).info("staging left in place", exc_info=True)


def entry_point() -> None:
    # Loading Beam makes ~200,000 objects that live as long as the process, and no garbage. Loaded without
    # collections and then frozen (in main), they are never walked again: not while loading, not by later
    # collections, not at exit, where Python would otherwise visit them all once more.
    gc.disable()
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # pressed while an error was being reported, or as the command ended
        print("bertcorpus: interrupted", file=sys.stderr)
        sys.exit(130)
