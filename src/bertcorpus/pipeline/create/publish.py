"""create's last step: the run's counts summed once, the outputs checked, the shards moved into place and the
manifest written last."""

from __future__ import annotations

import math
import typing
from collections import Counter

import apache_beam as beam

from bertcorpus.pipeline.create.config import CreateConfig, shard_name
from bertcorpus.pipeline.create.job_vocab import JobVocab, StepWithVocab
from bertcorpus.pipeline.create.megatron import (
    empty_file,
    expected_files,
    file_prefix,
    megatron_flags,
    megatron_outputs,
)
from bertcorpus.pipeline.create.shard_writing import WriteShards
from bertcorpus.pipeline.create.steps import UnbalancedSplitError
from bertcorpus.pipeline.inputs.discovery import input_runs
from bertcorpus.pipeline.inputs.formats import InputError
from bertcorpus.pipeline.inputs.reads import merge_file_stats
from bertcorpus.pipeline.sinks import output
from bertcorpus.transforms.bucket_instances import manifest_bins
from bertcorpus.transforms.instance_mds import INDEX, index_bytes, index_entry
from bertcorpus.transforms.language_sampling import SHARE_TOLERANCE, share_report, strays
from bertcorpus.wordpiece.tokenizer_file import tokenizer_folder

VOCAB_COPY = "vocab.txt"  # beside the Parquet form, which is masked at load time with it
TOKENIZER_COPY = "tokenizer"  # a tokenizer.json's run: its folder, as AutoTokenizer.from_pretrained reads one
# What a run publishes, and so what --overwrite replaces: records, dead letters, the vocab or tokenizer copy.
OWNED_GLOBS = [
    "seq*/train-*.tfrecord",
    "seq*/eval-*.tfrecord",
    "seq*/train-*.parquet",
    "seq*/eval-*.parquet",
    "seq*/train/shard.*.mds",
    "seq*/eval/shard.*.mds",
    f"seq*/train/{INDEX}",
    f"seq*/eval/{INDEX}",
    "errors-*.jsonl",
    VOCAB_COPY,
    f"{TOKENIZER_COPY}/*",
    "megatron/*.bin",
    "megatron/*.idx",
    "megatron/*.provenance.parquet",
    "seq*/provenance/*.parquet",
]
LABELS = {"nsp": "random_next", "sop": "swapped", "none": "unused"}  # what next_sentence_labels holds


def keyed_by_kind(value: typing.Any, kind: str) -> tuple[str, typing.Any]:
    """(kind, value): what RunOutcome sums or gathers, by kind."""
    return kind, value


class RunOutcome(beam.CombineFn):
    """(kind, value) → {"counts": summed counts, "files": file stats, "shards": shard infos, "errors": errors
    file infos}."""

    LISTS = ("files", "shards", "errors")

    def create_accumulator(self) -> dict:
        return {"counts": Counter(), **{kind: [] for kind in self.LISTS}}

    def add_input(self, outcome: dict, element: tuple[str, typing.Any]) -> dict:
        kind, value = element
        if kind == "counts":
            outcome["counts"].update(value)
        else:
            outcome[kind].append(value)
        return outcome

    def merge_accumulators(self, outcomes) -> dict:
        merged = self.create_accumulator()
        for outcome in outcomes:
            merged["counts"].update(outcome["counts"])
            for kind in self.LISTS:
                merged[kind] += outcome[kind]
        return merged

    def extract_output(self, outcome: dict) -> dict:
        return {**outcome, "counts": dict(sorted(outcome["counts"].items()))}


class NoDocumentsError(RuntimeError):
    pass


class EmptySplitError(InputError):
    """A split that was asked for and holds no instance."""


class Publish(StepWithVocab):
    """The single last step: check, move shards into place, write the manifest."""

    def __init__(self, config: CreateConfig, vocab: JobVocab, vocab_sha256: str, inputs_skipped: dict[str, int]):
        super().__init__(config, vocab)
        self.vocab_sha256 = vocab_sha256
        self.inputs_skipped = inputs_skipped

    def process(self, outcome: dict, chinese_ref: bool = False, vocab: bytes | None = None):
        """outcome: RunOutcome's {"counts", "files", "shards", "errors"}; chinese_ref: whether MDS shards store a
        segmenter's words (WriteShards); vocab: the side input of the vocab's bytes."""
        loaded = self.vocab_ready(vocab)
        cfg = self.config
        counts, files, shard_infos = outcome["counts"], outcome["files"], outcome["shards"]
        errors_files = sorted(outcome["errors"], key=lambda f: f["path"])
        if counts.get("documents_kept", 0) == 0:
            output.discard_staging(cfg.output)
            why = ", ".join(
                f"{k.split(':', 1)[1]}: {v}"
                for k, v in counts.items()
                if ":" in k and v and k.startswith(("documents_skipped:", "lines_skipped:", "errors:"))
            )
            raise NoDocumentsError(
                f"no documents with any tokens were read from {', '.join(cfg.inputs)} "
                f"({counts.get('documents_read', 0)} read{'; ' + why if why else ''}); "
                "nothing was written"
            )
        if cfg.file_format == "megatron":
            yield self._publish_megatron(counts, files, shard_infos, errors_files, vocab)
            return
        # A shard that drew no records (a tiny input) still gets its file, empty.
        written = {s["path"] for s in shard_infos}
        writer = WriteShards(cfg, self.vocab)
        writer.setup()
        writer.vocab_ready(vocab)
        shard_infos = list(shard_infos) + [
            writer.write(seq.name, split, i, [], chinese_ref)
            for seq in cfg.seq_configs
            for split in ("train", "eval")
            for i in range(cfg.shards(split))
            if shard_name(cfg, seq, split, i) not in written
        ]
        shard_infos = sorted(shard_infos, key=lambda s: s["path"])
        manifest = build_manifest(cfg, self.vocab_sha256, shard_infos, counts, files, self.inputs_skipped, errors_files)
        if cfg.tokenizer is not None:
            manifest["vocab"] = None
            manifest["tokenizer"] = {"path": cfg.tokenizer, **loaded.describe(), "copy": TOKENIZER_COPY}
        problem = unbalanced_outputs(manifest) or empty_train_split(manifest)
        if problem:
            output.discard_staging(cfg.output)
            raise problem
        published = [s["path"] for s in shard_infos + errors_files]
        published += [s["provenance"]["path"] for s in shard_infos if "provenance" in s]
        if cfg.file_format == "mds":
            published += self._write_mds_indexes(manifest, chinese_ref)
        published += self._stage_vocab_copy(vocab)
        output.publish(cfg.output, published, manifest, OWNED_GLOBS)
        yield manifest

    def _stage_vocab_copy(self, frame: bytes | None) -> list[str]:
        """Stage the copy of the tokenizer (every form: the loader masks with it, inspect and stats decode with it)
        or of the vocab.txt (forms masked at load time); the paths staged. frame: the side input of its bytes."""
        cfg = self.config
        if cfg.tokenizer is not None:
            staged = []
            for name, data in tokenizer_folder(self.loaded).items():
                output.write_bytes(output.staging_path(cfg.output, f"{TOKENIZER_COPY}/{name}"), [data])
                staged.append(f"{TOKENIZER_COPY}/{name}")
            return staged
        if cfg.masking != "dynamic":
            return []
        output.write_bytes(output.staging_path(cfg.output, VOCAB_COPY), [self.vocab.raw(frame)])
        return [VOCAB_COPY]

    def _publish_megatron(
        self, counts: dict, files: list, infos: list[dict], errors_files: list[dict], frame: bytes | None
    ) -> dict:
        """Publish Megatron's indexed datasets (pipeline/create/megatron.py): every file the manifest names (an
        empty dataset where a file drew no part), the vocab or tokenizer copy, the manifest last."""
        cfg = self.config
        loaded = self.loaded
        if cfg.language_sampling_alpha == 1:
            made = {i["prefix"] for i in infos}
            infos = list(infos) + [
                empty_file(cfg, len(loaded), prefix, split, None)
                for split, number, total in expected_files(cfg)
                if (prefix := file_prefix(split, None, number, total)) not in made
            ]
        manifest = build_manifest(cfg, self.vocab_sha256, [], counts, files, self.inputs_skipped, errors_files)
        manifest["outputs"] = megatron_outputs(cfg, infos)
        if not manifest["outputs"]["train"]["documents"]:
            output.discard_staging(cfg.output)
            raise EmptySplitError(
                f"the train split holds no document (--eval-fraction {cfg.eval_fraction} of "
                f"{manifest['documents']['kept']:,} documents); lower --eval-fraction or give more documents; "
                "nothing was published"
            )
        tokenizer = None
        if cfg.tokenizer is not None:
            manifest["vocab"] = None
            tokenizer = manifest["tokenizer"] = {"path": cfg.tokenizer, **loaded.describe(), "copy": TOKENIZER_COPY}
        else:
            manifest["vocab"]["copy"] = VOCAB_COPY
        manifest["megatron"] = megatron_flags(cfg, manifest["outputs"], tokenizer, VOCAB_COPY)
        published = [f["path"] for i in infos for f in i["files"]] + [f["path"] for f in errors_files]
        published += self._stage_vocab_copy(frame)
        output.publish(cfg.output, published, manifest, OWNED_GLOBS)
        return manifest

    def _write_mds_indexes(self, manifest: dict, chinese_ref: bool) -> list[str]:
        """Stage the index.json of each MDS split folder (its shards in order, as the manifest lists them)."""
        cfg = self.config
        columns = cfg.mds_columns(len(self.loaded), chinese_ref)
        # How the shards store input_ids, which decides the readers that read them (docs/pretraining_data.md).
        manifest["form"]["mds_input_ids"] = columns.encodings[columns.names.index("input_ids")]
        written = []
        for name, out in manifest["outputs"].items():
            for split in ("train", "eval"):
                if split not in out:
                    continue
                entries = [
                    index_entry(s["path"].rsplit("/", 1)[1], s["records"], s["bytes"], columns)
                    for s in out[split]["shards"]
                ]
                rel = out[split]["mds_index"] = f"{name}/{split}/{INDEX}"
                output.write_bytes(output.staging_path(cfg.output, rel), [index_bytes(entries)])
                written.append(rel)
        return written


def random_next_bound(instances: int) -> float:
    """How far an output's label share may stray from 0.5: 0.01 from 10,000 instances on, and for fewer, four
    standard errors of a fair coin (a balanced output passes this but once in ~16,000)."""
    return max(0.01, 4 * 0.5 / math.sqrt(instances)) if instances < 10_000 else 0.01


def unbalanced_outputs(manifest: dict) -> UnbalancedSplitError | None:
    """The error naming the outputs whose label shares stray outside random_next_bound; None if none does."""
    entries = [
        (f"{name}/{split}", out[split])
        for name, out in manifest["outputs"].items()
        for split in ("train", "eval")
        if split in out and out[split].get("label_share") is not None
    ]
    strays = [
        f"{where} {entry['label_share']:.4f} over {entry['instances']:,} instances"
        for where, entry in entries
        if abs(entry["label_share"] - 0.5) > random_next_bound(entry["instances"])
    ]
    if not strays:
        return None
    kind = "NSP" if manifest["form"]["pair_objective"] == "nsp" else "SOP"
    return UnbalancedSplitError(
        f"{kind} labels outside 0.5 ± their bound (0.01 from 10,000 instances, 4 standard "
        f"errors below): {'; '.join(strays)}; nothing was published"
    )


# Random next segments drawn per distinct one and per dupe pass above which a warning says the negatives repeat: a
# bucket draws them from the fragments other buckets sent it (about its own tokens' worth, whatever the number of
# buckets), each from its first sentence, so each serves one or two negatives per pass; two documents, one of them
# short, once made every one of 438 negatives the same segment.
REPEATED_NEGATIVES_PER_PASS = 4


def languages_without_instances(manifest: dict) -> dict[str, int]:
    """{language: documents} of the languages whose documents made no instance in any output and split (too few
    or too short for a pair)."""
    if manifest["form"]["file_format"] == "megatron":
        return {}
    made = {
        language
        for out in manifest["outputs"].values()
        for split in ("train", "eval")
        for language, entry in (out.get(split) or {}).get("languages", {}).items()
        if entry["instances"]
    }
    return {lang: e["documents"] for lang, e in manifest.get("languages", {}).items() if lang not in made}


def output_notes(manifest: dict) -> list[str]:
    """Warnings about a published output: an eval split that got no instance although one was asked for (the split
    is by document, and a few large documents may all fall on the train side), NSP negatives that repeat, languages
    that made no instance, and sampled language shares off their targets by more than SHARE_TOLERANCE (the output
    is published: a small corpus's shares move by whole instances)."""
    notes = []
    config, objective = manifest["config"], manifest["form"]["pair_objective"]
    if manifest["form"]["file_format"] == "megatron":  # sentences, not instances: Megatron makes those
        return notes
    if missing := languages_without_instances(manifest):
        notes.append(
            "no instance was made of the documents of "
            + ", ".join(f"{lang} ({n:,} document{'s' * (n != 1)})" for lang, n in sorted(missing.items()))
            + ": too few or too short for a pair; they are counted under the manifest's languages"
        )
    for name, out in manifest["outputs"].items():
        for split in ("train", "eval"):
            report = (out.get(split) or {}).get("languages", {})
            if manifest["form"].get("language_sampling_alpha", 1) != 1 and (off := strays(report)):
                notes.append(
                    f"the language shares of {name} {split} miss their targets by more than {SHARE_TOLERANCE}: "
                    f"{', '.join(off)} over {out[split]['instances']:,} instances: too few instances to mix finely, "
                    "or documents that make pairs of one label only (of one sentence), which are not repeated"
                )
    for name, out in manifest["outputs"].items():
        evaluated = out.get("eval")
        if evaluated is not None and not evaluated["instances"] and config["eval_fraction"]:
            notes.append(
                f"the eval split of {name} holds no instance: --eval-fraction {config['eval_fraction']:g} of "
                f"{manifest['documents']['kept']:,} documents (split by document) drew none; pass a larger "
                "--eval-fraction, or give more, smaller documents"
            )
        for split in ("train", "eval"):
            entry = out.get(split) or {}
            segments = entry.get("random_next_segments")
            if objective != "nsp" or not segments:
                continue
            negatives = round(entry["instances"] * entry["label_share"])
            if negatives >= 100 and negatives > REPEATED_NEGATIVES_PER_PASS * config["dupe_factor"] * segments:
                notes.append(
                    f"the {negatives:,} random next segments of {name} {split} start at only {segments:,} distinct "
                    f"place{'s' * (segments != 1)} ({negatives / segments:,.0f} draws each): too few other documents "
                    "to draw negatives "
                    "from, so next-sentence prediction learns little; give create more documents, or use "
                    "--pair-objective sop"
                )
    return notes


def empty_train_split(manifest: dict) -> EmptySplitError | None:
    """The error for a run whose train split holds no instance (its documents all went to eval, say)."""
    empty = [name for name, out in manifest["outputs"].items() if not out["train"]["instances"]]
    if not empty:
        return None
    config, objective = manifest["config"], manifest["form"]["pair_objective"]
    train = manifest["outputs"][empty[0]]["train"]
    skipped = {k: v for k, v in sorted(train.get(f"{objective}_draws_skipped", {}).items()) if v}
    drawn = "".join(f"; {n:,} {objective} draws skipped as {reason}" for reason, n in skipped.items())
    advice = ["lower --eval-fraction"] if config["eval_fraction"] else []
    if "single_sentence_document" in skipped:  # a pair needs two sentences: one-line documents, say
        advice.append("give documents of two sentences or more, or use --pair-objective none")
    advice.append("give more documents")
    return EmptySplitError(
        f"the train split of {', '.join(empty)} holds no instance (--eval-fraction "
        f"{config['eval_fraction']} of {manifest['documents']['kept']:,} documents{drawn}); "
        f"{', or '.join(advice)}; nothing was published"
    )


def build_manifest(
    cfg: CreateConfig,
    vocab_sha256: str,
    shards: list[dict],
    counts: dict,
    files: list,
    inputs_skipped: dict[str, int],
    errors_files: list[dict],
) -> dict:
    objective = cfg.pair_objective
    outputs: dict = {}
    for seq in cfg.seq_configs:
        per_split = {}
        for split in ("train", "eval"):
            if not cfg.shards(split):
                continue
            prefix = f"{seq.name}:{split}"
            n = counts.get(f"{prefix}:instances", 0)
            share = round(counts.get(f"{prefix}:positive_labels", 0) / n, 6) if n and objective != "none" else None
            entry = {
                "instances": n,
                "shards": [s for s in shards if s["path"].startswith((f"{seq.name}/{split}-", f"{seq.name}/{split}/"))],
                "label_share": share,
            }
            if objective == "nsp":
                entry["random_next_share"] = share
                # summed over buckets: a bucket's negatives starting where another of its own started count once
                entry["random_next_segments"] = counts.get(f"{prefix}:random_next_segments", 0)
            entry["mean_real_tokens"] = round(counts.get(f"{prefix}:real_tokens", 0) / n, 3) if n else None
            if seq.min_document_tokens:
                entry["min_document_tokens"] = seq.min_document_tokens
                entry["documents_below_min"] = counts.get(f"{prefix}:short_documents", 0)
            if cfg.masking == "static":
                entry["mean_predictions"] = round(counts.get(f"{prefix}:predictions", 0) / n, 3) if n else None
            if objective != "none":
                entry[f"{objective}_draws_skipped"] = {
                    k.rsplit(":", 1)[1]: v for k, v in counts.items() if k.startswith(f"{prefix}:skipped:")
                }
            if kept := {k.rsplit(":", 1)[1]: v for k, v in counts.items() if k.startswith(f"{prefix}:language:")}:
                unsampled = None
                if cfg.language_sampling_alpha != 1:
                    unsampled = {
                        k.rsplit(":", 1)[1]: v
                        for k, v in counts.items()
                        if k.startswith(f"language_unsampled:{prefix}:")
                    }
                entry["languages"] = share_report(kept, unsampled, cfg.language_sampling_alpha)
            if cfg.bin_size:
                entry["bins"] = manifest_bins(
                    {int(k.rsplit(":", 1)[1]): v for k, v in counts.items() if k.startswith(f"{prefix}:bin:")}
                )
            per_split[split] = entry
        outputs[seq.name] = {
            "max_seq_length": seq.max_seq_length,
            "max_predictions_per_seq": seq.max_predictions_per_seq,
            **per_split,
        }
    # Lines and rows that never became documents count as read: skipped by reason (a null text, beside documents
    # without tokens) or errors (a record that could not be read, each a dead letter), so that
    # read = kept + skipped + errors; a document cut into pieces is read once and kept as its pieces, so that
    # read - split + pieces = kept + skipped + errors.
    skipped = {
        k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith(("documents_skipped:", "lines_skipped:"))
    }
    errors = {k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith("errors:") and v}
    vocab = {"path": cfg.vocab, "sha256": vocab_sha256}
    if cfg.masking == "dynamic":
        vocab["copy"] = VOCAB_COPY
    return {
        "tool": "bertcorpus",
        "version": output.TOOL_VERSION,
        "job": "create",
        "config": cfg.describe(),
        "form": {
            "masking": cfg.masking,
            "pair_objective": objective,
            "bin_size": cfg.bin_size,
            "file_format": cfg.file_format,
            "label": LABELS[objective],
            "whole_word_mask": cfg.whole_word_mask,
            # What makes a word of Chinese characters for whole-word masking: a segmenter, or nothing (each one).
            "word_segmenter": cfg.segmentation.describe() if cfg.segmentation else None,
            # Languages mixed by smoothed shares p^alpha (1: each as it comes); each split's languages say how.
            "language_sampling_alpha": cfg.language_sampling_alpha,
        },
        "languages": languages_of(counts),
        "vocab": vocab,
        "inputs": [{k: f[k] for k in ("path", "size", "sha256", "documents")} for f in merge_file_stats(files)],
        # The runs that made the documents read (an extraction, or a dedup and the source it was).
        "input_runs": input_runs(cfg.inputs),
        # Paths the input patterns matched but no reader was given: folders inside a folder, broken links.
        "inputs_skipped": inputs_skipped,
        "documents": {
            "read": counts.get("documents_read", 0)
            + sum(v for k, v in counts.items() if k.startswith("lines_skipped:"))
            + sum(errors.values()),
            "kept": counts.get("documents_kept", 0),
            "skipped": dict(sorted(skipped.items())),
            "errors": sum(errors.values()),
            "errors_by_reason": dict(sorted(errors.items())),
            "split": {"documents": counts.get("documents_split", 0), "pieces": counts.get("document_pieces", 0)},
        },
        "errors_files": errors_files,
        "counts": {
            k: counts.get(k, 0)
            for k in (
                "sentences",
                "tokens",
                "unk_tokens",
                "replaced_chars",
                "unknown_language_tags",
                "single_sentence_documents",
                "long_sentences_cut",
                "unsplit_paragraphs",
            )
            # a tokenizer whose own pieces hold its special tokens turns their text into its unknown token
            + (("special_tokens_as_text",) if cfg.tokenizer is not None else ())
        },
        "segmentation": {
            k: counts.get(k, 0)
            for k in ("segmented_characters", "segmented_word_continuations", "segmentation_misaligned_documents")
        }
        if cfg.segmentation
        else None,
        "outputs": outputs,
    }


def languages_of(counts: dict) -> dict[str, dict[str, int]]:
    """{language: {documents, tokens}} of the documents kept, from the tokenizer's counts."""
    tags = sorted(k.split(":", 1)[1] for k in counts if k.startswith("language_documents:"))
    return {t: {"documents": counts[f"language_documents:{t}"], "tokens": counts[f"language_tokens:{t}"]} for t in tags}
