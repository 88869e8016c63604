"""What whole-word masking on Chinese costs end to end: `bertcorpus create` on the bundled real Chinese documents
(test_chinese_vocab.chinese_documents: 3.70 MB of articles, a book, treebank sentences and modern prose, zh-hans),
with a vocab trained on them, at 128/20 and dupe factor 10, without and with --whole-word-mask (jieba's words).

Figures: CPU seconds (user + sys of the command and every process it starts) per MB of UTF-8 text, the median of
--repeat runs of each, run alternately; then, with --profile, where the difference goes: a cProfile of one run of
each in this process (in memory on the direct runner), the functions whose own time differs most.

    .venv/bin/python benchmarks/bench_whole_words.py [--repeat 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_chinese import train_vocab
from bench_create import measure
from test_chinese_vocab import chinese_documents

LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]


def create_words(corpus: Path, vocab: str, out: Path, whole_words: bool) -> list[str]:
    words = ["create", "--input", str(corpus), "--vocab", vocab, "--output", str(out), "--overwrite", *LOCAL]
    return words + ["--whole-word-mask"] * whole_words


def own_time(profile: cProfile.Profile) -> dict[str, float]:
    """{function: its own CPU seconds} of a profile."""
    stats = pstats.Stats(profile)
    return {f"{Path(f).name}:{line}({name})": row[2] for (f, line, name), row in stats.stats.items()}


def profiled(words: list[str]) -> dict[str, float]:
    from bertcorpus.pipeline.cli.commands import main as run_cli

    profile = cProfile.Profile()
    profile.enable()
    assert run_cli(words) == 0
    profile.disable()
    return own_time(profile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="also say where the difference goes")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-wwm-"))
    corpus = folder / "zh.jsonl"
    documents = chinese_documents()
    corpus.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in documents), encoding="utf-8")
    mb = sum(len(d["text"].encode()) for d in documents) / 1e6
    vocab = train_vocab()
    entry = [sys.executable, "-m", "bertcorpus"]
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeat):
        for whole in (False, True):
            run = measure([*entry, *create_words(corpus, vocab, folder / f"out-{whole}", whole)])
            cpu[whole].append(run["cpu"])
    plain, words = (statistics.median(cpu[w]) for w in (False, True))
    print(f"create on {mb:.2f} MB of Chinese documents, 128/20, dupe factor 10, medians of {args.repeat} runs")
    print(f"  without --whole-word-mask: {plain:.1f} CPU-s, {plain / mb:.2f} CPU-s/MB  {sorted(cpu[False])}")
    print(f"  with --whole-word-mask:    {words:.1f} CPU-s, {words / mb:.2f} CPU-s/MB  {sorted(cpu[True])}")
    print(f"  whole-word masking adds {(words - plain) / mb:.2f} CPU-s per MB ({words / plain - 1:+.0%})")
    if args.profile:
        without = profiled(create_words(corpus, vocab, folder / "profile-False", False))
        with_words = profiled(create_words(corpus, vocab, folder / "profile-True", True))
        differences = sorted((with_words.get(f, 0) - without.get(f, 0), f) for f in {*without, *with_words})
        print("  own CPU seconds that whole-word masking adds, by function (profiled, in this process):")
        for seconds, function in reversed(differences[-12:]):
            print(f"    {seconds:+7.2f} s  {function}")


if __name__ == "__main__":
    main()
