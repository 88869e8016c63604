"""The report of `bertcorpus stats`: one self-contained HTML page over the card's figures and its plots."""
from __future__ import annotations

import html

from pipeline.stats_figures import REPORT_FILES, STATS


STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 72em;
       padding: 0 1em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; } h3 { margin-top: 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 0.9em; word-break: break-all; }
.warn { background: #fff4ce; border: 1px solid #e0c060; padding: 0.5em 1em; }
.note { color: #555; font-size: 0.9em; }
figure { display: inline-block; margin: 0.5em 1em 0.5em 0; }
figcaption { font-size: 0.85em; color: #555; max-width: 40em; }
"""


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _n(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else _e(value)


def _table(header: list[str], rows: list[list], numeric: set[int] = frozenset()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="n">{_n(c)}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _figure_html(plots: dict[str, str], key: str, caption: str) -> str:
    if key not in plots:
        return ""
    return (f'<figure><img src="{REPORT_FILES}/{_e(plots[key])}" alt="{_e(caption)}" width="640" height="320">'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def _short(sha: str | None) -> str:
    return f"<code title=\"{_e(sha)}\">{_e(sha[:16])}…</code>" if sha else "—"


def _lineage_html(lineage: dict) -> str:
    parts = ["<h2>Lineage</h2>"]
    if lineage["links"]:
        chain = "; ".join(f"<code>{_e(l['from'])}</code> → <code>{_e(l['to'])}</code> ({l['files']} files)"
                          for l in lineage["links"])
        parts.append(f"<p>Stages linked by files that one wrote and the next read (same name and sha256): "
                     f"{chain}.</p>")
    else:
        parts.append("<p>No stage read a file that another stage here wrote.</p>")
    for stage in lineage["stages"]:
        parts.append(f"<h3>{_e(stage['job'])} → <code>{_e(stage['stage'])}/</code></h3>")
        rows = [[_e(i.get("role", "")), f"<code>{_e(i['path'])}</code>", i.get("size"),
                 _short(i.get("sha256") or i.get("sha256_first_and_last_mib")),
                 _written_by(i)] for i in stage["inputs"]]
        parts.append(_table(["role", "input", "bytes", "sha256", "written by"], rows, {2}))
        outputs = stage["outputs"]
        shown = outputs[:8]
        rows = [[f"<code>{_e(o['path'])}</code>", o.get("records", o.get("documents")), o.get("bytes"),
                 _short(o.get("sha256"))] for o in shown]
        parts.append(_table(["output", "records", "bytes", "sha256"], rows, {1, 2}))
        if len(outputs) > len(shown):
            parts.append(f'<p class="note">… and {len(outputs) - len(shown):,} more outputs, all in stats.json.</p>')
    return "".join(parts)


def _written_by(entry: dict) -> str:
    if "from" in entry:
        return f"<code>{_e(entry['from'])}/</code>"
    checked = entry.get("checked")
    if checked is None:
        return "outside this directory"
    verdict = "same sha256" if checked["sha256_matches"] else "<b>a different sha256</b>"
    return f"outside this directory; <code>{_e(checked['path'])}</code> read here has {verdict}"


def _documents_html(docs: dict, unknown: dict, plots: dict[str, str]) -> str:
    parts = ["<h2>Documents</h2>"]
    if "absent" in docs:
        return parts[0] + f"<p>{_e(docs['absent'])}.</p>" + _unknown_html(unknown)
    for name, c in docs["stages"].items():
        rows = [["read", c["read"]], ["kept", c["kept"]]]
        rows += [["duplicates dropped" if k == "duplicate_id" else f"skipped: {_e(k)}", v]
                 for k, v in sorted(c["skipped"].items())]
        rows += [["errors", c["errors"]]] + [[f"error: {_e(k)}", v] for k, v in sorted(c["errors_by_reason"].items())]
        parts.append(f"<h3>{_e(c['job'])} → <code>{_e(name)}/</code></h3>" + _table(["inputs", "count"], rows, {1}))
    rows = [[_e(s), n] for s, n in docs["by_source"].items()] + [["<b>all</b>", docs["documents"]]]
    parts.append("<h3>Documents by source</h3>" + _table(["source", "documents"], rows, {1}))
    size_rows = []
    for what in ("chars", "words"):
        h = docs[what]
        median = f"{h['median_bin'][0]:,.0f} – {h['median_bin'][1]:,.0f}" if h["median_bin"] else "—"
        size_rows.append([what, h["total"], h["mean"], h["min"], median, h["max"]])
    parts.append(_table(["per document", "total", "mean", "min", "median (bin)", "max"], size_rows, {1, 2, 3, 5}))
    parts.append(_figure_html(plots, "document_chars", "Characters per document, by source"))
    parts.append(_figure_html(plots, "document_words", "Words (whitespace-separated) per document, by source"))
    for title, key in (("Largest documents", "largest"), ("Smallest documents", "smallest")):
        rows = [[f"<code>{_e(d['id'])}</code>", _e(d["source"]), _e(d["title"] or "—"), d["chars"]]
                for d in docs[key]]
        parts.append(f"<h3>{title}</h3>" + _table(["id", "source", "title", "characters"], rows, {3}))
    return "".join(parts) + _unknown_html(unknown)


def _unknown_html(unknown: dict) -> str:
    parts = ["<h3>Words that become [UNK]</h3>"]
    if "absent" in unknown:
        return parts[0] + f"<p>{_e(unknown['absent'])}.</p>"
    parts.append(f"<p>{unknown['unk_words']:,} of {unknown['words']:,} whitespace-separated words "
                 f"({(unknown['unk_word_rate'] or 0):.4%}) in {unknown['documents']:,} documents contain [UNK] "
                 f"when tokenised with <code>{_e(unknown['vocab'])}</code>"
                 f"{' (lower-cased)' if unknown['lowercase'] else ''}."
                 f"{'' if unknown['counts_exact'] else ' Counts are lower bounds: too many distinct words.'}</p>")
    rows = [[f"<code>{_e(w['word'])}</code>", _e(_code_points(w["word"])), w["count"]] for w in unknown["top"]]
    return "".join(parts) + _table(["word", "characters outside ASCII", "count"], rows, {2})


def _code_points(word: str) -> str:
    """The non-ASCII characters of a word as U+XXXX, for those a reader's fonts cannot show."""
    unusual = list(dict.fromkeys(c for c in word if ord(c) > 0x7E))
    return " ".join(f"U+{ord(c):04X}" for c in unusual[:6]) + (" …" if len(unusual) > 6 else "")


# (label, key in a split's summary, format): the rows of a seq config's table.
RECORD_ROWS = (
    ("instances read", "instances", "{:,}"),
    ("random next (label 1)", "random_next", "{:,}"),
    ("random-next share", "random_next_share", "{:.2%}"),
    ("mean real tokens", "mean_real_tokens", "{:.1f}"),
    ("full-length share", "full_length_share", "{:.1%}"),
    ("mean tokens in A", "mean_segment_a_tokens", "{:.1f}"),
    ("mean tokens in B", "mean_segment_b_tokens", "{:.1f}"),
    ("masked positions", "masked_positions", "{:,}"),
    ("mean masked per instance", "mean_masked_positions", "{:.2f}"),
    ("masked shown as [MASK]", "mask_share", "{:.2%}"),
    ("masked kept as the original", "keep_share", "{:.2%}"),
    ("masked shown as a random token", "random_share", "{:.2%}"),
    ("[UNK] share of text tokens", "unk_token_rate", "{:.4%}"),
    ("vocab coverage", "vocab_coverage", "{:.1%}"),
)


def _seq_html(title: str, s: dict, vocab: dict, plots: dict[str, str], prefix: str) -> str:
    parts = [f"<h2>Records: <code>{_e(title)}</code> (max_seq_length {s['max_seq_length']}, "
             f"max_predictions_per_seq {s['max_predictions_per_seq']})</h2>"]
    if s["sampled"]:
        read = " + ".join(f"{n:,} {split}" for split, n in s["records_read"].items())
        of = " + ".join(f"{n:,}" for n in s["instances"].values())
        parts.append(f'<p class="note">Statistics of a sample: {read} records read of {of}, drawn from every '
                     "shard in proportion to its size.</p>")
    columns = [k for k in ("train", "eval", "all") if k in s]
    rows = [["instances (manifest)"] + [s["instances"].get(c, sum(s["instances"].values())) for c in columns]]
    rows += [[label] + [fmt.format(s[c][key]) if s[c][key] is not None else None for c in columns]
             for label, key, fmt in RECORD_ROWS]
    parts.append(_table([""] + columns, rows, set(range(1, len(columns) + 1))))
    same = vocab["sha256"] == vocab["manifest_sha256"]
    parts.append(f'<p class="note">Expected: random-next share 50%; masked positions shown as [MASK] / original / '
                 f"random token 80% / 10% / 10%. Vocab <code>{_e(vocab['path'])}</code>, sha256 "
                 f"{_short(vocab['sha256'])}{' (as in the manifest)' if same else ' — <b>not the manifest’s</b>'}."
                 "</p>")
    for key, caption in (("lengths", "Real tokens per instance, train and eval (log scale)"),
                         ("segments", "Tokens in segment A and in segment B"),
                         ("masked", "Masked positions per instance"),
                         ("vocab", "Vocab ids by how often they occur in the text tokens (before masking)"),
                         ("shards", "Records per shard")):
        parts.append(_figure_html(plots, f"{prefix} {key}", caption))
    rows = [[f"<code>{_e(r['path'])}</code>", r["records"], r["records_read"], r["bytes"], r["file_bytes"]]
            for r in s["shards"]]
    parts.append(f"<details><summary>{len(rows):,} shards</summary>"
                 + _table(["shard", "records (manifest)", "records read", "bytes (manifest)", "bytes (file)"],
                          rows, {1, 2, 3, 4}) + "</details>")
    return "".join(parts)


def _records_html(records: dict, plots: dict[str, str]) -> str:
    if "absent" in records:
        return f"<h2>Records</h2><p>{_e(records['absent'])}.</p>"
    several = len(records) > 1
    return "".join(_seq_html(f"{stage}/{seq}", s, info["vocab"], plots, f"{stage} {seq}" if several else seq)
                   for stage, info in records.items() for seq, s in info["seq_configs"].items())


def render_html(card: dict, plots: dict[str, str]) -> str:
    warnings = "".join(f"<li>{_e(w)}</li>" for w in card["warnings"])
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f"<title>Data card: {_e(card['directory'])}</title><style>{STYLE}</style></head><body>",
        f"<h1>Data card: <code>{_e(card['directory'])}</code></h1>",
        f'<p class="note">bertcorpus {_e(card["version"])} stats; every number is also in {STATS}.</p>',
        f'<div class="warn"><b>Warnings</b><ul>{warnings}</ul></div>' if warnings else "",
        _lineage_html(card["lineage"]),
        _documents_html(card["documents"], card["unknown_words"], plots),
        _records_html(card["records"], plots),
        "</body></html>\n",
    ])
