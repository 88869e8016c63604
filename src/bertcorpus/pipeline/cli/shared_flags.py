"""The flags that several commands share, each defined once: where the inputs and the output are, the input
format, lower-casing, the error limits and the automatic sizes. A flag's older spelling stays accepted, hidden
from --help."""

from __future__ import annotations

import argparse

BooleanFlag = argparse.BooleanOptionalAction  # a flag --x with its --no-x
INPUT_FORMATS_HELP = (
    "documents = Parquet from extract-wiki/extract-books; text = one sentence per line, blank "
    'line between documents; jsonl = {"id","text"} per line (.jsonl or .json); each plain or '
    "compressed (.zst, .gz, .bz2); auto = by file name (default: auto)"
)
LOCAL_FOLDERS_HELP = (
    "a directory stands for the files directly in it (folders inside it and broken links are left "
    "out, and named in a note)"
)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (where 0 would silently mean "automatic")."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value} (leave the flag out for the default)")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text} (leave the flag out for the default)")
    return value


def add_files(
    parser: argparse.ArgumentParser,
    *,
    inputs: str,
    output: str,
    metavar: str = "PATH",
    output_default: str | None = None,
):
    """The "input and output" group: --input, --output and --overwrite; the group, for a command's own files."""
    files = parser.add_argument_group("input and output")
    add_input_and_output(files, inputs=inputs, output=output, metavar=metavar, output_default=output_default)
    add_overwrite(files)
    return files


def add_input_and_output(
    group,
    *,
    inputs: str,
    output: str,
    metavar: str = "PATH",
    output_default: str | None = None,
    output_metavar: str | None = None,
) -> None:
    """--input and --output, also for a command that shows them in a group of its own (create's common recipe)."""
    group.add_argument("--input", nargs="+", required=True, metavar=metavar, help=inputs)
    group.add_argument(
        "--output", required=output_default is None, default=output_default, metavar=output_metavar, help=output
    )


def add_overwrite(group) -> None:
    group.add_argument("--overwrite", action="store_true", help="replace a finished run in --output")


def add_reuse(group) -> None:
    """--reuse, for a job whose manifest records its inputs' digests (pipeline/sinks/up_to_date.py)."""
    group.add_argument(
        "--reuse",
        action="store_true",
        help="keep a finished run in --output that is up to date (its manifest records this bertcorpus version, "
        "the same config and the same input files, by size and sha256) and say so; otherwise run, replacing it "
        "(default: off; `run` and `demo` turn it on unless --force)",
    )


def add_input_format(group) -> None:
    group.add_argument(
        "--input-format", choices=["auto", "documents", "text", "jsonl"], default="auto", help=INPUT_FORMATS_HELP
    )


def add_lower_case(group, help: str) -> None:
    """--do-lower-case / --no-do-lower-case (dest do_lower_case); vocab's --uncased and --cased stay accepted."""
    group.add_argument("--do-lower-case", action=argparse.BooleanOptionalAction, default=True, help=help)
    group.add_argument("--uncased", dest="do_lower_case", action="store_true", help=argparse.SUPPRESS)
    group.add_argument("--cased", dest="do_lower_case", action="store_false", help=argparse.SUPPRESS)


# The longest document that create and dedup take whole, in millions of characters: longer than any Wikipedia article
# and all but the longest books (a complete Shakespeare is 5.5), so that ordinary corpora are untouched, and short
# enough that the worker holding one needs at most some 160 MB more for it (docs/benchmarks.md, "Huge documents").
MAX_DOCUMENT_MB = 4.0


def add_document_cap(group, what: str) -> None:
    """--max-document-mb: documents past it are cut into pieces (transforms/document_pieces.py); `what` says what
    a piece is to the command."""
    group.add_argument(
        "--max-document-mb",
        type=positive_float,
        default=MAX_DOCUMENT_MB,
        metavar="MB",
        help="a document longer than this many million characters is cut at paragraph boundaries into pieces "
        f"no longer, ID#part-1, ID#part-2, ..., each {what}, and counted: one worker holds a document whole "
        "(default: %(default)s)",
    )


def add_error_limits(parser: argparse.ArgumentParser, rate_help: str) -> None:
    """--strict and --max-error-rate: when a run whose output is complete still exits non-zero."""
    errors = parser.add_argument_group("errors")
    errors.add_argument("--strict", action="store_true", help="exit non-zero on any error (default: off)")
    errors.add_argument("--max-error-rate", type=float, default=0.01, help=f"{rate_help} (default: %(default)s)")


def check_error_rate(args) -> None:
    if not 0 <= args.max_error_rate <= 1:
        raise ValueError("--max-error-rate must be between 0 and 1")


def language_tag_or_auto(text: str) -> str:
    """An argparse type: a BCP 47 tag of a known language (canonical case), `und`, `auto`, or `detect` (the light
    detector, else the script: extract-books's default)."""
    from bertcorpus.transforms.language_id import DETECT
    from bertcorpus.transforms.languages import LanguageTagError, normalize_tag

    if text.strip().lower() in ("auto", DETECT):
        return text.strip().lower()
    try:
        return normalize_tag(text)
    except LanguageTagError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def language_list(text: str) -> tuple[str, ...]:
    """An argparse type: --languages en,zh,ja as sorted primary subtags."""
    from bertcorpus.transforms.language_id import LanguageIdUnavailable, parse_language_list

    try:
        return parse_language_list(text)
    except LanguageIdUnavailable as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_language(group, what: str, default: str = "und", default_help: str = "und, unknown") -> None:
    """--language, --languages and --min-language-confidence: the language of documents that do not carry one."""
    group.add_argument(
        "--language",
        type=language_tag_or_auto,
        default=default,
        metavar="CODE|auto",
        help=f"the language of {what} that do not name their own (a documents file's language column, a JSONL "
        "line's language field): a BCP 47 tag (en, ja, zh-Hans; und for unknown), or auto to detect each "
        f"document's majority language offline (pip install 'bertcorpus[langid]') (default: {default_help})",
    )
    group.add_argument(
        "--languages",
        type=language_list,
        default=(),
        metavar="LIST",
        help="with --language auto: the languages to tell apart, comma-separated ISO 639-1 codes (en,zh,ja); "
        "fewer load faster and use less memory, and a document in a language outside them is und (default: all "
        "75 the detector knows, about 1.4 GB per worker)",
    )
    group.add_argument(
        "--min-language-confidence",
        type=float,
        default=0.5,
        metavar="P",
        help="with --language auto or detect: a document whose majority language has less confidence than this is und, "
        "counted, never put under a language it may not be in (default: %(default)s)",
    )


def check_language_flags(args) -> None:
    """One line for language flags that do not fit together, or a detector that cannot be had: before any work."""
    if not 0 <= args.min_language_confidence <= 1:
        raise ValueError("--min-language-confidence must be between 0 and 1")
    if args.languages and args.language != "auto":
        raise ValueError("--languages chooses among languages to detect: it needs --language auto")
    if args.language == "auto":
        from bertcorpus.transforms.language_id import check_detector

        check_detector(args.languages)


def language_setting(args):
    from bertcorpus.transforms.language_id import LanguageSetting

    return LanguageSetting(args.language, tuple(args.languages), args.min_language_confidence)
