"""Run the demo's data stages with a given `bertcorpus` executable (`bertcorpus demo --skip-train`: the demo's
command lines are the one copy of the chain) and print a sha256 for every file they made, one per line, sorted by
name: of the bytes of the records and the vocab, of the rows of the documents Parquet files (each pyarrow release
writes its own version into a Parquet file, and Beam 2.71 comes with an older pyarrow), and of the errors files with
each input named by its file name (the samples lie where bertcorpus is installed).

Two installations that print the same lines made the same records, vocab and documents; .ci/versions compares the
main environment with the newest Python and the oldest supported Beam this way. The same version must make the
same bytes: --check compares the lines with the golden digests of the version that wrote the files
(chain_digests.json, keyed by version; a version without an entry must make the bytes of the latest one before
it), and --record writes that version's entry after a change of outputs (with a version bump and a CHANGELOG.md
entry saying which outputs changed and why).

    python .ci/chain_digests.py [--check | --record] PATH/TO/bertcorpus OUTPUT_DIR
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "chain_digests.json"
MADE = (
    "wiki/documents-*",
    "wiki/errors-*",
    "books/documents-*",
    "books/errors-*",
    "vocab/vocab.txt",
    "records/seq*/*.tfrecord",
)


def run_demo(exe: str, out: Path) -> None:
    command = [exe, "demo", "--skip-train", "--force", "--output", str(out)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"demo failed ({done.returncode}):\n{done.stderr[-3000:]}")


def digests(out: Path) -> dict[str, str]:
    made = [p for pattern in MADE for p in out.glob(pattern)]
    return {str(path.relative_to(out)): digest(path) for path in sorted(made)}


def digest(path: Path) -> str:
    if path.suffix == ".jsonl":
        return "inputs named:" + _sha256(_named_inputs(path.read_text(encoding="utf-8")).encode())
    if path.suffix != ".parquet":
        return _sha256(path.read_bytes())
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    return "rows:" + _sha256(json.dumps(rows, sort_keys=True).encode())


def _named_inputs(errors: str) -> str:
    """An errors file with each record's input named by its file name: where the samples lie (a checkout, a
    virtual environment's site-packages) is no part of what the run made."""
    records = [json.loads(line) for line in errors.splitlines()]
    return "".join(json.dumps({**r, "input": Path(r["input"]).name}) + "\n" for r in records)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def golden_for(version: str, golden: dict[str, dict]) -> tuple[str, dict] | None:
    """The entry that `version` must match: its own, else the latest one before it."""
    earlier = sorted((v for v in golden if version_key(v) <= version_key(version)), key=version_key)
    return (earlier[-1], golden[earlier[-1]]) if earlier else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="compare with the golden digests of the files' version")
    mode.add_argument("--record", action="store_true", help="write the golden digests of the files' version")
    parser.add_argument("exe")
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    run_demo(args.exe, args.out)
    made = digests(args.out)
    for name, sha in made.items():
        print(sha, name)
    version = json.loads((args.out / "records" / "manifest.json").read_text())["version"]
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if args.record:
        GOLDEN.write_text(json.dumps({**golden, version: made}, indent=1, sort_keys=True) + "\n")
    elif args.check:
        found = golden_for(version, golden)
        if found is None or found[1] != made:
            against = f"version {found[0]}'s golden digests" if found else "no golden digests"
            raise SystemExit(
                f"version {version} made other bytes than {against} ({GOLDEN.name}): a change of outputs needs a "
                "version bump, a CHANGELOG.md entry and --record"
            )


if __name__ == "__main__":
    main()
