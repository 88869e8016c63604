"""Peak memory of the jobs whose memory grew with one part of their input: `create` and `dedup` with one huge document
among ordinary ones, and `extract-wiki` with the size of the dump.

Each run is a whole command in a fresh process, in Beam's default in-memory mode (the whole job in one process);
its peak is the largest resident set of any process it started (getrusage(RUSAGE_CHILDREN).ru_maxrss). Every figure
stands beside a baseline run of the same script, on the same machine, at the same hour:

- create (128/20, dupe factor 10) and dedup: bench_create.py's real documents (the Gutenberg books cut into ~16 KB
  documents and the cleaned enwiki sample's articles, 12.4 MB of text) SCALE times with fresh ids, alone (the
  baseline); with 11 × SCALE million characters more of real paragraphs, each one's words in an order drawn anew
  for every copy (no near copy for dedup to find), cut into documents of 60 paragraphs as the others are; and
  with the same text as one huge document, in the middle of the JSONL file. The huge document's peak over the
  cut text's is what a huge document costs beyond its text;
- extract-wiki: the bundled 2014 sample's pages (10.5 MB of XML, the baseline) repeated 5 × SCALE times with fresh
  page ids (52.5 MB of XML at 1×).

    .venv/bin/python benchmarks/bench_memory.py [--jobs create,dedup,extract-wiki] [--scales 1,4]
        [--baseline-python PYTHON]

With --baseline-python (the interpreter of a virtualenv where another version of bertcorpus is installed, such as
the code before a change), every run is made with that code too, alternately, and where the two must write the
same bytes (an extraction, and create and dedup without the huge document) the script says whether they did.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCHMARKS), str(BENCHMARKS.parent / "tests")]

import bench_create
from bench_create import VOCAB, measure
from bench_extract_wiki import repeated_dump

from wiki_fixtures import ENWIKI_2014

HUGE_MB = 11  # million characters of the huge document at 1×
DUMP_COPIES = 5  # copies of the 2014 sample in the dump at 1×
SAME_BYTES = ("documents-*.parquet", "errors-*.jsonl", "seq128/*")  # what two versions must write alike

# Read and cleaned once, not for every corpus written: the same texts serve every job and scale.
real_documents = functools.cache(bench_create.real_documents)
document_pieces = functools.cache(bench_create.document_pieces)


@functools.cache  # the same text for the cut and the whole document of a job and scale
def huge_text(scale: int) -> str:
    """HUGE_MB × scale million characters of real paragraphs, one text after another, each paragraph's words in an
    order drawn anew for every copy: no near copy of another document, nor of a part of itself, for dedup to find."""
    rng = random.Random(12345)
    paragraphs = [p for _, text in real_documents() for p in text.split("\n\n")]
    parts, size = [], 0
    while size < HUGE_MB * scale * 1e6:
        words = paragraphs[len(parts) % len(paragraphs)].split(" ")
        parts.append(" ".join(rng.sample(words, len(words))))
        size += len(parts[-1]) + 2
    return "\n\n".join(parts)


def write_corpus(path: Path, scale: int, huge: str | None) -> float:
    """The ordinary documents `scale` times with fresh ids and, in the middle, the huge text as one document
    ("whole") or cut, as the ordinary ones are, into documents of 60 paragraphs ("cut"); MB of text in all."""
    documents = [(f"r{rep}:{doc_id}", text) for rep in range(scale) for doc_id, text in document_pieces()]
    if huge == "whole":
        documents.insert(len(documents) // 2, ("huge", huge_text(scale)))
    elif huge == "cut":
        paragraphs = huge_text(scale).split("\n\n")
        cut = [(f"huge:{i}", "\n\n".join(paragraphs[i : i + 60])) for i in range(0, len(paragraphs), 60)]
        documents[len(documents) // 2 : len(documents) // 2] = cut
    path.write_text("".join(json.dumps({"id": doc_id, "text": text}) + "\n" for doc_id, text in documents))
    return round(sum(len(text.encode()) for _, text in documents) / 1e6, 1)


def command(exe: list[str], job: str, source: Path, out: Path) -> list[str]:
    flags = {
        "create": ["--vocab", str(VOCAB), "--dupe-factor", "10"],
        "dedup": [],
        "extract-wiki": [],
    }[job]
    return [*exe, job, "--input", str(source), "--output", str(out), *flags]


def digests(out: Path) -> dict[str, str]:
    return {
        str(f.relative_to(out)): hashlib.sha256(f.read_bytes()).hexdigest()
        for pattern in SAME_BYTES
        for f in sorted(out.glob(pattern))
    }


def run(
    codes: dict[str, list[str]], job: str, source: Path, tmp: Path, label: dict, same_bytes: bool
) -> dict[str, dict]:
    """Each code's run on `source`, one after another; their peaks, and whether they wrote the same bytes."""
    peaks, written = {}, {}
    for code, exe in codes.items():
        out = tmp / f"out-{code}"
        shutil.rmtree(out, ignore_errors=True)
        peaks[code] = measure(command(exe, job, source, out))["maxrss_mb"]
        written[code] = digests(out)
    if len(codes) > 1 and same_bytes:
        label = {**label, "same_output": len({json.dumps(d, sort_keys=True) for d in written.values()}) == 1}
    return {code: {**label, "code": code, "peak_rss_mb": round(peak)} for code, peak in peaks.items()}


def report(baseline: dict[str, dict], found: dict[str, dict], same_text: dict[str, dict] | None = None) -> None:
    """Each code's run, and its peak over that code's baseline run (and over its run on the same text cut into
    ordinary documents)."""
    for code, result in found.items():
        ratios = {"over_baseline": round(result["peak_rss_mb"] / baseline[code]["peak_rss_mb"], 2)}
        if same_text:
            ratios["over_same_text_cut"] = round(result["peak_rss_mb"] / same_text[code]["peak_rss_mb"], 2)
        print(json.dumps({**result, **ratios}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", default="create,dedup,extract-wiki", help="the jobs to measure")
    parser.add_argument("--scales", default="1,4", help="input sizes, as multiples of the 1× input")
    parser.add_argument("--baseline-python", help="also measure the bertcorpus installed for this interpreter")
    args = parser.parse_args()
    codes = {"current": [str(Path(sys.executable).parent / "bertcorpus")]}
    if args.baseline_python:
        codes["baseline"] = [args.baseline_python, "-m", "bertcorpus"]
    scales = [int(s) for s in args.scales.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for job in args.jobs.split(","):
            if job == "extract-wiki":
                baseline = run(codes, job, ENWIKI_2014, tmp, {"job": job, "xml_mb": 10.5}, True)
                report(baseline, baseline)
                for scale in scales:
                    dump = tmp / "dump.xml"
                    dump.write_bytes(repeated_dump(DUMP_COPIES * scale))
                    label = {"job": job, "scale": scale, "xml_mb": round(dump.stat().st_size / 1e6, 1)}
                    report(baseline, run(codes, job, dump, tmp, label, True))
                    dump.unlink()
                continue
            for scale in scales:
                corpus, runs = tmp / "corpus.jsonl", {}
                for huge in (None, "cut", "whole"):
                    text_mb = write_corpus(corpus, scale, huge)
                    label = {"job": job, "scale": scale, "text_mb": text_mb, "huge_document": huge or "none"}
                    runs[huge] = run(codes, job, corpus, tmp, label, huge != "whole")
                report(runs[None], runs[None])
                report(runs[None], runs["cut"])
                report(runs[None], runs["whole"], runs["cut"])
                corpus.unlink()


if __name__ == "__main__":
    main()
