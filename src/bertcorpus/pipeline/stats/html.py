"""The report of `bertcorpus stats`: one self-contained HTML page over the card's figures and its plots.

The page leads with what was built (instances, label and masking shares, tokens, [UNK]), then the plots, then the
documents, and the lineage last, in the order data flows. A row that would say only zero, a table without rows and a
row that repeats another are left out; stats.json keeps every number.
"""

from __future__ import annotations

from bertcorpus.pipeline.stats.datasheet import datasheet_html
from bertcorpus.pipeline.stats.dedup_card import dedup_html
from bertcorpus.pipeline.stats.html_parts import (
    escape,
    figure_html,
    number,
    plot_grid,
    section,
    share,
    stage_dir,
    table,
)
from bertcorpus.pipeline.stats.lineage_html import lineage_html
from bertcorpus.pipeline.stats.plots_html import plots_html
from bertcorpus.pipeline.stats.stages import STATS
from bertcorpus.transforms.languages import UNDETERMINED

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

# ---------------------------------------------------------------------------------------------- what was built

# What label 1 of the pair objective means, by the manifest form's label; a form without one has no label column.
LABELS = {"random_next": "random next", "swapped": "swapped"}
MASKING = {"static": "masks fixed in the records", "dynamic": "masks drawn at load time"}
FILE_FORMATS = {"tfrecord": "TFRecord files", "parquet": "Parquet files", "mds": "MDS shards"}
PAIR_OBJECTIVES = {"nsp": "next-sentence prediction", "sop": "sentence-order prediction", "none": "no pair objective"}
# How create's settings read in the lead, or nothing where the default says nothing worth a word.
SETTINGS = {
    "dupe_factor": lambda v: f"dupe factor {escape(v)}",
    "masked_lm_prob": lambda v: f"{v:.0%} of tokens masked" if isinstance(v, (int, float)) else "",
    "short_seq_prob": lambda v: f"{v:.0%} short sequences" if isinstance(v, (int, float)) else "",
    "whole_word_mask": lambda v: "whole-word masking" if v else "",
    "do_lower_case": lambda v: "lower-cased" if v else "cased",
    "seed": lambda v: f"seed {escape(v)}",
}


def _records_lead(name: str, info: dict) -> str:
    form, source = info["form"], info["made_from"]
    where = "This directory" if name == "." else stage_dir(name)
    text = (
        f"{where} holds {escape(FILE_FORMATS.get(form['file_format'], form['file_format']))} with "
        f"{escape(MASKING.get(form['masking'], form['masking']))} and "
        f"{escape(PAIR_OBJECTIVES.get(form['pair_objective'], form['pair_objective']))}"
    )
    if form.get("bin_size"):
        text += f", in length bins of {escape(form['bin_size'])} tokens"
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
                f"{escape(seq)}: {sum(s['records_read'].values()):,} of {sum(s['instances'].values()):,} records read"
            )
        for i, split in enumerate(splits):
            x, built, mean = s[split], s["instances"][split], s[split]["mean_real_tokens"]
            tokens = f"≈ {mean * built:,.0f}" if s["sampled"] and mean else number(x["real_tokens"])
            cells = (
                [
                    f'<td rowspan="{len(splits)}"><code>{escape(seq)}</code><br>{s["max_seq_length"]} tokens, '
                    f"≤ {s['max_predictions_per_seq']} masked</td>"
                ]
                if i == 0
                else []
            )
            cells.append(f"<td>{split}</td>")
            values = [number(built), tokens, None if mean is None else f"{mean:.1f}", share(x["full_length_share"], 1)]
            values += [share(x["label_share"])] if label else []
            values += [
                share(x["mask_share"]),
                share(x["keep_share"]),
                share(x["random_share"]),
                share(x["unk_token_rate"], 4),
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
            + "".join(f'<th rowspan="2">{escape(h)}</th>' for h in spanned)
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
        f"{escape(seq)} {split}: "
        + ", ".join(f"{escape(reason.replace('_', ' '))} {n:,}" for reason, n in sorted(reasons.items()))
        for seq, s in info["seq_configs"].items()
        for split, reasons in s.get("draws_skipped", {}).items()
        if reasons
    ]
    if not said:
        return ""
    return f" Pair draws that create skipped (<code>{escape(objective)}_draws_skipped</code>): {'; '.join(said)}."


def _masks_note(info: dict) -> str:
    """How the masks counted were drawn, for records whose masks are drawn at load time."""
    masks = [s["masks"] for s in info["seq_configs"].values() if "drawn_by" in s.get("masks", {})]
    if not masks:
        return ""
    m = masks[0]
    return (
        f" Masks are drawn anew each epoch; the masked positions counted here are those that "
        f"<code>{escape(m['drawn_by'])}</code> draws for epoch {m['epoch']} with seed {m['seed']} and the "
        f"manifest's settings ({m['masked_lm_prob']:.0%} of tokens, at most {m['max_predictions_per_seq']} per "
        f"instance{', whole words' if m['whole_word_mask'] else ''}), as a trainer that leaves them alone "
        "sees them in its first epoch."
    )


def _documents_lead(docs: dict, unknown: dict) -> str:
    stages = docs["stages"].values()
    read = sum(c["read"] or 0 for c in stages)
    sources = ", ".join(f"{escape(s)} {n:,}" for s, n in docs["by_source"].items())
    text = (
        f"<p>Documents: {docs['documents']:,} kept of {read:,} read by {len(docs['stages'])} "
        f"extraction{'s' if len(docs['stages']) > 1 else ''} ({sources}); {docs['chars']['total']:,} "
        f"characters, {docs['words']['total']:,} words"
    )
    if "absent" not in unknown and unknown["unk_word_rate"] is not None:
        what = escape(unknown.get("unknown_pieces", "[UNK]"))
        text += f"; {unknown['unk_word_rate']:.4%} of words contain {what}"
        if unknown.get("pieces_per_word") is not None:
            text += f", {unknown['pieces_per_word']:.3f} pieces per word"
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
    return lead + f'<p class="note">{escape(absent[:1].upper() + absent[1:])}.</p>'


# ---------------------------------------------------------------------------------------------- documents


def _inputs_html(stages: dict) -> str:
    """Every extraction's counts side by side: read, kept, then each reason for a skip or an error."""
    names = list(stages)
    counts = list(stages.values())

    def reasons(key: str) -> list[str]:
        return sorted({r for c in counts for r, n in c[key].items() if n})

    rows = [["read"] + [c["read"] for c in counts], ["kept"] + [c["kept"] for c in counts]]
    rows += [[f"skipped: {escape(r)}"] + [c["skipped"].get(r, 0) for c in counts] for r in reasons("skipped")]
    rows += [
        [f"error: {escape(r)}"] + [c["errors_by_reason"].get(r, 0) for c in counts] for r in reasons("errors_by_reason")
    ]
    unexplained = [(c["errors"] or 0) - sum(c["errors_by_reason"].values()) for c in counts]
    rows += [["errors, reason not recorded"] + unexplained] if any(unexplained) else []
    header = ["inputs"] + [f"{escape(c['job'])} → {stage_dir(n)}" for n, c in zip(names, counts)]
    return table(header, rows, set(range(1, len(header))))


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

    rows = [row(escape(s), docs["chars_by_source"][s], docs["words_by_source"][s]) for s in docs["by_source"]]
    rows += [row("<b>all</b>", docs["chars"], docs["words"])] if len(rows) > 1 else []
    return table(
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
        return f"<p>{escape(docs['absent'])}.</p>" + _unknown_html(unknown)
    parts = [_inputs_html(docs["stages"]), "<h3>By source</h3>", _sources_html(docs)]
    parts.append(
        plot_grid(
            [
                figure_html(plots, "document_chars", "Characters per document, by source"),
                figure_html(plots, "document_words", "Words (whitespace-separated) per document, by source"),
            ]
        )
    )
    extremes = []
    for title, key in (("Largest documents", "largest"), ("Smallest documents", "smallest")):
        rows = [
            [f"<code>{escape(d['id'])}</code>", escape(d["source"]), escape(d["title"] or "—"), d["chars"]]
            for d in docs[key]
        ]
        listed = table(["id", "source", "title", "characters"], rows, {3})
        extremes.append(f"<div><h3>{title}</h3>{listed}</div>" if listed else "")
    parts.append(f'<div class="side">{"".join(extremes)}</div>')
    return "".join(parts) + _unknown_html(unknown)


def _unknown_html(unknown: dict) -> str:
    what = escape(unknown.get("unknown_pieces", "[UNK]"))
    parts = [f"<h3>Words that become {what}</h3>"]
    if "absent" in unknown:
        return parts[0] + f"<p>{escape(unknown['absent'])}.</p>"
    parts.append(
        f"<p>{unknown['unk_words']:,} of {unknown['words']:,} words (whitespace-separated; a character of Chinese, "
        "Japanese or Thai) "
        f"({(unknown['unk_word_rate'] or 0):.4%}) in {unknown['documents']:,} documents contain {what} "
        f"when tokenised with <code>{escape(unknown['vocab'])}</code>"
        f"{' (lower-cased)' if unknown['lowercase'] else ''}."
        f"{'' if unknown['counts_exact'] else ' Counts are lower bounds: too many distinct words.'}</p>"
    )
    rows = [[f"<code>{escape(w['word'])}</code>", escape(_code_points(w["word"])), w["count"]] for w in unknown["top"]]
    return "".join(parts) + table(["word", "characters outside ASCII", "count"], rows, {2})


def _pieces(value: float | None) -> str | None:
    return None if value is None else f"{value:.3f}"


def _languages_html(languages: dict[str, dict]) -> str:
    """Per language: documents, characters, the [UNK] share of its words, its tokens in the records, and each output's
    instances with their target and achieved shares where create sampled languages."""
    if not languages or (set(languages) == {UNDETERMINED} and not languages[UNDETERMINED].get("outputs")):
        return ""
    outputs = sorted({name for row in languages.values() for name in row.get("outputs", {})})
    # An output made with language sampling gives each language's target share beside the achieved one.
    sampled = {
        name for row in languages.values() for name, out in row.get("outputs", {}).items() if "target_share" in out
    }
    # (header, numeric, the cell of a row); a column that no row has a value for is left out (records alone have
    # no characters and no [UNK] words)
    columns = [
        ("language", False, lambda tag, row: f"<code>{escape(tag)}</code>"),
        ("documents", True, lambda tag, row: row.get("documents")),
        ("characters", True, lambda tag, row: row.get("characters")),
        ("[UNK] share of words", False, lambda tag, row: share(row.get("unk_word_rate"))),
        ("pieces per word", False, lambda tag, row: _pieces(row.get("pieces_per_word"))),
        ("tokens", True, lambda tag, row: row.get("tokens")),
    ]
    columns = [c for c in columns if any(c[2](tag, row) is not None for tag, row in languages.items())]
    columns += [
        (
            f"{name}: instances (achieved / target share)" if name in sampled else f"{name}: instances (share)",
            False,
            lambda tag, row, name=name: _language_instances(row.get("outputs", {}).get(name), name in sampled),
        )
        for name in outputs
    ]
    rows = [[_or_dash(cell(tag, row)) for _, _, cell in columns] for tag, row in languages.items()]
    note = (
        '<p class="note">A character of Chinese, Japanese or Thai counts as a word, and what becomes [UNK] there is a '
        "character.</p>"
    )
    numeric = {i for i, (_, is_number, _) in enumerate(columns) if is_number}
    return table([header for header, _, _ in columns], rows, numeric) + note


def _or_dash(value):
    return "—" if value is None else value


def _language_instances(out: dict | None, sampled: bool) -> str:
    """A language's instances in one output and their share: achieved / target where the output was sampled."""
    if out is None:
        return "—"
    shares = [share(out.get(key)) or "—" for key in (("achieved_share", "target_share") if sampled else ("share",))]
    return f"{out.get('instances', 0):,} ({' / '.join(shares)})"


def _code_points(word: str) -> str:
    """The non-ASCII characters of a word as U+XXXX, for those a reader's fonts cannot show."""
    unusual = list(dict.fromkeys(c for c in word if ord(c) > 0x7E))
    return " ".join(f"U+{ord(c):04X}" for c in unusual[:6]) + (" …" if len(unusual) > 6 else "")


# ---------------------------------------------------------------------------------------------- the page


def render_html(card: dict, plots: dict[str, str]) -> str:
    warnings = "".join(f"<li>{escape(w)}</li>" for w in card["warnings"])
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>Data card: {escape(card['directory'])}</title><style>{STYLE}</style></head><body>",
            f"<h1>Data card: <code>{escape(card['directory'])}</code></h1>",
            f'<p class="note">bertcorpus {escape(card["version"])} stats; every number is also in {STATS}.</p>',
            f'<div class="warn"><b>Warnings</b><ul>{warnings}</ul></div>' if warnings else "",
            section("built", "What was built", _built_html(card)),
            section("sources", "Sources: licence, provenance, languages, use", datasheet_html(card["datasheet"])),
            section("languages", "Languages", _languages_html(card.get("languages", {}))),
            section("plots", "Plots", plots_html(card["records"], plots)),
            section("documents", "Documents", _documents_html(card["documents"], card["unknown_words"], plots)),
            section("dedup", "Duplicates and benchmark text removed", dedup_html(card.get("dedup", []))),
            section("lineage", "Lineage", lineage_html(card["lineage"])),
            "</body></html>\n",
        ]
    )
