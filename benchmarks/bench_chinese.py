"""The Chinese steps, each against its baseline in the same run on the same machine, in CPU seconds (time.process_time)
per MB of UTF-8 text (10**6 bytes):

1. converter markup: extract-wiki's cleaning of the real zhwiki article 量子力学 without resolving its markup (the
   baseline, which leaves the rules in the text), and with the markup resolved and the text converted to zh-hans
   and to zh-tw; per MB of the article's wikitext.
2. conversion tables: zhconv-rs (MediaWiki's tables) against OpenCC's s2t/t2s (`pip install opencc`, benchmark only)
   on the mixed-script zhwiki text 漢語 and the book 豆棚閒話: speed, and the share of characters on which the two
   agree, per direction.
3. whole-word masking's segmenter: create's tokenisation of Chinese documents (the bundled modern prose, zh-hans)
   with and without jieba's words, through TokenizeBuckets.tokenize itself; the difference is the segmenter's cost.

    .venv/bin/python benchmarks/bench_chinese.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from test_chinese_vocab import chinese_documents

from bertcorpus.pipeline.create.config import CreateConfig
from bertcorpus.pipeline.create.job_vocab import JobVocab
from bertcorpus.pipeline.create.steps import TokenizeBuckets
from bertcorpus.pipeline.inputs.formats import SourceDocument
from bertcorpus.transforms.wikitext import clean_wikitext
from bertcorpus.transforms.zh_variants import resolve_converter_markup, sweep_residue

ZH = REPO / "tests" / "data" / "zh"


def cpu(fn, repeat: int) -> float:
    """The median CPU seconds of fn() over `repeat` runs (after one warm-up run)."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def converter_markup(repeat: int) -> None:
    wikitext = (ZH / "zhwiki-quantum-mechanics.wikitext").read_text(encoding="utf-8")
    mb = len(wikitext.encode()) / 1e6

    def resolved(variant: str):
        def run():
            r = resolve_converter_markup(wikitext, variant)
            sweep_residue(r.rules.convert(clean_wikitext(r.wikitext, title="量子力学")), r.counts)

        return run

    base = cpu(lambda: clean_wikitext(wikitext, title="量子力学"), repeat)
    print(f"1. converter markup ({mb:.3f} MB of wikitext, the article 量子力学)")
    print(f"   clean_wikitext alone (markup left in): {base / mb:.3f} CPU-s/MB")
    for variant in ("zh-hans", "zh-tw"):
        t = cpu(resolved(variant), repeat)
        print(f"   resolved + converted to {variant}: {t / mb:.3f} CPU-s/MB ({t / base:.2f}x the cleaning alone)")


def conversion_tables(repeat: int) -> None:
    try:
        import opencc
    except ImportError:
        print("2. conversion tables: OpenCC is not installed (pip install opencc): skipped")
        return
    from zhconv_rs import zhconv

    texts = {
        "漢語 (mixed scripts)": (ZH / "zhwiki-hanyu-plain.txt").read_text(encoding="utf-8"),
        "豆棚閒話 (traditional)": (ZH / "pg25328-tou-peng-hsien-hua.txt").read_text(encoding="utf-8-sig"),
    }
    print("2. conversion tables: zhconv-rs (MediaWiki's) and OpenCC")
    for name, text in texts.items():
        mb = len(text.encode()) / 1e6
        for ours, theirs, config in (("zh-Hans", "t2s", "to simplified"), ("zh-Hant", "s2t", "to traditional")):
            converter = opencc.OpenCC(theirs)
            a, b = zhconv(text, ours), converter.convert(text)
            agree = sum(x == y for x, y in zip(a, b)) / max(len(a), 1) if len(a) == len(b) else float("nan")
            t_zh = cpu(lambda t=text, v=ours: zhconv(t, v), repeat)
            t_cc = cpu(lambda t=text, c=converter: c.convert(t), repeat)
            print(
                f"   {name} {config}: zhconv-rs {mb / t_zh:,.0f} MB/CPU-s, OpenCC {mb / t_cc:,.0f} MB/CPU-s "
                f"({t_cc / t_zh:.1f}x zhconv-rs's time); the same character at {agree:.2%} of positions"
            )


def segmenter(repeat: int, vocab: str) -> None:
    docs = [SourceDocument(d["id"], text=d["text"], language="zh-Hans") for d in chinese_documents()]
    mb = sum(len(d.text.encode()) for d in docs) / 1e6
    job_vocab = JobVocab(vocab, None)

    def tokenize(whole_word: bool, segmenter_name: str):
        config = CreateConfig([], "", vocab, whole_word_mask=whole_word, segmenter=segmenter_name)
        step = TokenizeBuckets(config, job_vocab)
        step.setup()
        step.vocab_ready()
        return lambda: step.tokenize(docs)

    base = cpu(tokenize(False, "none"), repeat)
    with_words = cpu(tokenize(True, "jieba"), repeat)
    print(f"3. whole-word masking's segmenter ({mb:.2f} MB of Chinese documents, tokenised as create does)")
    print(f"   tokenize alone: {base / mb:.3f} CPU-s/MB; with jieba's words: {with_words / mb:.3f} CPU-s/MB")
    print(f"   the segmenter adds {(with_words - base) / mb:.3f} CPU-s per MB of Chinese text")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--vocab", default=None, help="a Chinese vocab (default: one trained here on the bundled text)")
    args = parser.parse_args()
    vocab = args.vocab or train_vocab()
    converter_markup(args.repeat)
    conversion_tables(args.repeat)
    segmenter(args.repeat, vocab)


def train_vocab() -> str:
    import json
    import tempfile

    from bertcorpus.pipeline.cli.commands import main as run_cli

    folder = Path(tempfile.mkdtemp(prefix="bench-zh-"))
    corpus = folder / "zh.jsonl"
    corpus.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in chinese_documents()), "utf-8")
    assert run_cli(["vocab", "--input", str(corpus), "--output", str(folder / "vocab.txt")]) == 0
    return str(folder / "vocab.txt")


if __name__ == "__main__":
    main()
