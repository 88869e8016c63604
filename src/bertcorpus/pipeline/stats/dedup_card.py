"""The data card's section on `dedup` runs: what each source lost and to which source (a matrix per reason), the
Jaccard similarity of the near copies removed, the benchmarks found in the corpus, and the largest clusters with
links into the ledger. Every figure comes from the run's OUT/manifest.json; nothing is read again."""

from __future__ import annotations

from bertcorpus.pipeline.stats.html_parts import escape, number, table
from bertcorpus.pipeline.stats.stages import Stage

SHOWN_CLUSTERS = 10


def _is_dedup_run(stage: Stage) -> bool:
    return stage.job == "dedup" and isinstance(stage.manifest.get("sources"), list)


def dedup_section(stages: list[Stage]) -> list[dict]:
    """One entry per dedup run found, with the paths of its ledger files relative to DIR."""
    runs = []
    for stage in (s for s in stages if _is_dedup_run(s)):
        m = stage.manifest
        prefix = "" if stage.name == "." else f"{stage.name}/"
        duplicates = m.get("duplicates", {})
        runs.append(
            {
                "run": stage.name,
                "sources": m["sources"],
                "removed_by_pair": duplicates.get("removed_by_pair", {}),
                "jaccard_histogram": duplicates.get("jaccard_histogram", {}),
                "pairs_measured": duplicates.get("pairs_measured"),
                "pairs_similar": duplicates.get("pairs_similar"),
                "unsettled": duplicates.get("unsettled"),
                "benchmarks": [{**b, "report": prefix + b["report"]} for b in m.get("benchmarks", [])],
                "top_clusters": [
                    {**c, "ledger": [prefix + f for f in c.get("ledger", [])]}
                    for c in duplicates.get("top_clusters", [])[:SHOWN_CLUSTERS]
                ],
            }
        )
    return runs


# ---------------------------------------------------------------------------------------------- HTML


def _sources_html(sources: list[dict]) -> str:
    rows = [
        [
            f"<code>{escape(s['name'])}</code>",
            number(s["read"]),
            number(s["kept"]),
            ", ".join(f"{reason} {n:,}" for reason, n in s["removed"].items() if n) or "none",
            number(s["characters"]["removed"]),
            f"{s['characters']['removed'] / s['characters']['read']:.2%}" if s["characters"]["read"] else "—",
            number(s["too_short_to_compare"]),
        ]
        for s in sorted(sources, key=lambda s: s["priority"])
    ]
    return table(
        ["source (by priority)", "read", "kept", "removed", "characters removed", "share", "too short to compare"],
        rows,
    )


def _matrix_html(reason: str, matrix: dict) -> str:
    names = list(matrix)
    if not any(n for row in matrix.values() for n in row.values()):
        return ""
    rows = [[f"<code>{escape(a)}</code>", *(number(matrix[a].get(b, 0)) for b in names)] for a in names]
    header = [f"{escape(reason)}: removed from ↓, kept in →", *(f"<code>{escape(b)}</code>" for b in names)]
    return table(header, rows)


def _histogram_html(histogram: dict) -> str:
    counts, width = histogram.get("counts", []), histogram.get("bin_width", 0.02)
    if not any(counts):
        return ""
    top = max(counts)
    rows = [
        [
            f"{i * width:.2f}–{(i + 1) * width:.2f}",
            number(n),
            f'<span style="display:inline-block;background:#4c72b0;height:0.8em;width:{12 * n / top:.2f}em"></span>',
        ]
        for i, n in enumerate(counts)
        if n
    ]
    return "<h3>Jaccard similarity of the near copies removed</h3>" + table(["Jaccard", "documents", ""], rows)


def _benchmarks_html(benchmarks: list[dict]) -> str:
    rows = [
        [
            f"<code>{escape(b['name'])}</code>",
            escape(b["layout"]),
            f"{number(b['contaminated_examples'])} of {number(b['examples'])}",
            ", ".join(f"{escape(s)} {n:,}" for s, n in b["documents"].items() if n) or "none",
            ", ".join(
                f"{escape(s)} {r['characters']:,} chars ({r['documents']:,} documents dropped, {r['regions']:,} cuts)"
                for s, r in b["removed"].items()
                if r["characters"]
            )
            or "nothing",
            f'<a href="{escape(b["report"])}">{escape(b["report"])}</a>',
        ]
        for b in benchmarks
    ]
    listed = table(["benchmark", "layout", "examples found", "documents holding them", "removed", "examples"], rows)
    return f"<h3>Benchmarks</h3>{listed}" if listed else ""


def _clusters_html(clusters: list[dict]) -> str:
    rows = [
        [
            f"<code>{escape(c['kept']['source'])}</code> <code>{escape(c['kept']['id'])}</code>",
            number(c["removed"]),
            number(c["exact"]),
            number(c["near"]),
            " ".join(f'<a href="{escape(f)}">{escape(f.rsplit("/", 1)[-1])}</a>' for f in c["ledger"]),
        ]
        for c in clusters
    ]
    listed = table(["document kept", "copies removed", "exact", "near", "ledger rows (match.id = the kept id)"], rows)
    return f"<h3>Largest clusters</h3>{listed}" if listed else ""


def dedup_html(runs: list[dict]) -> str:
    parts = []
    for run in runs:
        where = "This directory" if run["run"] == "." else f"<code>{escape(run['run'])}/</code>"
        measured = run.get("pairs_measured") or 0
        lead = (
            f"<p>{where} is a dedup run: {measured:,} pairs that LSH proposed were measured, "
            f"{run.get('pairs_similar') or 0:,} of them at or above the threshold."
        )
        if run.get("unsettled"):
            lead += f" <b>{run['unsettled']:,} documents of clusters that did not settle were kept.</b>"
        parts.append(lead + "</p>")
        parts.append(_sources_html(run["sources"]))
        for reason, matrix in run["removed_by_pair"].items():
            parts.append(_matrix_html(reason, matrix))
        parts += [
            _histogram_html(run["jaccard_histogram"]),
            _benchmarks_html(run["benchmarks"]),
            _clusters_html(run["top_clusters"]),
        ]
    return "".join(parts)
