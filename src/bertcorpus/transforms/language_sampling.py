"""Languages mixed by smoothed shares (`create --language-sampling-alpha A`), as multilingual BERT (A = 0.7) and
XLM-R (A = 0.3) mixed theirs.

Let n_i be the instances a run without sampling makes of language i, and p_i = n_i / N its share. With smoothing,
each language gets the share q_i = p_i^A / Σ_j p_j^A of about the same total N: a language of many instances is
under-sampled, one of few is repeated. Language i's instances are made at the rate r_i = q_i · N / n_i of the run
without sampling: in each bucket, r_i times the instances the dupe factor's passes make of its documents of that
language, chosen at random among the draws of those passes and, above rate 1, of as many more passes as it takes,
each paired and masked anew (transforms/bucket_instances.py sampled_bucket_instances).
"""

from __future__ import annotations

# Shares are compared with their targets to this precision: an output whose share of a language strays further is
# named in a warning (the instances are kept whole, so a small corpus may miss by a few instances).
SHARE_TOLERANCE = 0.01


def smoothed_shares(instances: dict[str, int], alpha: float) -> dict[str, float]:
    """{language: p_i^alpha / Σ_j p_j^alpha} for the languages with any instances."""
    total = sum(instances.values())
    weights = {lang: (n / total) ** alpha for lang, n in sorted(instances.items()) if n > 0}
    norm = sum(weights.values())
    return {lang: w / norm for lang, w in weights.items()}


def sampling_rates(instances: dict[str, int], alpha: float) -> dict[str, float]:
    """{language: the rate its instances are made at}: its smoothed share of the same total over its own share."""
    total = sum(instances.values())
    return {lang: q * total / instances[lang] for lang, q in smoothed_shares(instances, alpha).items()}


def rates_by_output(instances: dict[str, int], alpha: float) -> dict[str, float]:
    """{"seq:split:language": rate} from {"seq:split:language": instances without sampling}: each output and split
    is smoothed on its own, so that the eval split is sampled per language as the train split is."""
    groups: dict[str, dict[str, int]] = {}
    for name, n in instances.items():
        where, language = name.rsplit(":", 1)
        groups.setdefault(where, {})[language] = n
    return {
        f"{where}:{language}": rate
        for where, counts in sorted(groups.items())
        for language, rate in sampling_rates(counts, alpha).items()
    }


def share_report(kept: dict[str, int], unsampled: dict[str, int] | None, alpha: float) -> dict[str, dict]:
    """Each language's instances in an output split and its share; with sampling (`unsampled` given: the instances
    a run without it makes), also those instances and their share, the target share and the achieved one."""
    total = sum(kept.values())
    report = {}
    targets = smoothed_shares(unsampled, alpha) if unsampled else {}
    unsampled_total = sum(unsampled.values()) if unsampled else 0
    for language in sorted(set(kept) | set(unsampled or {})):
        n = kept.get(language, 0)
        entry = {"instances": n, "share": round(n / total, 6) if total else 0.0}
        if unsampled is not None:
            entry["unsampled_instances"] = unsampled.get(language, 0)
            entry["unsampled_share"] = round(unsampled.get(language, 0) / unsampled_total, 6) if unsampled_total else 0
            entry["target_share"] = round(targets.get(language, 0.0), 6)
            entry["achieved_share"] = entry.pop("share")
        report[language] = entry
    return report


def strays(report: dict[str, dict]) -> list[str]:
    """The languages of a sampled split whose achieved share is more than SHARE_TOLERANCE from its target."""
    return [
        f"{language} {entry['achieved_share']:.4f} (target {entry['target_share']:.4f})"
        for language, entry in report.items()
        if abs(entry["achieved_share"] - entry["target_share"]) > SHARE_TOLERANCE
    ]
