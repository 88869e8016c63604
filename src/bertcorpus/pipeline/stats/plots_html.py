"""The plots section of the data card's page: per seq config and split, the figures with captions that say what
each shape means, and the padding of batches by length bin."""

from __future__ import annotations

from bertcorpus.pipeline.stats.html_parts import escape, figure_html, plot_grid, share, table

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
        f"<h3><code>{escape(title)}</code>: {s['max_seq_length']} tokens, up to {s['max_predictions_per_seq']} "
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
    details, padding = table([""] + columns, rows, set(range(1, len(columns) + 1))), _padding_html(s)
    parts.append(f'<div class="side"><div>{details}</div><div>{padding}</div></div>' if padding else details)
    parts.append(
        plot_grid([figure_html(plots, f"{prefix} {key}", _caption(key, caption, s)) for key, caption in PLOTS])
    )
    rows = [
        [f"<code>{escape(r['path'])}</code>", r["records"], r["bytes"], r["file_bytes"]]
        + ([r["records_read"]] if s["sampled"] else [])
        for r in s["shards"]
    ]
    header = ["shard", "records (manifest)", "bytes (manifest)", "bytes (file)"] + (["records read"] * s["sampled"])
    parts.append(
        f"<details><summary>{len(rows):,} shards</summary>"
        + table(header, rows, set(range(1, len(header))))
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
            rows.append([f"{first}–{b['width']} tokens", b["instances"], b["width"], share(b["padded_share"], 1)])
        first = b["width"] + 1
    rows.append(["<b>all, batched by bins</b>", s["all"]["instances"], None, share(padding["padded_share"], 1)])
    length = s["max_seq_length"]
    rows.append(
        [
            f"all, padded to {length} (no bins)",
            s["all"]["instances"],
            length,
            share(padding["padded_share_without_bins"], 1),
        ]
    )
    stored = (
        "The records themselves stay padded to the full length; this is what the loader pads when it "
        "batches them by bins."
        if "drawn_by" not in s["masks"]
        else "As the loader pads its batches."
    )
    return (
        table([f"length (bins of {padding['bin_size']})", "instances", "padded width", "padded share"], rows, {1, 2, 3})
        + f'<p class="note">Padding by length bin, train and eval together. {stored}</p>'
    )


def plots_html(records: dict, plots: dict[str, str]) -> str:
    stages = {name: info for name, info in records.items() if name != "absent"}
    several = len(stages) > 1
    return "".join(
        _seq_plots_html(seq if stage == "." else f"{stage}/{seq}", s, plots, f"{stage} {seq}" if several else seq)
        for stage, info in stages.items()
        for seq, s in info["seq_configs"].items()
        if s["all"]["instances"]
    )
