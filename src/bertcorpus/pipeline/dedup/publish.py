"""dedup's last step: the counts summed once and checked, one manifest per source (the schema of an extraction's, so
that create, vocab and stats read OUT/NAME like an extraction's output), the staged files moved into place, and
OUT/manifest.json written last.

Each source's documents add up: read = kept + removed (by reason) + skipped + errors, where a document longer than
--max-document-mb is read once and kept or removed as its pieces (read - split + pieces on the left), and so do its
characters: read = kept + removed. A run whose counts do not add up publishes nothing.
"""

from __future__ import annotations

import apache_beam as beam

from bertcorpus.pipeline.dedup.config import DedupConfig
from bertcorpus.pipeline.dedup.read import source_key
from bertcorpus.pipeline.dedup.write import REASONS
from bertcorpus.pipeline.inputs.reads import merge_file_stats
from bertcorpus.pipeline.sinks import output
from bertcorpus.pipeline.sinks.documents import AccountingError, languages_kept
from bertcorpus.transforms.decontamination import NgramIndex
from bertcorpus.transforms.near_duplicates import JACCARD_BINS

JOB = "dedup"
OWNED_GLOBS = [
    "*/documents-*.parquet",
    "*/errors-*.jsonl",
    f"*/{output.MANIFEST}",
    "removed-*.jsonl",
    "contaminated-*.jsonl",
]


def _prefixed(counts: dict, prefix: str) -> dict:
    return {k[len(prefix) :]: v for k, v in sorted(counts.items()) if k.startswith(prefix)}


def source_summary(config: DedupConfig, priority: int, counts: dict) -> dict:
    """What the counts say about one source: documents and characters, in and out."""
    mine = _prefixed(counts, source_key(priority, ""))
    return {
        "name": config.names[priority],
        "path": config.sources[priority].path,
        "priority": priority,
        "read": mine.get("read", 0),
        "kept": mine.get("kept", 0),
        "removed": {reason: mine.get(f"removed:{reason}", 0) for reason in REASONS},
        "skipped": _prefixed(mine, "skipped:"),
        "errors": sum(_prefixed(mine, "errors:").values()),
        "errors_by_reason": _prefixed(mine, "errors:"),
        "records": mine.get("records", 0),
        "cut": mine.get("cut", 0),
        "too_short_to_compare": mine.get("too_short_to_compare", 0),
        # Invalid UTF-8 (and JSONL's lone surrogates) read as U+FFFD, as create reads them: counted, never silent.
        "replaced_chars": mine.get("replaced_chars", 0),
        # A language field that is no tag (5, ["en"], "xx-YY") is read as none, and counted.
        "unknown_language_tags": mine.get("unknown_language_tags", 0),
        "split": {"documents": mine.get("split", 0), "pieces": mine.get("pieces", 0)},
        "characters": {k: mine.get(f"characters_{k}", 0) for k in ("read", "kept", "removed")},
        "languages": languages_kept(mine),
    }


def _check(summary: dict, files: list[dict]) -> list[str]:
    name = summary["name"]
    removed = sum(summary["removed"].values())
    chars = summary["characters"]
    written = sum(f["records"] for f in files if f["kind"] == "documents")
    checks = (
        (
            "documents read - split + pieces != kept + removed + skipped + errors",
            summary["read"] - summary["split"]["documents"] + summary["split"]["pieces"],
            summary["kept"] + removed + sum(summary["skipped"].values()) + summary["errors"],
        ),
        ("characters read != kept + removed", chars["read"], chars["kept"] + chars["removed"]),
        ("records counted != written", summary["records"], written),
    )
    return [f"{name}: {what}: {a:,} != {b:,}" for what, a, b in checks if a != b]


def source_manifest(config: DedupConfig, summary: dict, inputs: list[dict], files: list[dict]) -> dict:
    """OUT/NAME/manifest.json: an extraction manifest's fields, and what dedup did to the source."""
    name = summary["name"]

    def relative(f: dict) -> dict:  # a path in OUT/NAME, as an extraction's manifest names its files
        return {"path": f["path"][len(name) + 1 :], "records": f["records"], "bytes": f["bytes"], "sha256": f["sha256"]}

    return {
        "tool": "bertcorpus",
        "version": output.TOOL_VERSION,
        "job": JOB,
        "config": {
            **config.describe(),
            "source": {"name": name, "priority": summary["priority"], "path": summary["path"]},
        },
        "inputs": inputs,
        "documents": {
            "read": summary["read"],
            "kept": summary["kept"],
            "skipped": {**summary["removed"], **summary["skipped"]},
            "errors": summary["errors"],
            "errors_by_reason": summary["errors_by_reason"],
            "split": summary["split"],
            "characters": summary["characters"]["kept"],
            "languages": summary["languages"],
        },
        "dedup": {
            "run": f"../{output.MANIFEST}",
            "priority": summary["priority"],
            "records": summary["records"],
            "cut": summary["cut"],
            "too_short_to_compare": summary["too_short_to_compare"],
            "replaced_chars": summary["replaced_chars"],
            "unknown_language_tags": summary["unknown_language_tags"],
            "characters": summary["characters"],
        },
        "outputs": {kind: [relative(f) for f in files if f["kind"] == kind] for kind in ("documents", "errors")},
    }


def _matrix(config: DedupConfig, counts: dict, reason: str) -> dict:
    """{removed from: {kept in: documents}} for one reason, every pair of sources named."""
    names = config.names
    return {
        names[p]: {names[q]: counts.get(f"pair:{reason}:{p}:{q}", 0) for q in range(len(names))}
        for p in range(len(names))
    }


def _benchmarks(config: DedupConfig, index: NgramIndex | None, reports: list[dict], counts: dict) -> list[dict]:
    if index is None:
        return []
    names, found = config.names, {r["benchmark"]: r for r in reports}
    out = []
    for b, summary in enumerate(index.summary):
        report = found[b]
        out.append(
            {
                "name": summary["name"],
                "path": config.benchmarks[b],
                "layout": summary["layout"],
                "examples": summary["examples"],
                "texts": summary["texts"],
                "too_short_texts": summary["too_short"],
                "ngrams": summary["ngrams"],
                "contaminated_examples": report["records"],
                "contaminated_texts": report["texts_found"],
                "documents": {names[p]: counts.get(f"benchmark:{b}:{p}:matched", 0) for p in range(len(names))},
                "removed": {
                    names[p]: {
                        k: counts.get(f"benchmark:{b}:{p}:{k}", 0) for k in ("documents", "regions", "characters")
                    }
                    for p in range(len(names))
                },
                "report": report["path"],
            }
        )
    return out


class Publish(beam.DoFn):
    """The single last step: check the counts, write each source's manifest into the staging area, move every
    staged file into place (the sources' manifests last of them), then write OUT/manifest.json."""

    def __init__(self, config: DedupConfig):
        self.config = config

    def process(self, files, counts, inputs, index, clusters):
        cfg = self.config
        files = sorted(files, key=lambda f: f["path"])
        summaries = [source_summary(cfg, p, counts) for p in range(len(cfg.sources))]
        problems = [
            problem for s in summaries for problem in _check(s, [f for f in files if f.get("source") == s["priority"]])
        ]
        if problems:
            output.discard_staging(cfg.output)
            raise AccountingError(f"dedup: the counts do not add up, so nothing was published: {'; '.join(problems)}")
        manifests = []
        for s in summaries:
            mine = [f for f in files if f.get("source") == s["priority"] and f["kind"] in ("documents", "errors")]
            stats = merge_file_stats([stat for p, stat in inputs if p == s["priority"]])
            manifest = source_manifest(cfg, s, [{**i, "source": s["name"]} for i in stats], mine)
            relative = f"{s['name']}/{output.MANIFEST}"
            output.write_json_atomically(output.staging_path(cfg.output, relative), manifest)
            manifests.append(relative)
        names = cfg.names
        top = {
            "tool": "bertcorpus",
            "version": output.TOOL_VERSION,
            "job": JOB,
            "config": cfg.describe(),
            "sources": summaries,
            "duplicates": {
                "exact_groups": counts.get("exact:groups", 0),
                "pairs_measured": counts.get("near:measured:candidates", 0),
                "pairs_similar": counts.get("near:similar:candidates", 0),
                "unsettled": counts.get("near:unsettled", 0),
                "removed_by_pair": {reason: _matrix(cfg, counts, reason) for reason in ("exact", "near")},
                "jaccard_histogram": {
                    "bin_width": 1 / JACCARD_BINS,
                    "counts": [counts.get(f"jaccard:{b}", 0) for b in range(JACCARD_BINS)],
                },
                "top_clusters": [
                    {"kept": {"source": names[node[0]], "id": node[1]}, "removed": s["exact"] + s["near"], **s}
                    for node, s in clusters
                ],
            },
            "benchmarks": _benchmarks(cfg, index, [f for f in files if f["kind"] == "contaminated"], counts),
            "outputs": {
                "sources": [{"name": n, "manifest": f"{n}/{output.MANIFEST}"} for n in names],
                "removed": [_info(f) for f in files if f["kind"] == "removed"],
                "contaminated": [_info(f) for f in files if f["kind"] == "contaminated"],
            },
        }
        staged = [f["path"] for f in files] + manifests
        output.publish(cfg.output, staged, top, OWNED_GLOBS)
        yield top


def _info(f: dict) -> dict:
    return {k: f[k] for k in ("path", "records", "bytes", "sha256")}
