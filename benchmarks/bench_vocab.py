"""Quality, speed and memory of `bertcorpus vocab` (figures recorded in docs/vocab.md).

Quality: the distinct real text available (Gutenberg novels, each title once, and the cleaned enwiki sample from
../shared/data) as JSONL documents of ~8 KB. A share of the lines (--holdout-fraction, drawn per document as the
command draws them) is held out; `bertcorpus vocab` trains on the rest, and so does tokenizers' stock
`BertWordPieceTokenizer().train_from_iterator(...)` with the same vocab size. Both vocabs are then measured the
same way, with our reference-identical tokenizer on the held-out lines: [UNK] rate and wordpieces per word.

Speed and memory: the same documents repeated with fresh ids up to --mb megabytes, run as a fresh process;
wall and CPU seconds and peak RSS, scaled to 100 MB of text, --runs times (medians). With --baseline TREE (a
checkout of another version of this repository) every run is made with that code too, alternately, so that both
see the machine alike. Repeating text repeats words, so the counter holds only the distinct words of ~12 MB;
--distinct-words adds a run that trains on that many distinct words to show the memory at the --max-words bound.

    .venv/bin/python benchmarks/bench_vocab.py [--sizes 8000,16000,30000] [--mb 100] [--beam] [--runs 1]
        [--baseline TREE]
"""

from __future__ import annotations

import argparse
import bz2
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))

_MEASURE = """
import json, resource, subprocess, sys, time
start = time.time()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": done.returncode, "cpu": usage.ru_utime + usage.ru_stime, "wall": time.time() - start,
                  "maxrss_mb": usage.ru_maxrss / 1024, "out": done.stdout[-3000:], "err": done.stderr[-2000:]}))
"""


def measure_process(cmd: list) -> dict:
    """Run cmd in a fresh process; CPU and peak RSS include its children (Beam workers)."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *map(str, cmd)], capture_output=True, text=True)
    result = json.loads(out.stdout)
    if result["rc"] != 0:
        raise SystemExit(f"command failed: {' '.join(map(str, cmd))}\n{result['err']}")
    return result


def real_documents() -> list[tuple[str, str]]:
    """Every distinct real text: six UTF-8 novels, three more Windows-1252 ones, PG-19 samples, enwiki articles."""
    from bertcorpus.transforms.wiki_page_items import Page
    from bertcorpus.transforms.wiki_pages import iter_pages
    from bertcorpus.transforms.wikitext import clean_wikitext

    books = sorted((SHARED / "books" / "gutenberg_utf8").glob("*.txt"))
    books += [SHARED / "books" / "gutenberg_cp1252_with_header" / f"pg{n}.txt" for n in (2641, 37106, 64317)]
    books += sorted((SHARED / "books" / "pg19_format").glob("*.txt"))
    docs = []
    for book in books:
        raw = book.read_bytes()
        text = (raw.decode("cp1252") if "cp1252" in str(book) else raw.decode("utf-8")).replace("\r\n", "\n")
        part: list[str] = []
        for paragraph in text.split("\n\n") + [None]:
            if paragraph is not None:
                part.append(paragraph)
            if part and (paragraph is None or sum(map(len, part)) >= 8000):
                docs.append((f"{book.stem}:{len(docs)}", "\n\n".join(part)))
                part = []
    with bz2.open(SHARED / "wiki" / "enwiki-2014-sample-truncated.xml.bz2") as f:
        for page in iter_pages(f):
            if isinstance(page, Page) and page.ns == 0 and not page.redirect and page.text:
                text = clean_wikitext(page.text, title=page.title)
                if text.strip():
                    docs.append((f"enwiki:{page.page_id}", text))
    return docs


def write_jsonl(path: Path, docs: list[tuple[str, str]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for doc_id, text in docs:
            f.write(json.dumps({"id": doc_id, "text": text}) + "\n")


def vocab_tokens(path: Path) -> list[str]:
    from bertcorpus.wordpiece.vocab import Vocab

    return list(Vocab.load(str(path)).tokens)


def quality(tokens: list[str], texts: list[str], lowercase: bool = True) -> dict:
    """[UNK] rate and wordpieces per word, tokenising the held-out texts in full."""
    from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer
    from bertcorpus.wordpiece.training import measure
    from bertcorpus.wordpiece.vocab import Vocab
    from bertcorpus.wordpiece.word_counting import ChunkBatch

    batch = ChunkBatch(lowercase)
    for text in texts:
        batch.add(text)
    q = measure(tokens, batch.drain())
    tokenizer = WordPieceTokenizer(Vocab(tuple(tokens), ""), lowercase)
    pieces = sum(len(tokenizer.encode(t)) for t in texts)
    assert abs(pieces / q.words - q.pieces_per_word) < 1e-9
    return {"words": q.words, "unk_rate": q.unk_rate, "pieces_per_word": q.pieces_per_word}


def stock_vocab(texts: list[str], size: int, tmp: Path) -> tuple[list[str], float]:
    """tokenizers' own BERT WordPiece training, defaults untouched, on the same training texts."""
    from tokenizers import BertWordPieceTokenizer

    started = time.time()
    tokenizer = BertWordPieceTokenizer()
    tokenizer.train_from_iterator(texts, vocab_size=size, show_progress=False)
    seconds = time.time() - started
    tokenizer.save_model(str(tmp), f"stock-{size}")
    return vocab_tokens(tmp / f"stock-{size}-vocab.txt"), seconds


def compare(docs, sizes: list[int], holdout: float, tmp: Path) -> list[dict]:
    from bertcorpus.pipeline.vocab.counting import VocabConfig, split_held_out
    from bertcorpus.wordpiece.training import TrainingConfig

    cfg = VocabConfig(inputs=[], output="", training=TrainingConfig(), holdout_fraction=holdout)
    parts = [split_held_out(doc_id, text, cfg) for doc_id, text in docs]
    held = ["\n".join(lines) for _, lines in parts if lines]
    trained_on = [text for text, _ in parts]
    corpus = tmp / "distinct.jsonl"
    write_jsonl(corpus, docs)
    exe = Path(sys.executable).parent / "bertcorpus"
    print(
        f"distinct real text: {sum(len(t.encode()) for _, t in docs) / 1e6:.1f} MB in {len(docs)} documents; "
        f"held out: {sum(t.count(chr(10)) + 1 for t in held)} lines of {len(held)} documents, "
        f"{sum(len(t.encode()) for t in held) / 1e6:.2f} MB",
        flush=True,
    )
    rows = []
    for size in sizes:
        stock, stock_s = stock_vocab(trained_on, size, tmp)
        row = {"vocab_size": size, "stock": {**quality(stock, held), "train_s": round(stock_s, 1)}}
        for layout in ("compact", "bert"):
            out = tmp / f"{layout}-{size}" / "vocab.txt"
            started = time.time()
            measure_process(
                [
                    exe,
                    "vocab",
                    "--input",
                    corpus,
                    "--output",
                    out,
                    "--vocab-size",
                    size,
                    "--layout",
                    layout,
                    "--holdout-fraction",
                    holdout,
                    "--overwrite",
                ]
            )
            row[layout] = {**quality(vocab_tokens(out), held), "run_s": round(time.time() - started, 1)}
            row[layout]["pieces_vs_stock"] = row[layout]["pieces_per_word"] / row["stock"]["pieces_per_word"] - 1
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def speed(docs, megabytes: float, beam: bool, runs: int, baseline: Path | None, tmp: Path) -> None:
    big = tmp / "repeated.jsonl"
    size, rep = 0, 0
    with open(big, "w", encoding="utf-8") as f:
        while size < megabytes * 1e6:
            for doc_id, text in docs:
                f.write(json.dumps({"id": f"r{rep}:{doc_id}", "text": text}) + "\n")
                size += len(text.encode())
            rep += 1
    codes = {"current": [str(Path(sys.executable).parent / "bertcorpus")]}
    if baseline:
        # Run from that checkout with it first on the path, also in the worker processes Beam starts.
        tree = str(baseline.resolve())
        codes["baseline"] = [
            "env",
            "-C",
            tree,
            f"PYTHONPATH={tree}",
            sys.executable,
            "-c",
            "from bertcorpus.pipeline.cli.commands import entry_point; entry_point()",
        ]
    paths = [("in-process", [])]
    if beam:
        paths.append(
            (
                "beam-2-workers",
                ["--count-with-beam", "--direct_running_mode=multi_processing", "--direct_num_workers=2"],
            )
        )
    per100 = 100e6 / size
    found: dict = {}
    for i in range(runs):
        for name, extra in paths:
            for code, command in codes.items():  # alternately, so that both see the machine alike
                r = measure_process(
                    [
                        *command,
                        "vocab",
                        "--input",
                        big,
                        "--output",
                        tmp / code / "speed.txt",
                        "--vocab-size",
                        30000,
                        "--overwrite",
                        *extra,
                    ]
                )
                found.setdefault((name, code), []).append(r)
                print(
                    json.dumps(
                        {
                            "run": i + 1,
                            "path": name,
                            "code": code,
                            "wall_s": round(r["wall"], 1),
                            "cpu_s": round(r["cpu"], 1),
                            "peak_rss_mb": round(r["maxrss_mb"]),
                        }
                    ),
                    flush=True,
                )
    for (name, code), results in found.items():
        wall = statistics.median(r["wall"] for r in results)
        cpu = statistics.median(r["cpu"] for r in results)
        print(
            json.dumps(
                {
                    "path": name,
                    "code": code,
                    "text_mb": round(size / 1e6, 1),
                    "repeats": rep,
                    "runs": len(results),
                    "median_wall_s_per_100mb": round(wall * per100, 1),
                    "median_cpu_s_per_100mb": round(cpu * per100, 1),
                    "median_peak_rss_mb": round(statistics.median(r["maxrss_mb"] for r in results)),
                }
            ),
            flush=True,
        )


_DISTINCT = """
import json, random, resource, sys, time
from collections import Counter
sys.path.insert(0, sys.argv[2])
from bertcorpus.wordpiece.training import TrainingConfig, train
from bertcorpus.wordpiece.word_counting import WordCounter
words = [l.split("\\t")[0] for l in open(sys.argv[3], encoding="utf-8")]
rng = random.Random(0)
counter = WordCounter(max_words=int(sys.argv[1]))
start = time.time()
batch = Counter()
while len(counter.counts) < int(sys.argv[1]) * 0.9:
    for _ in range(200_000):
        batch[rng.choice(words) + rng.choice(words)] += rng.choice((1, 1, 1, 2, 3, 8))
    counter.add_counts(batch)
    batch = Counter()
counted = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
trained = train(counter.counts, TrainingConfig(vocab_size=30000))
print(json.dumps({"distinct_words": len(counter.counts), "pruned_words": counter.pruned_words,
                  "rss_after_counting_mb": round(counted),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                  "seconds": round(time.time() - start, 1), "learned": trained.learned}))
"""


def distinct_words(docs, count: int, tmp: Path) -> None:
    """Memory with the counter full: made-up words (two real words glued) up to `count` distinct."""
    from bertcorpus.wordpiece.word_counting import ChunkBatch

    batch = ChunkBatch(True)
    for _, text in docs:
        batch.add(text)
    vocabulary = tmp / "words.tsv"
    vocabulary.write_text("".join(f"{w}\t{n}\n" for w, n in batch.drain().items() if w.isalpha()), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-c", _DISTINCT, str(count), str(ROOT), str(vocabulary)], capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    print(out.stdout.strip(), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="8000,16000,30000", help="vocab sizes to compare with the stock trainer")
    parser.add_argument(
        "--holdout-fraction",
        type=float,
        default=0.05,
        help="share of documents held out for the quality figures (default 0.05)",
    )
    parser.add_argument("--mb", type=float, default=100.0, help="MB of (repeated) text for the speed run; 0 skips")
    parser.add_argument("--beam", action="store_true", help="also time --count-with-beam with 2 worker processes")
    parser.add_argument("--runs", type=int, default=1, help="speed runs of each command; medians are reported")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="TREE",
        help="also time the code of this checkout, alternately with the current code",
    )
    parser.add_argument(
        "--distinct-words",
        type=int,
        default=0,
        help="also measure memory with this many distinct words held (e.g. 2000000)",
    )
    args = parser.parse_args()
    docs = real_documents()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.sizes:
            compare(docs, [int(s) for s in args.sizes.split(",")], args.holdout_fraction, tmp)
        if args.mb:
            speed(docs, args.mb, args.beam, args.runs, args.baseline, tmp)
        if args.distinct_words:
            distinct_words(docs, args.distinct_words, tmp)


if __name__ == "__main__":
    main()
