"""What the new forms and tokenizers of `create` cost, side by side with the WordPiece path on the same text, in
one script on one machine (figures in docs/benchmarks.md):

  * create's CPU (user+sys of the command and its workers, in memory, the least of --repeat runs) with a
    WordPiece vocab.txt, a published byte-level BPE tokenizer.json and an XLM-R-shaped Unigram one, and the
    BPE's ratio to WordPiece's (target at most 1.5), whole command and marginal (large run less a tiny one);
  * tokenisation alone, in a process of its own on one thread: create's DocumentTokenizer over every document,
    against `Tokenizer.encode_batch` of the very pieces it encodes (target: no more CPU than encode_batch);
  * --record-format megatron against the Parquet form: CPU and bytes;
  * --provenance: CPU and bytes it adds to the Parquet and TFRecord forms.

The text is the real books and Wikipedia articles of bench_create.py, repeated with fresh ids to --mb megabytes.

    .venv/bin/python benchmarks/bench_tokenizers.py [--mb 5] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS))
sys.path.insert(0, str(BENCHMARKS.parent / "tests"))

from bench_create import SAMPLE, VOCAB, cheaper, fresh, instances, measure, write_corpus

from tokenizer_files import tokenizer_folder

EXE = str(Path(sys.executable).parent / "bertcorpus")
BPE_FLAGS = ["--special-token", "cls=<SOS>", "--special-token", "sep=<EOT>", "--special-token", "mask=<META>"]

_TOKENISE = """
import json, resource, sys, time
from itertools import chain
sys.path.insert(0, sys.argv[3])
import numpy as np
from tokenizers import Tokenizer
from bertcorpus.transforms.document_tokens import DocumentTokenizer
from bertcorpus.transforms.sentence_spans import text_pieces
from bertcorpus.wordpiece.tokenizer_file import TokenizerFile, read_tokenizer_source
from bertcorpus.wordpiece.vocab import Vocab

kind, path = sys.argv[1], sys.argv[2]
docs = [json.loads(line)["text"] for line in open(sys.argv[4], encoding="utf-8")]
flags = json.loads(sys.argv[5])
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
if kind == "vocab":
    tokenizer = DocumentTokenizer(Vocab.load(path))
else:
    tokenizer = DocumentTokenizer(TokenizerFile(read_tokenizer_source(path, flags)))
start = cpu()
tokens = sum(len(tokenizer.tokenize(text).ids) for text in docs)
ours = cpu() - start
result = {"ours_cpu_s": ours, "tokens": tokens}
if kind != "vocab":
    hf = Tokenizer.from_file(path + "/tokenizer.json")
    hf.encode_special_tokens = True
    pieces = [text_pieces(text)[0] for text in docs]
    start = cpu()
    reference = sum(len(e.ids) for p in pieces for e in hf.encode_batch(p, add_special_tokens=False))
    result.update(encode_batch_cpu_s=cpu() - start, encode_batch_tokens=reference)
    result["cached"] = tokenizer.pieces.cached
print(json.dumps(result))
"""


def tokenise_alone(kind: str, path: Path, corpus: Path, flags: dict) -> dict:
    """Tokenisation in a process of its own on one thread (the tokenizers library's and numpy's)."""
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "RAYON_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    src = str(BENCHMARKS.parent / "src")
    done = subprocess.run(
        [sys.executable, "-c", _TOKENISE, kind, str(path), src, str(corpus), json.dumps(flags)],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout)


def output_bytes(output: Path) -> int:
    return sum(p.stat().st_size for p in output.rglob("*") if p.is_file() and p.name != "manifest.json")


def create(inputs: list, output: Path, *flags: str) -> dict:
    run = measure(
        [
            EXE,
            "create",
            "--input",
            *map(str, inputs),
            "--output",
            str(output),
            *flags,
            "--direct_running_mode=in_memory",
        ]
    )
    run["instances"] = instances(output) if (output / "manifest.json").exists() and "megatron" not in flags else 0
    run["bytes"] = output_bytes(output)
    return run


def least(repeat: int, inputs: list, output: Path, *flags: str) -> dict:
    best = None
    for _ in range(repeat):
        best = cheaper(best, create(inputs, fresh(output), *flags))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=5.0, help="MB of text (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the least CPU counts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = tmp / "corpus.jsonl"
        size, _ = write_corpus(corpus, args.mb)
        print(f"input: {size / 1e6:.1f} MB of text", flush=True)
        bpe = tokenizer_folder("anthropic-claude-v1", tmp)
        unigram = tokenizer_folder("xlmr-shape", tmp)
        vocabularies = {
            "wordpiece": ["--vocab", str(VOCAB)],
            "byte-level-bpe": ["--tokenizer", str(bpe), *BPE_FLAGS],
            "unigram": ["--tokenizer", str(unigram)],
        }
        runs = {}
        for name, flags in vocabularies.items():
            tiny = least(args.repeat, [SAMPLE], tmp / "tiny", *flags, "--dupe-factor", "10")
            large = least(args.repeat, [corpus], tmp / "large", *flags, "--dupe-factor", "10")
            runs[name] = (tiny, large)
            print(
                json.dumps(
                    {
                        "vocabulary": name,
                        "create_cpu_s": round(large["cpu"], 2),
                        "marginal_cpu_s_per_mb": round((large["cpu"] - tiny["cpu"]) / (size / 1e6), 3),
                        "instances": large["instances"],
                        "peak_rss_mb": round(large["maxrss_mb"]),
                    }
                ),
                flush=True,
            )
        wp, bp = runs["wordpiece"], runs["byte-level-bpe"]
        print(
            json.dumps(
                {
                    "bpe_vs_wordpiece_create_cpu": round(bp[1]["cpu"] / wp[1]["cpu"], 3),
                    "bpe_vs_wordpiece_marginal_cpu": round(
                        (bp[1]["cpu"] - bp[0]["cpu"]) / (wp[1]["cpu"] - wp[0]["cpu"]), 3
                    ),
                }
            ),
            flush=True,
        )
        alone = {
            "wordpiece": tokenise_alone("vocab", VOCAB, corpus, {}),
            "byte-level-bpe": tokenise_alone("tokenizer", bpe, corpus, dict(f.split("=") for f in BPE_FLAGS[1::2])),
            "unigram": tokenise_alone("tokenizer", unigram, corpus, {}),
        }
        for name, found in alone.items():
            row = {"tokenisation": name, "ours_cpu_s": round(found["ours_cpu_s"], 3), "tokens": found["tokens"]}
            if "encode_batch_cpu_s" in found:
                row.update(
                    encode_batch_cpu_s=round(found["encode_batch_cpu_s"], 3),
                    ours_vs_encode_batch=round(found["ours_cpu_s"] / found["encode_batch_cpu_s"], 3),
                    same_tokens=found["tokens"] == found["encode_batch_tokens"],
                    unit_cache=found["cached"],
                )
            print(json.dumps(row), flush=True)
        dynamic = ["--vocab", str(VOCAB), "--masking", "dynamic"]
        forms = {
            "parquet": least(args.repeat, [corpus], tmp / "parquet", *dynamic),
            "megatron": least(
                args.repeat, [corpus], tmp / "megatron", "--vocab", str(VOCAB), "--record-format", "megatron"
            ),
            "parquet --provenance": least(args.repeat, [corpus], tmp / "parquet-p", *dynamic, "--provenance"),
            "tfrecord": least(args.repeat, [corpus], tmp / "tfrecord", "--vocab", str(VOCAB)),
            "tfrecord --provenance": least(
                args.repeat, [corpus], tmp / "tfrecord-p", "--vocab", str(VOCAB), "--provenance"
            ),
        }
        for name, run in forms.items():
            print(json.dumps({"form": name, "create_cpu_s": round(run["cpu"], 2), "bytes": run["bytes"]}), flush=True)
        for plain in ("parquet", "tfrecord"):
            with_it = forms[f"{plain} --provenance"]
            print(
                json.dumps(
                    {
                        "provenance_on": plain,
                        "cpu_ratio": round(with_it["cpu"] / forms[plain]["cpu"], 3),
                        "bytes_ratio": round(with_it["bytes"] / forms[plain]["bytes"], 3),
                    }
                ),
                flush=True,
            )
        print(
            json.dumps(
                {
                    "megatron_vs_parquet_cpu": round(forms["megatron"]["cpu"] / forms["parquet"]["cpu"], 3),
                    "megatron_vs_parquet_bytes": round(forms["megatron"]["bytes"] / forms["parquet"]["bytes"], 3),
                }
            )
        )


if __name__ == "__main__":
    main()
