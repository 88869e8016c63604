"""`bertcorpus dedup` against datatrove's MinHash dedup on the same ~50 MB of real documents, with the same shingles and
bands: CPU seconds per MB for each, precision and recall of the pairs each finds on a sample, and the cost of
decontamination against 10,000 benchmark examples.

The corpus: the shared Wikipedia sample and Gutenberg books, extracted by the project's own extract-wiki and
extract-books, the books cut at paragraphs into documents of ~8 KB (base.jsonl), and five later revisions of them
made by edits of the kinds real revisions have (rev1..rev5.jsonl), each document, by a stable hash of its id and the
revision: kept as it is, spaced and capitalised differently, a few words changed and a sentence added, cut to half
its paragraphs, or left out. The six files are dedup's six sources in that order, and datatrove's input.

Each tool runs as a subprocess, as a user would, and is timed from start to exit: wall time, and CPU time (user +
sys of the process and the worker processes it waited for), so both include starting the interpreter and the
library. MB is 10**6 bytes of document text. datatrove runs its four MinHash stages (signatures, buckets,
clusters, filter) with one task on LocalPipelineExecutor, from its own virtual environment (--datatrove-python;
`python -m venv /work/peers/datatrove-venv && /work/peers/datatrove-venv/bin/pip install datatrove spacy`).

Precision and recall, on a sample of whole families (a base document and its revisions): the truth is every pair
of the sample whose exact Jaccard similarity of word 5-shingles is at or above the threshold, measured here with
Python sets over all pairs. A pair is found when both documents end in one cluster (recall). Precision is over the
pairs each tool bases a removal on: for dedup, each removed document and the neighbour its ledger row names
(match, or match.linked_by); for datatrove, the pairs its LSH buckets matched (its .dups files).

Run from the repository root:
    .venv/bin/python benchmarks/bench_dedup.py --work /tmp/bench-dedup \
        --datatrove-python /work/peers/datatrove-venv/bin/python
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import struct
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = next(
    (p for p in (REPO.parent / "shared" / "data", REPO.parent.parent / "shared" / "data") if p.is_dir()), None
)
WIKI_DUMPS = ["enwiki-2014-sample-truncated.xml.bz2", "enwiki-table-markup.xml.bz2", "enwiki-small-sample.xml.bz2"]
SOURCES = ["base", "rev1", "rev2", "rev3", "rev4", "rev5"]
SECTION_CHARS = 8000
BENCHMARK_EXAMPLES = 10_000

sys.path.insert(0, str(REPO))


def run(command: list[str], **kwargs) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds, the finished process) of one subprocess."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done


def bertcorpus(*args: str) -> list[str]:
    return [str(REPO / ".venv" / "bin" / "bertcorpus"), *map(str, args)]


# ---------------------------------------------------------------------------------------------- the corpus


def _unit(*parts) -> float:
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:8], "little") / 2**64


def revised(doc_id: str, text: str, revision: int) -> str | None:
    """A later revision of a document, or None where it was left out."""
    u = _unit(doc_id, revision)
    paragraphs = text.split("\n\n")
    if u < 0.3:
        return text
    if u < 0.45:
        return "\n\n  ".join([paragraphs[0].swapcase(), *paragraphs[1:]])
    if u < 0.7:
        rng = random.Random(f"{doc_id}/{revision}")
        words = text.split(" ")
        for _ in range(max(1, len(words) // 400)):
            words[rng.randrange(len(words))] = rng.choice(["however", "notably", "also", "perhaps"])
        return " ".join(words) + f"\n\nRevision {revision} added this sentence to the text."
    if u < 0.85:
        return "\n\n".join(paragraphs[::2])
    return None


def sections(doc_id: str, text: str) -> list[tuple[str, str]]:
    out, part, size = [], [], 0
    for paragraph in text.split("\n\n"):
        part.append(paragraph)
        size += len(paragraph)
        if size >= SECTION_CHARS:
            out.append((f"{doc_id}#{len(out)}", "\n\n".join(part)))
            part, size = [], 0
    if part:
        out.append((f"{doc_id}#{len(out)}", "\n\n".join(part)))
    return out


def build_corpus(work: Path) -> dict[str, Path]:
    """base.jsonl and rev1..rev5.jsonl under work/corpus (made once)."""
    import pyarrow.parquet as pq

    corpus = work / "corpus"
    files = {name: corpus / f"{name}.jsonl" for name in SOURCES}
    if all(f.exists() for f in files.values()):
        return files
    wiki, books = work / "extracted-wiki", work / "extracted-books"
    run(
        bertcorpus(
            "extract-wiki", "--input", *(SHARED / "wiki" / d for d in WIKI_DUMPS), "--output", wiki, "--overwrite"
        ),
        cwd=REPO,
    )
    run(bertcorpus("extract-books", "--input", SHARED / "books", "--output", books, "--overwrite"), cwd=REPO)
    docs = []
    for folder, cut in ((wiki, False), (books, True)):
        for f in sorted(folder.glob("documents-*.parquet")):
            for row in pq.read_table(f).to_pylist():
                docs += sections(row["id"], row["text"]) if cut else [(row["id"], row["text"])]
    corpus.mkdir(parents=True, exist_ok=True)
    for revision, name in enumerate(SOURCES):
        with files[name].open("w", encoding="utf-8") as out:
            for doc_id, text in docs:
                text = text if revision == 0 else revised(doc_id, text, revision)
                if text is not None:
                    out.write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
    return files


def text_mb(files) -> float:
    return sum(len(json.loads(line)["text"].encode()) for f in files for line in f.open(encoding="utf-8")) / 1e6


# ---------------------------------------------------------------------------------------------- the two tools

DATATROVE_SCRIPT = """
import sys
from datatrove.executor.local import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster,
    MinhashDedupFilter, MinhashDedupSignature)
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
from datatrove.utils.hashing import HashConfig

inputs, out, bands, rows, shingle = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
config = MinhashConfig(n_grams=shingle, num_buckets=bands, hashes_per_bucket=rows,
                       hash_config=HashConfig(precision=64))
read = lambda: JsonlReader(inputs, glob_pattern="*.jsonl")
for step in (
    [read(), MinhashDedupSignature(output_folder=f"{out}/signatures", config=config)],
    [MinhashDedupBuckets(input_folder=f"{out}/signatures", output_folder=f"{out}/buckets", config=config)],
    [MinhashDedupCluster(input_folder=f"{out}/buckets", output_folder=f"{out}/remove_ids", config=config,
                         save_cluster_id=True)],
    [read(), MinhashDedupFilter(input_folder=f"{out}/remove_ids", load_cluster_ids=True,
                                exclusion_writer=JsonlWriter(f"{out}/removed")), JsonlWriter(f"{out}/kept")],
):
    tasks = bands if isinstance(step[0], MinhashDedupBuckets) else 1
    LocalPipelineExecutor(pipeline=step, tasks=tasks, workers=1, logging_dir=f"{out}/logs/{type(step[-1]).__name__}",
                          skip_completed=False).run()
"""


def run_ours(files: dict[str, Path], out: Path, bands: int, rows: int, shingle: int, *extra) -> tuple[float, float]:
    wall, cpu, _ = run(
        bertcorpus(
            "dedup",
            "--input",
            *files.values(),
            "--output",
            out,
            "--overwrite",
            "--bands",
            bands,
            "--rows",
            rows,
            "--num-hashes",
            bands * rows,
            "--shingle-words",
            shingle,
            *extra,
            "--runner=DirectRunner",
            "--direct_running_mode=in_memory",
        ),
        cwd=REPO,
    )
    return wall, cpu


def run_datatrove(python: str, files: dict[str, Path], out: Path, bands: int, rows: int, shingle: int):
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    script = out / "minhash.py"
    script.write_text(DATATROVE_SCRIPT)
    inputs = files["base"].parent
    wall, cpu, _ = run([python, str(script), str(inputs), str(out), str(bands), str(rows), str(shingle)], cwd=out)
    return wall, cpu


# ---------------------------------------------------------------------------------------------- precision and recall


def shingle_set(text: str, k: int) -> set:
    from bertcorpus.transforms.minhash import fold_text

    words = fold_text(text).split()
    return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}


def sample_corpus(files: dict[str, Path], work: Path, families: int) -> dict[str, Path]:
    """The base documents of `families` random families and all their revisions, as the same six sources."""
    base_ids = [json.loads(line)["id"] for line in files["base"].open(encoding="utf-8")]
    chosen = set(random.Random(1).sample(base_ids, families))
    sample = {name: work / "sample" / f"{name}.jsonl" for name in SOURCES}
    sample["base"].parent.mkdir(parents=True, exist_ok=True)
    for name, path in files.items():
        with sample[name].open("w", encoding="utf-8") as out:
            for line in path.open(encoding="utf-8"):
                if json.loads(line)["id"] in chosen:
                    out.write(line)
    return sample


def true_pairs(sample: dict[str, Path], threshold: float, k: int) -> tuple[list, dict, set]:
    """(documents as (source, id), their shingle sets, every pair at or above the threshold)."""
    docs, sets = [], {}
    for name, path in sample.items():
        for line in path.open(encoding="utf-8"):
            row = json.loads(line)
            docs.append((name, row["id"]))
            sets[(name, row["id"])] = shingle_set(row["text"], k)
    truth = set()
    for i, a in enumerate(docs):
        for b in docs[i + 1 :]:
            x, y = sets[a], sets[b]
            # |A ∩ B| / |A ∪ B| <= min / max: a pair of sizes further apart cannot reach the threshold
            near_in_size = x and y and min(len(x), len(y)) >= threshold * max(len(x), len(y))
            if near_in_size and len(x & y) / len(x | y) >= threshold:
                truth.add((a, b) if a < b else (b, a))
    return docs, sets, truth


def _jaccard(sets, a, b) -> float:
    x, y = sets[a], sets[b]
    return len(x & y) / len(x | y) if x and y else 0.0


def _recall(truth: set, cluster_of: dict) -> float:
    found = sum(1 for a, b in truth if cluster_of.get(a, a) == cluster_of.get(b, b))
    return found / len(truth) if truth else 1.0


def our_quality(out: Path, sets: dict, truth: set, threshold: float) -> dict:
    rows = [json.loads(line) for f in sorted(out.glob("removed-*.jsonl")) for line in f.open(encoding="utf-8")]
    rows = [r for r in rows if r["reason"] in ("exact", "near")]
    cluster_of = {(r["source"], r["id"]): (r["match"]["source"], r["match"]["id"]) for r in rows}
    evidence = [
        ((r["source"], r["id"]), (lambda m: (m["source"], m["id"]))(r["match"].get("linked_by", r["match"])))
        for r in rows
    ]
    precise = sum(_jaccard(sets, a, b) >= threshold for a, b in evidence)
    return {
        "pairs": len(evidence),
        "precision": precise / len(evidence) if evidence else 1.0,
        "recall": _recall(truth, cluster_of),
    }


def datatrove_quality(out: Path, docs: list, sets: dict, truth: set, threshold: float) -> dict:
    """datatrove numbers documents by their place in its one task, which reads the six files in name order; its
    .dups files hold the pairs its buckets matched, its .clusters files each clustered document's cluster."""
    order = sorted(docs, key=lambda d: SOURCES.index(d[0]))  # stable: each file's documents in file order
    pairs = [
        (order[d1], order[d2])
        for dups in sorted((out / "buckets").glob("*.dups"))
        for _, d1, _, d2 in struct.iter_unpack("<4I", dups.read_bytes())
    ]
    clusters = {
        order[doc]: cluster
        for f in sorted((out / "remove_ids").glob("*.clusters"))
        for doc, cluster in struct.iter_unpack("<2I", f.read_bytes())
    }
    precise = sum(_jaccard(sets, a, b) >= threshold for a, b in pairs)
    return {
        "pairs": len(pairs),
        "precision": precise / len(pairs) if pairs else 1.0,
        "recall": _recall(truth, clusters),
    }


# ---------------------------------------------------------------------------------------------- decontamination


def write_benchmark(files: dict[str, Path], path: Path, examples: int, share: float) -> None:
    """A SQuAD v2 file of `examples` questions, two on each of examples / 2 real paragraphs: a `share` of them taken
    from the corpus as they are (so that matches are found and cut), the others reversed word by word, so that
    their n-grams are in no document."""
    rng = random.Random(5)
    paragraphs = [
        p
        for line in files["base"].open(encoding="utf-8")
        for p in json.loads(line)["text"].split("\n\n")
        if 30 <= len(p.split()) <= 300
    ]
    rng.shuffle(paragraphs)
    contexts = examples // 2
    found = round(contexts * share)
    chosen = paragraphs[:found] + [" ".join(p.split()[::-1]) for p in paragraphs[found:contexts]]
    data = [
        {
            "title": f"t{i}",
            "paragraphs": [
                {
                    "context": p,
                    "qas": [
                        {"id": f"q{i}a", "question": "What is said here?"},
                        {"id": f"q{i}b", "question": "Who says it?"},
                    ],
                }
            ],
        }
        for i, p in enumerate(chosen)
    ]
    path.write_text(json.dumps({"version": "v2.0", "data": data}))


# ---------------------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="where the corpus and the outputs go")
    parser.add_argument("--datatrove-python", help="the python of a virtual environment with datatrove installed")
    parser.add_argument("--bands", type=int, default=20)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--shingle-words", type=int, default=5)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--families", type=int, default=250, help="base documents in the precision/recall sample")
    parser.add_argument(
        "--contaminated-share", type=float, default=0.1, help="share of the benchmark's paragraphs the corpus holds"
    )
    parser.add_argument("--skip", nargs="*", default=[], choices=["speed", "quality", "decontamination"])
    args = parser.parse_args()
    files = build_corpus(args.work)
    mb = text_mb(files.values())
    lsh = (args.bands, args.rows, args.shingle_words)
    print(
        f"corpus: {mb:.1f} MB of document text in {len(files)} sources ({args.bands} bands × {args.rows} rows, "
        f"{args.shingle_words}-word shingles)"
    )
    if "speed" not in args.skip:
        wall, cpu = run_ours(files, args.work / "ours", *lsh)
        print(f"bertcorpus dedup     wall {wall:7.1f} s  CPU {cpu:7.1f} s  {cpu / mb:.3f} CPU s/MB")
        if args.datatrove_python:
            wall_d, cpu_d = run_datatrove(args.datatrove_python, files, args.work / "datatrove", *lsh)
            print(f"datatrove minhash    wall {wall_d:7.1f} s  CPU {cpu_d:7.1f} s  {cpu_d / mb:.3f} CPU s/MB")
            print(f"ratio (ours / datatrove, CPU per MB): {cpu / cpu_d:.3f}")
    if "quality" not in args.skip:
        sample = sample_corpus(files, args.work, args.families)
        docs, sets, truth = true_pairs(sample, args.threshold, args.shingle_words)
        print(
            f"sample: {len(docs)} documents of {args.families} families, {len(docs) * (len(docs) - 1) // 2:,} "
            f"pairs, {len(truth):,} at Jaccard >= {args.threshold}"
        )
        run_ours(sample, args.work / "ours-sample", *lsh, "--threshold", str(args.threshold))
        q = our_quality(args.work / "ours-sample", sets, truth, args.threshold)
        print(f"bertcorpus dedup     precision {q['precision']:.4f} over {q['pairs']} pairs, recall {q['recall']:.4f}")
        if args.datatrove_python:
            run_datatrove(args.datatrove_python, sample, args.work / "datatrove-sample", *lsh)
            q = datatrove_quality(args.work / "datatrove-sample", docs, sets, truth, args.threshold)
            print(
                f"datatrove minhash    precision {q['precision']:.4f} over {q['pairs']} pairs, recall {q['recall']:.4f}"
            )
    if "decontamination" not in args.skip:
        bench = args.work / "squad" / "dev-v2.0.json"
        bench.parent.mkdir(parents=True, exist_ok=True)
        write_benchmark(files, bench, BENCHMARK_EXAMPLES, args.contaminated_share)
        _, cpu0 = run_ours(files, args.work / "ours", *lsh)
        _, cpu1 = run_ours(files, args.work / "ours-decontaminated", *lsh, "--decontaminate", bench)
        manifest = json.loads((args.work / "ours-decontaminated" / "manifest.json").read_text())
        (report,) = manifest["benchmarks"]
        print(
            f"decontamination ({args.contaminated_share:.0%} of the paragraphs in the corpus): "
            f"{report['examples']:,} examples ({report['texts']:,} texts, {report['ngrams']:,} "
            f"n-grams), {report['contaminated_examples']:,} found; dedup alone CPU {cpu0:.1f} s, with "
            f"decontamination {cpu1:.1f} s: +{(cpu1 - cpu0) / mb:.3f} CPU s/MB"
        )


if __name__ == "__main__":
    main()
