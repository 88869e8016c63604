"""`bertcorpus run JOB --profile P --set key=value`: a named job from beam_jobs.yaml with a runner profile
(named_jobs.py). A job whose output is up to date (its manifest records the same inputs, config and version) is kept,
not run again: `run` gives the job's command --reuse (which replaces an output that is out of date), or with --force
--overwrite."""

from __future__ import annotations

import shlex

from bertcorpus.pipeline.cli.named_jobs import DEFAULT_FILE, command_line, load_jobs_file

ACCEPTS_BEAM_OPTIONS = True


def add_arguments(parser) -> None:
    parser.add_argument("job", nargs="?", help="job name (omit, or use --list, to list the jobs)")
    parser.add_argument("--profile", default="local", help="runner profile from the file (default: local)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a job flag or a profile option (repeatable); flags written after "
        "the job name override everything",
    )
    parser.add_argument(
        "--jobs-file",
        default=None,
        help=f"the YAML file (default: ./{DEFAULT_FILE}, else the copy shipped with bertcorpus)",
    )
    parser.add_argument("--list", action="store_true", help="list jobs and profiles and exit")
    parser.add_argument("--print-command", action="store_true", help="print the command line instead of running")
    parser.add_argument(
        "--force",
        action="store_true",
        help="run the job also when its output is up to date, replacing it (default: off: an up-to-date output "
        "is kept)",
    )


def print_jobs(spec: dict) -> None:
    """The jobs in aligned columns (name, command, help), then the profiles."""
    rows = [
        (str(name), str(job.get("command", "?")), str(job.get("help", "")))
        for name, job in ((name, job if isinstance(job, dict) else {}) for name, job in spec["jobs"].items())
    ]
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(2)]
    print("jobs:")
    for name, command, help_text in rows:
        print(f"  {name.ljust(widths[0])}  {command.ljust(widths[1])}  {help_text}".rstrip())
    print("profiles: " + ", ".join(map(str, spec["profiles"])))


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline.cli import commands

    spec = load_jobs_file(args.jobs_file)
    if args.list or not args.job:
        print_jobs(spec)
        return 0
    words = command_line(spec, args.job, args.profile, args.set, beam_args)
    wanted = "--overwrite" if args.force else "--reuse"
    if wanted in commands.command_flags(words[0]) and wanted not in words:
        words.insert(1, wanted)
    if args.print_command:
        print(shlex.join(["bertcorpus", *words]))  # quoted as a shell needs it: a glob stays a glob for bertcorpus
        return 0
    return commands.main(words)
