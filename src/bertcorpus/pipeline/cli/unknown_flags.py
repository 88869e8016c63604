"""Flags that no one defines: a command's words are either its own flags or Beam pipeline options, and any other
word is an error naming the closest valid flag. Beam alone would ignore it, so a misspelled flag ran with its
default."""

from __future__ import annotations

import contextlib
import difflib
import io

from bertcorpus.pipeline.errors import UserError


def check_unknown_flags(words: list[str], own_flags: set[str], accepts_beam_options: bool) -> None:
    """words: what the command's own parser left over."""
    if not words:
        return
    valid = set(own_flags)
    unknown = words
    if accepts_beam_options:
        unknown, beam_flags = _beam_leftovers(words)
        valid |= beam_flags
    if not unknown:
        return
    flag = next((w for w in unknown if w.startswith("-")), None)
    if flag is None:
        raise UserError(f"unexpected argument {unknown[0]!r}")
    name = flag.split("=", 1)[0]
    closest = difflib.get_close_matches(name, sorted(valid), n=1)
    hint = f"; did you mean {closest[0]}?" if closest else ""
    if not accepts_beam_options and name in _beam_flags_known_now():
        hint = "; this command takes no Beam pipeline options"
    raise UserError(f"unknown flag {name}{hint}")


def _beam_leftovers(words: list[str]) -> tuple[list[str], set[str]]:
    """(the words no Beam pipeline option takes, every Beam flag) — with the named runner's own options, which
    Beam registers only once the runner's module is loaded."""
    from apache_beam.options.pipeline_options import PipelineOptions

    options = PipelineOptions(words)
    _load_runner(options)
    parsers = []
    complaint = io.StringIO()
    try:
        with contextlib.redirect_stderr(complaint):  # Beam's parser prints its whole usage, some 300 lines
            flags = {"--" + name for name in options.get_all_options(add_extra_args_fn=parsers.append)}
            _, leftovers = parsers[0].parse_known_args(words)
    except SystemExit:
        raise UserError(complaint.getvalue().strip().splitlines()[-1].split("error: ", 1)[-1]) from None
    return leftovers, flags


def _beam_flags_known_now() -> set[str]:
    from apache_beam.options.pipeline_options import PipelineOptions

    return {"--" + name for name in PipelineOptions([]).get_all_options()}


def _load_runner(options) -> None:
    from apache_beam.options.pipeline_options import StandardOptions
    from apache_beam.runners.runner import create_runner

    from bertcorpus.pipeline.engines.runners import LOCAL_RUNNER_NAMES

    runner = options.view_as(StandardOptions).runner
    if runner not in LOCAL_RUNNER_NAMES:
        try:
            create_runner(runner)
        except (ImportError, AttributeError) as e:  # a runner not there, or whose extras are not installed
            raise UserError(f"--runner {runner} cannot be loaded here: {e}") from None
