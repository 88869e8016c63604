"""Run the chain (extract-wiki, extract-books, vocab, create) on the bundled samples with a given `bertcorpus`
executable and print a sha256 for every file it made, one per line, sorted by name: of the bytes of the records,
the vocab and the errors files, and of the rows of the documents Parquet files (each pyarrow release writes its
own version into a Parquet file, and Beam 2.71 comes with an older pyarrow).

Two installations that print the same lines made the same records, vocab and documents; .ci/versions compares the
main environment with the newest Python and the oldest supported Beam this way.

    python .ci/chain_digests.py PATH/TO/bertcorpus OUTPUT_DIR
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
LOCAL = ["--runner", "DirectRunner"]


def run(exe: str, *argv) -> None:
    done = subprocess.run([exe, *map(str, argv)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv[:1]))} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def main() -> None:
    exe, out = sys.argv[1], Path(sys.argv[2])
    wiki, books, vocab, records = out / "wiki", out / "books", out / "vocab.txt", out / "records"
    run(
        exe, "extract-wiki", "--input", DATA / "wiki" / "enwiki-2014-sample-truncated.xml.bz2", "--output", wiki, *LOCAL
    )
    run(exe, "extract-books", "--input", DATA / "books", "--output", books, *LOCAL)
    documents = [wiki / "documents-*.parquet", books / "documents-*.parquet"]
    run(exe, "vocab", "--input", *documents, "--vocab-size", "3000", "--output", vocab)
    run(
        exe,
        "create",
        "--input",
        *documents,
        "--vocab",
        vocab,
        "--output",
        records,
        "--seq-configs",
        "128:20,512:80",
        "--dupe-factor",
        "2",
        *LOCAL,
    )
    made = [
        p
        for pattern in (
            "wiki/documents-*",
            "wiki/errors-*",
            "books/documents-*",
            "books/errors-*",
            "vocab.txt",
            "records/seq*/*.tfrecord",
        )
        for p in out.glob(pattern)
    ]
    for path in sorted(made):
        print(digest(path), path.relative_to(out))


def digest(path: Path) -> str:
    if path.suffix != ".parquet":
        return hashlib.sha256(path.read_bytes()).hexdigest()
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    return "rows:" + hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


if __name__ == "__main__":
    main()
