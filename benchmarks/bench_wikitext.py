"""CPU cost of Wikipedia extraction per MB of dump XML: iter_pages + clean_wikitext, against wikiextractor.

The dump is decompressed to a temporary file first, so that the main figures time XML parsing and cleaning only;
the cost with bz2 decompression is reported too. CPU time is user+sys from getrusage: for our code in this process
(best of --repeat runs), and for whole command-line runs in child processes, which is how wikiextractor is measured
(interpreter start, imports, its worker processes and its output included). For a like-for-like comparison our
code also runs as a child process, writing its text to a file as wikiextractor does.

wikiextractor is a benchmark-only tool, never a dependency: install it into its own virtualenv, e.g.
    python3.11 -m venv /tmp/wikibench-venv && /tmp/wikibench-venv/bin/pip install wikiextractor==3.1.0
and run, from the repository root,
    .venv/bin/python benchmarks/bench_wikitext.py --wikiextractor-python /tmp/wikibench-venv/bin/python
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bertcorpus.transforms.compression import open_decompressed
from bertcorpus.transforms.local_files import special_file_problem
from bertcorpus.transforms.wiki_page_items import Page
from bertcorpus.transforms.wiki_pages import iter_pages
from bertcorpus.transforms.wikitext import clean_wikitext

DEFAULT_DUMP = REPO / "tests" / "data" / "wiki" / "enwiki-2014-sample-truncated.xml.bz2"


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def best_cpu(run: Callable[[], object], repeat: int) -> float:
    """The lowest CPU time of `repeat` runs in this process: the least disturbed by other load."""
    times = []
    for _ in range(repeat):
        before = cpu_seconds(resource.RUSAGE_SELF)
        run()
        times.append(cpu_seconds(resource.RUSAGE_SELF) - before)
    return min(times)


def best_child_cpu(command: list[str], repeat: int) -> float:
    """The lowest CPU time (the child and all the processes it waited for) of `repeat` runs of a command."""
    times = []
    for _ in range(repeat):
        before = cpu_seconds(resource.RUSAGE_CHILDREN)
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        times.append(cpu_seconds(resource.RUSAGE_CHILDREN) - before)
    return min(times)


def parse_only(xml: Path) -> int:
    with open(xml, "rb") as stream:
        return sum(1 for _ in iter_pages(stream))


def extract(source: Path, out=None) -> int:
    """What the extraction job does per page: read, keep ns0 non-redirect articles, clean; returns chars kept."""
    kept = 0
    with open_decompressed(source) as stream:
        for page in iter_pages(stream):
            if isinstance(page, Page) and page.ns == 0 and not page.redirect and page.text:
                text = clean_wikitext(page.text, title=page.title)
                kept += len(text)
                if out is not None:
                    out.write(text + "\n\n")
    return kept


def kept_chars(path: Path) -> int:
    """Characters of article text in an output file, without wikiextractor's <doc> wrapper lines."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return sum(len(line) for line in lines if not line.startswith(("<doc ", "</doc>")))


def wikiextractor_version(python: str) -> str | None:
    probe = [python, "-c", "import importlib.metadata as m; print(m.version('wikiextractor'))"]
    try:
        return subprocess.run(probe, check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump", type=Path, default=DEFAULT_DUMP, help="pages-articles dump (.xml or .xml.bz2)")
    parser.add_argument("--wikiextractor-python", default="/tmp/wikibench-venv/bin/python")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--extract-to", type=Path, help=argparse.SUPPRESS)  # the child-process run of our code
    args = parser.parse_args()
    if problem := special_file_problem(str(args.dump), "--dump"):
        parser.exit(2, f"{parser.prog}: error: {problem}\n")

    if args.extract_to is not None:
        with open(args.extract_to, "w", encoding="utf-8") as out:
            extract(args.dump, out)
        return

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        xml = work / "dump.xml"
        with open_decompressed(args.dump) as src, open(xml, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        mb = xml.stat().st_size / 1e6
        print(f"dump: {args.dump.name}, {mb:.2f} MB of XML; CPU = user+sys; best of {args.repeat}")

        rows: list[tuple[str, float]] = []
        rows.append(("ours: iter_pages only (in process)", best_cpu(lambda: parse_only(xml), args.repeat)))
        rows.append(("ours: iter_pages + clean_wikitext (in process)", best_cpu(lambda: extract(xml), args.repeat)))
        rows.append(("ours: same, from .bz2 (in process)", best_cpu(lambda: extract(args.dump), args.repeat)))
        ours_cli = [sys.executable, __file__, "--dump", str(xml), "--extract-to", str(work / "ours.txt")]
        rows.append(("ours: as a command, writing text (child process)", best_child_cpu(ours_cli, args.repeat)))

        version = wikiextractor_version(args.wikiextractor_python)
        if version is None:
            print(f"wikiextractor is not installed for {args.wikiextractor_python}: no comparison")
        else:
            command = [args.wikiextractor_python, "-m", "wikiextractor.WikiExtractor", "--no-templates", "-q"]
            command += ["-o", str(work / "wikiextractor"), str(xml)]
            label = f"wikiextractor {version} --no-templates (child processes)"
            rows.append((label, best_child_cpu(command, args.repeat)))

        width = max(len(label) for label, _ in rows)
        for label, seconds in rows:
            print(f"{label:<{width}}  {seconds:6.3f} CPU-s  {mb / seconds:6.2f} MB/CPU-s")
        if version is not None:
            theirs = rows[-1][1]
            print(f"ratio, both as commands: {theirs / rows[3][1]:.2f}x the speed of wikiextractor")
            print(f"ratio, ours in process:  {theirs / rows[1][1]:.2f}x")
            print(f"text kept: ours {kept_chars(work / 'ours.txt'):,} chars, wikiextractor ", end="")
            print(f"{sum(kept_chars(f) for f in (work / 'wikiextractor').rglob('wiki_*')):,} chars (titles included)")


if __name__ == "__main__":
    main()
