"""`--language auto`: accuracy and cost of offline language identification (transforms/language_id.py, lingua) on
the real Wikipedia articles bundled in tests/data/wiki (ja, vi, el, bn, uk and the 2014 enwiki sample), with the
detector restricted to a few candidate languages (--languages) and with every language lingua knows.

For each setting, in a fresh process: the CPU seconds and peak memory of loading the models, then the share of
articles judged right (those of 5,000 characters and more, and all of them, from 100), and the CPU seconds per MB
(10**6 bytes of UTF-8) of the articles judged.

    .venv/bin/python benchmarks/bench_language_id.py
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from wiki_fixtures import ENWIKI_2014, MULTILINGUAL, wiki_articles

CANDIDATES = "bg,bn,el,en,hi,ja,ko,ru,uk,vi,zh"
LONG = 5000


def measure(languages: tuple[str, ...]) -> dict:
    """One setting's figures, in this process."""
    from bertcorpus.transforms.language_id import detect_language, detector

    samples = {lang: wiki_articles(path) for lang, path in MULTILINGUAL.items()}
    samples["en"] = wiki_articles(ENWIKI_2014)
    start = time.process_time()
    detector(languages)
    load = time.process_time() - start
    load_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    right = {"long": 0, "all": 0}
    judged = {"long": 0, "all": 0}
    wrong = []
    size = 0
    start = time.process_time()
    for lang, docs in samples.items():
        for title, text in docs:
            found = detect_language(text, languages, 0.5)
            size += len(text.encode())
            for group in ("long", "all") if len(text) >= LONG else ("all",):
                judged[group] += 1
                right[group] += found.language == lang
            if found.language != lang:
                wrong.append(f"{lang}:{title} → {found.language} ({found.confidence:.2f})")
    seconds = time.process_time() - start
    return {
        "load_cpu_s": round(load, 2),
        "peak_rss_mb": round(load_rss),
        "accuracy_long": f"{right['long']}/{judged['long']}",
        "accuracy_all": f"{right['all']}/{judged['all']}",
        "cpu_s_per_mb": round(seconds / (size / 1e6), 3),
        "mb": round(size / 1e6, 2),
        "wrong": wrong,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--one", metavar="LANGUAGES", help=argparse.SUPPRESS)  # a setting, in this process
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(tuple(filter(None, args.one.split(","))))))
        return
    for name, languages in ((f"--languages {CANDIDATES}", CANDIDATES), ("all 75 languages", "")):
        done = subprocess.run(
            [sys.executable, __file__, "--one", languages], capture_output=True, text=True, check=True
        )
        figures = json.loads(done.stdout)
        print(
            f"{name}: models {figures['load_cpu_s']} CPU-s, peak {figures['peak_rss_mb']} MB; right "
            f"{figures['accuracy_long']} of {LONG:,}+ characters, {figures['accuracy_all']} of all; "
            f"{figures['cpu_s_per_mb']} CPU-s/MB over {figures['mb']} MB"
        )
        for line in figures["wrong"]:
            print(f"   wrong: {line}")


if __name__ == "__main__":
    main()
