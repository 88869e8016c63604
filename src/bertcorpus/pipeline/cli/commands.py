"""The `bertcorpus` command line: one subcommand per job, Beam options passed through unchanged.

entry_point, the installed command, also answers what concerns the process rather than a command: the signals that
stop it, and standard streams that are closed, full, read by no one or unable to encode (docs/command_line.md)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import signal
import sys
import threading
import warnings

from bertcorpus.pipeline.cli import unknown_flags
from bertcorpus.pipeline.errors import (
    STOP_SIGNALS,
    RunnerJobFailed,
    UserError,
    has_undecoded_bytes,
    not_text_message,
    raise_stop,
    stopped,
    user_message,
)

DESCRIPTION = """Build BERT pretraining corpora with Apache Beam: Wikipedia dumps and book files → documents → a
WordPiece vocab → pretraining records as TFRecords, Parquet, MDS or Megatron indexed datasets, and
the loader that reads them. `bertcorpus demo` runs the whole chain on real samples installed with
bertcorpus.

Beam pipeline options (--runner, --direct_running_mode, --direct_num_workers, --project, --region,
--temp_location, --dry_run, ...) are passed through to Beam unchanged, as Beam's own examples do.
Without --runner, jobs run locally on Beam's direct runner."""

BEAM_OPTIONS_EPILOG = "Beam pipeline options may follow, e.g. --runner DataflowRunner --dry_run=True."
VERBOSE_FLAGS = ("-v", "--verbose")

# Commands whose extra flags belong to the command they run (a named job's), which checks them itself.
FORWARDING_COMMANDS = {"run", "graph", "plan"}
# The jobs `bertcorpus plan` sizes, alone or as a chain.
PLANNED_COMMANDS = ("extract-wiki", "extract-books", "dedup", "vocab", "create")
# Commands that are no step of a corpus: a named job never runs them (a cluster is a service that runs until stopped).
SERVICE_COMMANDS = {"cluster"}
# The flags that name where a command writes: a special file there is refused as a place to write.
OUTPUT_FLAGS = {"--output", "--counts-dir", "--output-dir", "--state-dir"}


def _commands() -> dict:
    """name → (module, one-line help)."""
    return {
        "extract-wiki": (
            "bertcorpus.pipeline.extract.wiki_command",
            "Wikipedia XML dumps → article prose as documents Parquet",
        ),
        "extract-books": (
            "bertcorpus.pipeline.extract.books_command",
            "book files (BookCorpus, Gutenberg, PG-19) → documents Parquet",
        ),
        "dedup": (
            "bertcorpus.pipeline.dedup.command",
            "documents sources in priority order → the same without exact and near copies or benchmark text, "
            "each removal on a ledger",
        ),
        "vocab": (
            "bertcorpus.pipeline.vocab.command",
            "documents → word counts → a deterministic WordPiece vocab.txt with tokenizer.json beside it, or a "
            "byte-level BPE's or Unigram's tokenizer folder (--model)",
        ),
        "create": (
            "bertcorpus.pipeline.create.command",
            "documents → NSP/SOP pairs or packed sentences + masked-LM instances → sharded TFRecords, Parquet, "
            "MDS or Megatron indexed datasets",
        ),
        "inspect": (
            "bertcorpus.pipeline.stats.inspect_command",
            "print decoded examples of a TFRecord, Parquet or MDS shard",
        ),
        "order": (
            "bertcorpus.pipeline.cli.order_command",
            "which batch holds which instance (and documents), every step and rank of a loader's settings, as Parquet",
        ),
        "stats": (
            "bertcorpus.pipeline.stats.command",
            "a data card for documents, records or a run: stats.json, report.html, plots",
        ),
        "plan": (
            "bertcorpus.pipeline.plan.command",
            "size and price a run before it runs: documents, shards, instances, CPU, memory, shuffle, output, cost",
        ),
        "run": ("bertcorpus.pipeline.cli.run_command", "run a named job from beam_jobs.yaml with a runner profile"),
        "demo": (
            "bertcorpus.pipeline.cli.demo_command",
            "run the whole chain on the real samples installed with bertcorpus",
        ),
        "train": (
            "bertcorpus.pipeline.cli.train_command",
            "pretrain a BERT model on a create output (Keras on TensorFlow, JAX or PyTorch)",
        ),
        "graph": (
            "bertcorpus.pipeline.cli.graph_command",
            "draw a named job's Beam graph offline (.dot, and .png with graphviz)",
        ),
        "cluster": (
            "bertcorpus.pipeline.engines.cluster_command",
            "start a local Flink or Spark cluster (or an SDK worker pool) to run the jobs on",
        ),
    }


def job_commands() -> list[str]:
    """The commands a named job may run: every command but those that run named jobs themselves."""
    return [name for name in _commands() if name not in FORWARDING_COMMANDS | SERVICE_COMMANDS]


class _FlagRecorder:
    """Stands for a command's parser, or one of its argument groups, while the command adds its arguments, and notes
    the long flags they define (argparse lists them only in private attributes)."""

    def __init__(self, container, flags: set[str], actions: list | None = None):
        self._container, self.flags = container, flags
        self.actions = [] if actions is None else actions

    def add_argument(self, *names, **kwargs):
        action = self._container.add_argument(*names, **kwargs)
        self.flags.update(flag for flag in action.option_strings if flag.startswith("--"))  # with --no-x
        self.actions.append(action)
        return action

    def add_argument_group(self, *args, **kwargs):
        return _FlagRecorder(self._container.add_argument_group(*args, **kwargs), self.flags, self.actions)

    def add_mutually_exclusive_group(self, **kwargs):
        return _FlagRecorder(self._container.add_mutually_exclusive_group(**kwargs), self.flags, self.actions)

    def __getattr__(self, name):
        return getattr(self._container, name)


class OneLineParser(argparse.ArgumentParser):
    """argparse, whose usage errors (a missing required flag, a bad value) are one line, as every other mistake
    is: the usage it would print first is what --help shows."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _build_parsers(command: str | None) -> tuple[argparse.ArgumentParser, set[str], list[argparse.Action]]:
    """The parser, where only the chosen command's module is imported and its arguments added (so `create` never
    loads the trainer), the long flags that command defines (empty if it is not one) and its arguments."""
    import importlib

    parser = OneLineParser(
        prog="bertcorpus", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(*VERBOSE_FLAGS, action="store_true", help="show log messages from Beam and others")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if command is not None and command not in _commands():
        parser.error(unknown_command(command))
    own_flags: set[str] = set()
    actions: list[argparse.Action] = []
    for name, (module, summary) in _commands().items():
        p = sub.add_parser(name, help=summary, description=summary)
        p.set_defaults(module=module)
        if name != command:
            continue
        own_flags.add("--help")
        recorder = _FlagRecorder(p, own_flags, actions)
        # Before or after the command's name alike; SUPPRESS keeps the command's default from undoing it before.
        recorder.add_argument(
            *VERBOSE_FLAGS,
            action="store_true",
            default=argparse.SUPPRESS,
            help="show log messages from Beam and others",
        )
        loaded = importlib.import_module(module)
        loaded.add_arguments(recorder)
        p.usage = getattr(loaded, "USAGE", None)  # a command of many flags names the common ones in its usage
        if getattr(loaded, "ACCEPTS_BEAM_OPTIONS", True):
            p.epilog = getattr(loaded, "BEAM_OPTIONS_EPILOG", BEAM_OPTIONS_EPILOG)
    return parser, own_flags, actions


def unknown_command(word: str) -> str:
    """What a word that names no command gets, the closest command named as a misspelt flag's closest flag is
    (argparse would list all fourteen)."""
    import difflib

    closest = difflib.get_close_matches(word, list(_commands()), n=1)
    hint = f"did you mean {closest[0]}?" if closest else "bertcorpus --help lists the commands"
    return f"unknown command {word!r}; {hint}"


def command_flags(command: str) -> set[str]:
    """The flags a command defines itself (--x and --no-x for booleans), without Beam's."""
    return _build_parsers(command)[1]


def parse_command(words: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """A command line's words → (the command's arguments, the Beam options among them), unknown flags refused as
    main refuses them."""
    parser, own_flags, _ = _build_parsers(words[0] if words else None)
    args, beam_args = parser.parse_known_args(words)
    _check_flags(args, beam_args, own_flags)
    return args, beam_args


def _check_flags(args, beam_args: list[str], own_flags: set[str]) -> None:
    """Refuse a flag that is neither the command's own nor, where the command takes them, a Beam option's. A
    command that forwards its flags to another leaves them to that one."""
    import importlib

    if args.command not in FORWARDING_COMMANDS:
        module = importlib.import_module(args.module)
        unknown_flags.check_unknown_flags(beam_args, own_flags, getattr(module, "ACCEPTS_BEAM_OPTIONS", True))


def _named_paths(args, actions: list[argparse.Action], beam_args: list[str]):
    """(what, value) for every word of the command line that may name a file: the value of each of the command's
    arguments that takes free text (not a number, not a choice), and of each Beam option."""
    for action in actions:
        if action.nargs == 0 or action.choices is not None or action.type not in (None, str):
            continue
        value = getattr(args, action.dest, None)
        long_flags = [flag for flag in action.option_strings if flag.startswith("--")]
        what = long_flags[0] if long_flags else action.metavar or action.dest.upper()
        for word in value if isinstance(value, list) else [value]:
            if isinstance(word, str) and word:
                yield what, word
    flag = None
    for word in beam_args:
        if word.startswith("--"):
            flag, _, value = word.partition("=")
            if value:
                yield flag, value
        elif flag is not None:
            yield flag, word


def _refuse_special_files(args, actions: list[argparse.Action], beam_args: list[str]) -> None:
    """Every file argument of every command is checked here, before anything opens it: a FIFO without a writer
    would be waited on forever and a device such as /dev/zero never ends (an output there could be replaced)."""
    from bertcorpus.transforms.local_files import special_file_problem

    for what, path in _named_paths(args, actions, beam_args):
        if problem := special_file_problem(path, what, written=what in OUTPUT_FLAGS):
            raise UserError(problem)


def main(argv: list[str] | None = None) -> int:
    import importlib

    words = list(argv if argv is not None else sys.argv[1:])
    verbose = bool(set(VERBOSE_FLAGS) & set(words))
    if not verbose:  # TensorFlow's C++ log, errors included: what the trainer must report, it raises
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # Set before Beam is imported: it warns about optional cloud libraries on import, which is noise here.
    logging.basicConfig(
        level=logging.INFO if verbose else logging.CRITICAL, format="%(levelname)s %(name)s: %(message)s"
    )
    command = next((w for w in words if not w.startswith("-")), None)
    parser, own_flags, actions = _build_parsers(command)
    args, beam_args = parser.parse_known_args(words)
    module = importlib.import_module(args.module)
    if not gc.isenabled():  # entry_point's process: what the modules made lives to the end, so freeze it
        gc.freeze()
        gc.enable()
    accepts_beam_options = getattr(module, "ACCEPTS_BEAM_OPTIONS", True)
    running = False
    shown_before = warnings.showwarning
    warnings.showwarning = _one_line_warnings(args.command)
    try:
        _check_flags(args, beam_args, own_flags)
        if accepts_beam_options:
            _check_text(words)
        _refuse_special_files(args, actions, beam_args)
        running = True
        status = module.run(args, beam_args)
        if status == 0:
            _plan_after_dry_run(args, beam_args)
        return status
    except KeyboardInterrupt as stop:
        with _stop_signals_ignored():
            if running:
                _discard_staging(args, module, beam_args)
            word, status = stopped(stop)
            note = getattr(module, "INTERRUPTED_NOTE", None)
            print(f"bertcorpus {args.command}: {word}" + (f"; {note}" if note else ""), file=sys.stderr)
        return status
    except Exception as e:
        if running:
            _discard_staging(args, module, beam_args, job_over=isinstance(e, RunnerJobFailed))
        message = user_message(e)
        if message is None:
            raise
        print(f"bertcorpus {args.command}: error: {message}", file=sys.stderr)
        return 2
    finally:
        warnings.showwarning = shown_before


def _one_line_warnings(command: str):
    """Python's warnings shown as errors are: one line that names the command, never the source line that warned
    (Python's own format quotes it, which means nothing to a user)."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"bertcorpus {command}: warning: {' '.join(str(message).split())}", file=file or sys.stderr)

    return show


def _plan_after_dry_run(args, beam_args: list[str]) -> None:
    """A job's dry run ends with the plan of the run it validated (`bertcorpus plan` on the same words); the plan
    command is loaded as every command is, by its name."""
    import importlib

    if args.command in PLANNED_COMMANDS and any(word.startswith("--dry_run") for word in beam_args):
        importlib.import_module(_commands()["plan"][0]).print_after_dry_run(args, beam_args)


def _check_text(words: list[str]) -> None:
    """A job writes the names it is given into its outputs as UTF-8 text: a word holding bytes Python could not
    decode is refused before anything is written."""
    for word in words:
        if has_undecoded_bytes(word):
            raise UserError(not_text_message(word))


@contextlib.contextmanager
def _stop_signals_ignored():
    """Ctrl-C pressed again (or a SIGTERM) while the first one's clean-up runs would break it off and leave staged
    files."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _discard_staging(args, module, beam_args: list[str], job_over: bool = False) -> None:
    """A failed or interrupted local run leaves no staged files behind: on a full disk they would keep it full.
    (A remote job may still be running and using its staging, unless the runner said it ended: job_over.) The
    output itself may be what failed, so trouble here only leaves them in place."""
    if not getattr(module, "ACCEPTS_BEAM_OPTIONS", True) or args.command in FORWARDING_COMMANDS:
        return
    from bertcorpus.pipeline.engines import runners
    from bertcorpus.pipeline.sinks import output

    try:
        if not job_over and not runners.is_local(runners.pipeline_options(beam_args)):
            return
        for name in ("output", "counts_dir"):
            path = getattr(args, name, None)
            if isinstance(path, str) and path:
                output.discard_staging(path)
    except Exception:
        logging.getLogger(__name__).info("staging left in place", exc_info=True)


def entry_point() -> None:
    from bertcorpus.pipeline.cli.standard_streams import StandardStreams

    streams = StandardStreams()
    # Every command stops the same way on SIGINT and SIGTERM, also where SIGINT came ignored (a shell script's
    # background job), which would leave a long command, such as train, impossible to interrupt.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, raise_stop)
    # Loading Beam makes ~200,000 objects that live as long as the process, and no garbage. Loaded without
    # collections and then frozen (in main), they are never walked again: not while loading, not by later
    # collections, not at exit, where Python would otherwise visit them all once more.
    gc.disable()
    words = sys.argv[1:]
    command = next((w for w in words if not w.startswith("-")), None)
    try:
        status = main()
    except SystemExit as done:  # from argparse (--help, a usage error), or a numbered exit
        if not isinstance(done.code, (int, type(None))):
            raise
        status = done.code or 0
    except KeyboardInterrupt as stop:  # arrived while an error was being reported, or as the command ended
        word, status = stopped(stop)
        print(f"bertcorpus: {word}", file=sys.stderr)
    sys.exit(streams.finish(command, status))
