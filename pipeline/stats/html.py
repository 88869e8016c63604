"""The report of `bertcorpus stats`: one self-contained HTML page over the card's figures and its plots.

The page leads with what was built (instances, label and masking shares, tokens, [UNK]), then the plots, then the
documents, and the lineage last, in the order data flows. A row that would say only zero, a table without rows and a
row that repeats another are left out; stats.json keeps every number.
"""

from __future__ import annotations

import html
import re

from bertcorpus.pipeline.stats.dedup_card import dedup_html
from bertcorpus.pipeline.stats.plots import PLOT_PIXELS
from bertcorpus.pipeline.stats.stages import REPORT_FILES, STATS

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 72em;
       padding: 0 1em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; } h3 { margin-top: 1.5em; }
.table { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.6em; text-align: left; vertical-align: top; }
th { background: #f6f6f6; } td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
code { font-size: 0.9em; overflow-wrap: anywhere; }
.warn { background: #fff4ce; border: 1px solid #e0c060; padding: 0.5em 1em; }
.note { color: #555; font-size: 0.9em; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 30em), 1fr)); gap: 1em 2em; }
.side { display: flex; flex-wrap: wrap; gap: 0 2em; align-items: flex-start; }
figure { margin: 0; min-width: 0; }
figure img { width: 100%; height: auto; display: block; }
figcaption { font-size: 0.85em; color: #555; }
"""


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _n(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else _e(value)


def _share(value, digits: int = 2) -> str | None:
    return None if value is None else f"{value:.{digits}%}"


def _table(header: list[str], rows: list[list], numeric: set[int] = frozenset()) -> str:
    """A table of HTML cells (numbers in the `numeric` columns are formatted here); no rows, no table."""
    if not rows:
        return ""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="n">{_n(c)}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f'<div class="table"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _section(key: str, title: str, body: str) -> str:
    return f'<section id="{key}"><h2>{title}</h2>{body}</section>' if body else ""


def _figure_html(plots: dict[str, str], key: str, caption: str) -> str:
    if key not in plots:
        return ""
    width, height = PLOT_PIXELS
    return (
        f'<figure><img src="{REPORT_FILES}/{_e(plots[key])}" alt="{_e(caption)}" width="{width}" '
        f'height="{height}"><figcaption>{_e(caption)}</figcaption></figure>'
    )


def _plot_grid(figures: list[str]) -> str:
    shown = "".join(figures)
    return f'<div class="plots">{shown}</div>' if shown else ""


def _short(sha: str | None) -> str:
    return f'<code title="{_e(sha)}">{_e(sha[:16])}…</code>' if sha else "—"


def _stage_dir(name: str) -> str:
    return f"<code>{_e(name)}/</code>"


# ---------------------------------------------------------------------------------------------- what was built

# What label 1 of the pair objective means, by the manifest form's label; a form without one has no label column.
LABELS = {"random_next": "random next", "swapped": "swapped"}
MASKING = {"static": "masks fixed in the records", "dynamic": "masks drawn at load time"}
FILE_FORMATS = {"tfrecord": "TFRecord files", "parquet": "Parquet files", "mds": "MDS shards"}
PAIR_OBJECTIVES = {"nsp": "next-sentence prediction", "sop": "sentence-order prediction", "none": "no pair objective"}
# How create's settings read in the lead, or nothing where the default says nothing worth a word.
SETTINGS = {
    "dupe_factor": lambda v: f"dupe factor {_e(v)}",
    "masked_lm_prob": lambda v: f"{v:.0%} of tokens masked" if isinstance(v, (int, float)) else "",
    "short_seq_prob": lambda v: f"{v:.0%} short sequences" if isinstance(v, (int, float)) else "",
    "whole_word_mask": lambda v: "whole-word masking" if v else "",
    "do_lower_case": lambda v: "lower-cased" if v else "cased",
    "seed": lambda v: f"seed {_e(v)}",
}


def _records_lead(name: str, info: dict) -> str:
    form, source = info["form"], info["made_from"]
    where = "This directory" if name == "." else _stage_dir(name)
    text = (
        f"{where} holds {_e(FILE_FORMATS.get(form['file_format'], form['file_format']))} with "
        f"{_e(MASKING.get(form['masking'], form['masking']))} and "
        f"{_e(PAIR_OBJECTIVES.get(form['pair_objective'], form['pair_objective']))}"
    )
    if form.get("bin_size"):
        text += f", in length bins of {_e(form['bin_size'])} tokens"
    if source["documents"] is not None:
        read = ", ".join(
            f"{source[k]:,} {what}"
            for k, what in (("sentences", "sentences"), ("tokens", "WordPiece tokens"))
            if source[k]
        )
        text += f", made from {source['documents']:,} documents" + (f" ({read})" if read else "")
    text += f" with a vocab of {info['vocab']['size']:,} ids"
    named = [said for key, value in source["settings"].items() if (said := SETTINGS[key](value))]
    parts = [f"<p>{text}{'; ' + ', '.join(named) if named else ''}.</p>"]

    label = LABELS.get(form["label"])
    rows, sampled = [], []
    for seq, s in info["seq_configs"].items():
        splits = [split for split in ("train", "eval") if split in s and s["instances"][split]]
        if s["sampled"]:
            sampled.append(
                f"{_e(seq)}: {sum(s['records_read'].values()):,} of {sum(s['instances'].values()):,} records read"
            )
        for i, split in enumerate(splits):
            x, built, mean = s[split], s["instances"][split], s[split]["mean_real_tokens"]
            tokens = f"≈ {mean * built:,.0f}" if s["sampled"] and mean else _n(x["real_tokens"])
            cells = (
                [
                    f'<td rowspan="{len(splits)}"><code>{_e(seq)}</code><br>{s["max_seq_length"]} tokens, '
                    f"≤ {s['max_predictions_per_seq']} masked</td>"
                ]
                if i == 0
                else []
            )
            cells.append(f"<td>{split}</td>")
            values = [_n(built), tokens, None if mean is None else f"{mean:.1f}", _share(x["full_length_share"], 1)]
            values += [_share(x["label_share"])] if label else []
            values += [
                _share(x["mask_share"]),
                _share(x["keep_share"]),
                _share(x["random_share"]),
                _share(x["unk_token_rate"], 4),
            ]
            cells += [f'<td class="n">{v if v is not None else "—"}</td>' for v in values]
            rows.append("<tr>" + "".join(cells) + "</tr>")
    if rows:
        spanned = [
            "sequences",
            "split",
            "instances",
            "real tokens",
            "mean real tokens",
            "full length",
            *([f"{label} (label 1)"] if label else []),
        ]
        head = (
            "<tr>"
            + "".join(f'<th rowspan="2">{_e(h)}</th>' for h in spanned)
            + '<th colspan="3">masked positions shown as</th><th rowspan="2">[UNK] of text tokens</th></tr>'
            + "<tr><th>[MASK]</th><th>original</th><th>random token</th></tr>"
        )
        parts.append(f'<div class="table"><table><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>')
    expected = (f"{label} 50%, " if label else "") + "[MASK] / original / random token 80% / 10% / 10%"
    unlabelled = "" if label else " Without a pair objective there is no label to predict: the label slot holds 0."
    parts.append(
        f'<p class="note">Expected: {expected}.{unlabelled} Real tokens include [CLS] and [SEP]; full '
        "length is the share of instances without padding."
        + _masks_note(info)
        + _draws_note(info, form["pair_objective"])
        + (
            f" Shares and means are those of a sample ({'; '.join(sampled)}), "
            f"{SAMPLES[form['file_format'] != 'tfrecord']}."
            if sampled
            else ""
        )
        + "</p>"
    )
    return "".join(parts)


SAMPLES = (
    "drawn from every shard in proportion to its size",
    "the first instances of the loader's epoch 0, which it draws from every shard",
)


def _draws_note(info: dict, objective: str) -> str:
    """The pair draws that create could not honour (the manifest's nsp_draws_skipped or sop_draws_skipped), by seq
    config, split and reason: one-sentence documents, labels left unpaired, random next segments with nowhere to
    come from."""
    said = [
        f"{_e(seq)} {split}: "
        + ", ".join(f"{_e(reason.replace('_', ' '))} {n:,}" for reason, n in sorted(reasons.items()))
        for seq, s in info["seq_configs"].items()
        for split, reasons in s.get("draws_skipped", {}).items()
        if reasons
    ]
    if not said:
        return ""
    return f" Pair draws that create skipped (<code>{_e(objective)}_draws_skipped</code>): {'; '.join(said)}."


def _masks_note(info: dict) -> str:
    """How the masks counted were drawn, for records whose masks are drawn at load time."""
    masks = [s["masks"] for s in info["seq_configs"].values() if "drawn_by" in s.get("masks", {})]
    if not masks:
        return ""
    m = masks[0]
    return (
        f" Masks are drawn anew each epoch; the masked positions counted here are those that "
        f"<code>{_e(m['drawn_by'])}</code> draws for epoch {m['epoch']} with seed {m['seed']} and the "
        f"manifest's settings ({m['masked_lm_prob']:.0%} of tokens, at most {m['max_predictions_per_seq']} per "
        f"instance{', whole words' if m['whole_word_mask'] else ''}), as a trainer that leaves them alone "
        "sees them in its first epoch."
    )


def _documents_lead(docs: dict, unknown: dict) -> str:
    stages = docs["stages"].values()
    read = sum(c["read"] or 0 for c in stages)
    sources = ", ".join(f"{_e(s)} {n:,}" for s, n in docs["by_source"].items())
    text = (
        f"<p>Documents: {docs['documents']:,} kept of {read:,} read by {len(docs['stages'])} "
        f"extraction{'s' if len(docs['stages']) > 1 else ''} ({sources}); {docs['chars']['total']:,} "
        f"characters, {docs['words']['total']:,} words"
    )
    if "absent" not in unknown and unknown["unk_word_rate"] is not None:
        text += f"; {unknown['unk_word_rate']:.4%} of words contain [UNK]"
    return text + ".</p>"


def _built_html(card: dict) -> str:
    records = card["records"]
    parts = [_records_lead(name, info) for name, info in records.items() if name != "absent"]
    if "absent" in card["documents"]:
        return "".join(parts)
    lead = _documents_lead(card["documents"], card["unknown_words"])
    if parts:
        return "".join(parts) + lead
    absent = records["absent"]
    return lead + f'<p class="note">{_e(absent[:1].upper() + absent[1:])}.</p>'


# ---------------------------------------------------------------------------------------------- plots

# Rows of a seq config's figures beside its plots, each shown where it is not zero: (label, key, format).
DETAIL_ROWS = (
    ("mean tokens in A", "mean_segment_a_tokens", "{:.1f}"),
    ("mean tokens in B", "mean_segment_b_tokens", "{:.1f}"),
    ("masked positions", "masked_positions", "{:,}"),
    ("mean masked per instance", "mean_masked_positions", "{:.2f}"),
    ("masked share of real tokens", "masked_token_share", "{:.2%}"),
    ("padded share at full length", "padded_share", "{:.1%}"),
    ("vocab coverage", "vocab_coverage", "{:.1%}"),
)
PLOTS = (
    ("lengths", "Real tokens per instance, train and eval (log scale)"),
    ("segments", "Tokens in segment A and in segment B"),
    ("masked", "Masked positions per instance (log scale)"),
    ("vocab", "Vocab ids by how often they occur in the text tokens (before masking)"),
    ("shards", "Records per shard"),
)


def _caption(key: str, caption: str, s: dict) -> str:
    """A plot's caption; the segments plot's says what its spike is."""
    if key != "segments":
        return caption
    budget = s["max_seq_length"] - 3  # [CLS] and two [SEP]
    return (
        f"{caption}. The spike at A {(budget + 1) // 2} / B {budget // 2} is the pairs too long for the "
        f"{budget} tokens that {s['max_seq_length']} leaves them: as in the reference's truncate_seq_pair, the "
        "longer segment loses a token at a time until the pair fits, so two long segments end level, A with the "
        "odd token. The broad part is where the random split point fell."
    )


def _seq_plots_html(title: str, s: dict, plots: dict[str, str], prefix: str) -> str:
    parts = [
        f"<h3><code>{_e(title)}</code>: {s['max_seq_length']} tokens, up to {s['max_predictions_per_seq']} "
        "predictions</h3>"
    ]
    columns = [c for c in ("train", "eval") if c in s and s[c]["instances"]]
    columns += ["all"] if len(columns) > 1 else []
    rows = [["instances read"] + [s[c]["instances"] for c in columns]] if s["sampled"] else []
    rows += [
        [label] + [fmt.format(s[c][key]) if s[c][key] is not None else None for c in columns]
        for label, key, fmt in DETAIL_ROWS
        if any(s[c][key] for c in columns)
    ]
    details, padding = _table([""] + columns, rows, set(range(1, len(columns) + 1))), _padding_html(s)
    parts.append(f'<div class="side"><div>{details}</div><div>{padding}</div></div>' if padding else details)
    parts.append(
        _plot_grid([_figure_html(plots, f"{prefix} {key}", _caption(key, caption, s)) for key, caption in PLOTS])
    )
    rows = [
        [f"<code>{_e(r['path'])}</code>", r["records"], r["bytes"], r["file_bytes"]]
        + ([r["records_read"]] if s["sampled"] else [])
        for r in s["shards"]
    ]
    header = ["shard", "records (manifest)", "bytes (manifest)", "bytes (file)"] + (["records read"] * s["sampled"])
    parts.append(
        f"<details><summary>{len(rows):,} shards</summary>"
        + _table(header, rows, set(range(1, len(header))))
        + "</details>"
    )
    return "".join(parts)


def _padding_html(s: dict) -> str:
    """Per length bin (train and eval together): instances, the width their batches are padded to, the padding."""
    padding = s["all"].get("padding")
    if padding is None:
        return ""
    rows, first = [], 1
    for b in padding["bins"]:
        if b["instances"]:
            rows.append([f"{first}–{b['width']} tokens", b["instances"], b["width"], _share(b["padded_share"], 1)])
        first = b["width"] + 1
    rows.append(["<b>all, batched by bins</b>", s["all"]["instances"], None, _share(padding["padded_share"], 1)])
    length = s["max_seq_length"]
    rows.append(
        [
            f"all, padded to {length} (no bins)",
            s["all"]["instances"],
            length,
            _share(padding["padded_share_without_bins"], 1),
        ]
    )
    stored = (
        "The records themselves stay padded to the full length; this is what the loader pads when it "
        "batches them by bins."
        if "drawn_by" not in s["masks"]
        else "As the loader pads its batches."
    )
    return (
        _table(
            [f"length (bins of {padding['bin_size']})", "instances", "padded width", "padded share"], rows, {1, 2, 3}
        )
        + f'<p class="note">Padding by length bin, train and eval together. {stored}</p>'
    )


def _plots_html(records: dict, plots: dict[str, str]) -> str:
    stages = {name: info for name, info in records.items() if name != "absent"}
    several = len(stages) > 1
    return "".join(
        _seq_plots_html(seq if stage == "." else f"{stage}/{seq}", s, plots, f"{stage} {seq}" if several else seq)
        for stage, info in stages.items()
        for seq, s in info["seq_configs"].items()
        if s["all"]["instances"]
    )


# ---------------------------------------------------------------------------------------------- documents


def _inputs_html(stages: dict) -> str:
    """Every extraction's counts side by side: read, kept, then each reason for a skip or an error."""
    names = list(stages)
    counts = list(stages.values())

    def reasons(key: str) -> list[str]:
        return sorted({r for c in counts for r, n in c[key].items() if n})

    rows = [["read"] + [c["read"] for c in counts], ["kept"] + [c["kept"] for c in counts]]
    rows += [[f"skipped: {_e(r)}"] + [c["skipped"].get(r, 0) for c in counts] for r in reasons("skipped")]
    rows += [
        [f"error: {_e(r)}"] + [c["errors_by_reason"].get(r, 0) for c in counts] for r in reasons("errors_by_reason")
    ]
    unexplained = [(c["errors"] or 0) - sum(c["errors_by_reason"].values()) for c in counts]
    rows += [["errors, reason not recorded"] + unexplained] if any(unexplained) else []
    header = ["inputs"] + [f"{_e(c['job'])} → {_stage_dir(n)}" for n, c in zip(names, counts)]
    return _table(header, rows, set(range(1, len(header))))


def _sources_html(docs: dict) -> str:
    def row(label: str, chars: dict, words: dict) -> list:
        median = f"{chars['median_bin'][0]:,.0f} – {chars['median_bin'][1]:,.0f}" if chars["median_bin"] else None

        def whole(mean):
            return None if mean is None else round(mean)

        return [
            label,
            chars["documents"],
            chars["total"],
            words["total"],
            whole(chars["mean"]),
            median,
            chars["min"],
            chars["max"],
            whole(words["mean"]),
        ]

    rows = [row(_e(s), docs["chars_by_source"][s], docs["words_by_source"][s]) for s in docs["by_source"]]
    rows += [row("<b>all</b>", docs["chars"], docs["words"])] if len(rows) > 1 else []
    return _table(
        [
            "source",
            "documents",
            "characters",
            "words",
            "mean characters",
            "median characters (bin)",
            "min characters",
            "max characters",
            "mean words",
        ],
        rows,
        {1, 2, 3, 4, 5, 6, 7, 8},
    )


def _documents_html(docs: dict, unknown: dict, plots: dict[str, str]) -> str:
    if "absent" in docs:
        return f"<p>{_e(docs['absent'])}.</p>" + _unknown_html(unknown)
    parts = [_inputs_html(docs["stages"]), "<h3>By source</h3>", _sources_html(docs)]
    parts.append(
        _plot_grid(
            [
                _figure_html(plots, "document_chars", "Characters per document, by source"),
                _figure_html(plots, "document_words", "Words (whitespace-separated) per document, by source"),
            ]
        )
    )
    extremes = []
    for title, key in (("Largest documents", "largest"), ("Smallest documents", "smallest")):
        rows = [[f"<code>{_e(d['id'])}</code>", _e(d["source"]), _e(d["title"] or "—"), d["chars"]] for d in docs[key]]
        table = _table(["id", "source", "title", "characters"], rows, {3})
        extremes.append(f"<div><h3>{title}</h3>{table}</div>" if table else "")
    parts.append(f'<div class="side">{"".join(extremes)}</div>')
    return "".join(parts) + _unknown_html(unknown)


def _unknown_html(unknown: dict) -> str:
    parts = ["<h3>Words that become [UNK]</h3>"]
    if "absent" in unknown:
        return parts[0] + f"<p>{_e(unknown['absent'])}.</p>"
    parts.append(
        f"<p>{unknown['unk_words']:,} of {unknown['words']:,} whitespace-separated words "
        f"({(unknown['unk_word_rate'] or 0):.4%}) in {unknown['documents']:,} documents contain [UNK] "
        f"when tokenised with <code>{_e(unknown['vocab'])}</code>"
        f"{' (lower-cased)' if unknown['lowercase'] else ''}."
        f"{'' if unknown['counts_exact'] else ' Counts are lower bounds: too many distinct words.'}</p>"
    )
    rows = [[f"<code>{_e(w['word'])}</code>", _e(_code_points(w["word"])), w["count"]] for w in unknown["top"]]
    return "".join(parts) + _table(["word", "characters outside ASCII", "count"], rows, {2})


def _code_points(word: str) -> str:
    """The non-ASCII characters of a word as U+XXXX, for those a reader's fonts cannot show."""
    unusual = list(dict.fromkeys(c for c in word if ord(c) > 0x7E))
    return " ".join(f"U+{ord(c):04X}" for c in unusual[:6]) + (" …" if len(unusual) > 6 else "")


# ---------------------------------------------------------------------------------------------- lineage

_SHARD_NUMBER = re.compile(r"-\d{5}-of-(\d{5})")


def _output_rows(outputs: list[dict]) -> list[list]:
    """One row per file, or per set of numbered shards (their sizes and records summed; each hash is in stats.json).
    Files of no bytes (a dead letter without errors) are left out."""
    groups: dict[str, list[dict]] = {}
    for o in (o for o in outputs if o.get("bytes") != 0):
        groups.setdefault(_SHARD_NUMBER.sub(r"-*-of-\1", o["path"]), []).append(o)
    rows = []
    for pattern, files in groups.items():

        def total(key: str, files=files):
            values = [f.get(key) for f in files]
            return None if None in values else sum(values)

        single = len(files) == 1
        rows.append(
            [
                f"<code>{_e(files[0]['path'] if single else pattern)}</code>",
                total("records") if "records" in files[0] else total("documents"),
                total("bytes"),
                _short(files[0].get("sha256")) if single else f"{len(files)} files: each in {STATS}",
            ]
        )
    return rows


def _outputs_table(outputs: list[dict]) -> str:
    rows = _output_rows(outputs)
    if all(row[1] is None for row in rows):  # files of no records, such as a vocab and its tokenizer files
        return _table(["output", "bytes", "sha256"], [[row[0]] + row[2:] for row in rows], {1})
    return _table(["output", "records", "bytes", "sha256"], rows, {1, 2})


def _written_by(entry: dict) -> str:
    return _stage_dir(entry["from"]) if "from" in entry else "no stage here"


def _stage_html(stage: dict) -> str:
    inputs = [i for i in stage["inputs"] if i["role"] != "vocab"]
    roles = {i["role"] for i in inputs} != {"input"}
    rows = [
        ([_e(i["role"])] if roles else [])
        + [
            f"<code>{_e(i['path'])}</code>",
            i.get("size"),
            _short(i.get("sha256") or i.get("sha256_first_and_last_mib")),
            _written_by(i),
        ]
        for i in inputs
    ]
    header = (["role"] if roles else []) + ["input", "bytes", "sha256", "written by"]
    return (
        f"<h3>{_e(stage['job'])} → {_stage_dir(stage['stage'])}</h3>"
        + _input_runs_html(stage.get("input_runs", []))
        + _table(header, rows, {int(roles) + 1})
        + _outputs_table(stage["outputs"])
    )


def _input_runs_html(runs: list[dict]) -> str:
    """What made the documents a stage read, as its manifest records it: the dedup step (run and source) too."""
    said = [
        f"<code>{_e(r['input'])}</code>: {_e(r['job'])}"
        + (
            f" (source <code>{_e(r['dedup']['source'])}</code> of the run <code>{_e(r['dedup']['run'])}</code>)"
            if isinstance(r.get("dedup"), dict)
            else ""
        )
        for r in runs
    ]
    return f"<p>Documents read were made by: {'; '.join(said)}.</p>" if said else ""


def _vocab_html(stages: list[dict]) -> str:
    """The vocab step between extraction and create: each vocab file the records were made with, once."""
    used: dict[tuple, tuple[dict, list[str]]] = {}
    for stage in stages:
        for entry in stage["inputs"]:
            if entry["role"] == "vocab":
                used.setdefault((entry["path"], entry.get("sha256")), (entry, []))[1].append(stage["stage"])
    rows = [
        [
            f"<code>{_e(entry['path'])}</code>",
            _short(entry.get("sha256")),
            _written_by(entry),
            _vocab_found(entry),
            ", ".join(_stage_dir(s) for s in users),
        ]
        for entry, users in used.values()
    ]
    table = _table(["vocab", "sha256", "written by", "the file read here", "read by"], rows)
    return f"<h3>The vocab create read</h3>{table}" if table else ""


def _vocab_found(entry: dict) -> str:
    checked = entry.get("checked")
    if checked is None:
        return "—"
    where = "" if checked["path"] == entry["path"] else f"<code>{_e(checked['path'])}</code>: "
    return where + ("the same sha256" if checked["sha256_matches"] else "<b>a different sha256</b>")


def _lineage_html(lineage: dict) -> str:
    if lineage["links"]:
        chain = "; ".join(
            f"{_stage_dir(link['from'])} → {_stage_dir(link['to'])} "
            f"({link['files']} file{'s' if link['files'] > 1 else ''})"
            for link in lineage["links"]
        )
        parts = [
            f"<p>Stages in the order data flows through them, linked by files that one wrote and the next "
            f"read (same name and sha256): {chain}.</p>"
        ]
    else:
        parts = [
            "<p>Stages in the order data flows through them. No stage read a file that another stage here wrote.</p>"
        ]
    stages = lineage["stages"]
    vocab_step = _vocab_html(stages)
    for stage in stages:
        if stage["kind"] == "records" and vocab_step:
            parts.append(vocab_step)
            vocab_step = ""
        parts.append(_stage_html(stage))
    return "".join(parts) + vocab_step


# ---------------------------------------------------------------------------------------------- the page


def render_html(card: dict, plots: dict[str, str]) -> str:
    warnings = "".join(f"<li>{_e(w)}</li>" for w in card["warnings"])
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>Data card: {_e(card['directory'])}</title><style>{STYLE}</style></head><body>",
            f"<h1>Data card: <code>{_e(card['directory'])}</code></h1>",
            f'<p class="note">bertcorpus {_e(card["version"])} stats; every number is also in {STATS}.</p>',
            f'<div class="warn"><b>Warnings</b><ul>{warnings}</ul></div>' if warnings else "",
            _section("built", "What was built", _built_html(card)),
            _section("plots", "Plots", _plots_html(card["records"], plots)),
            _section("documents", "Documents", _documents_html(card["documents"], card["unknown_words"], plots)),
            _section("dedup", "Duplicates and benchmark text removed", dedup_html(card.get("dedup", []))),
            _section("lineage", "Lineage", _lineage_html(card["lineage"])),
            "</body></html>\n",
        ]
    )
