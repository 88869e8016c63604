"""The trainer's speed on a GPU (or TPU) with JAX or PyTorch alone: BERT-base at 128/20 and 512/80 in bf16, on records
that our own `create` makes from the bundled samples, read through the loader as `bertcorpus train` reads them.

    python benchmarks/bench_trainer_gpu.py                           # JAX (or $KERAS_BACKEND), base, 128 and 512
    python benchmarks/bench_trainer_gpu.py --backend torch
    python benchmarks/bench_trainer_gpu.py --records OUT             # a `create` output with seq128 and seq512
    python benchmarks/bench_trainer_gpu.py --smoke                   # CPU: the tiny model, a few seconds each
    python benchmarks/bench_trainer_gpu.py --flash-check             # packed batches on flash-attention (below)

Needs no TensorFlow and no network. The records: `bertcorpus extract-books` on tests/data/books, then `bertcorpus
create --seq-configs 128:20,512:80` with the BERT uncased vocab (tests/data/reference). Where Beam or pyarrow is
missing, it says so and times batches of the same shapes drawn from the bundled vocab instead, labelled as such
(the step's speed does not depend on the ids).

Printed per configuration: sequences/s, the time of one step, the peak memory (the device's; the process's resident
memory on CPU), model TFLOP/s and MFU: model FLOPs per second (trainer.model.train_flops_per_sequence) against the
chip's dense bf16 peak (benchmarks/bench_trainer.py's table; --peak-tflops for others). For comparison, NVIDIA's
BERT-large pretraining at 128 on 8×A100 80GB runs at about 4,591 sequences/s; the aim here is an MFU of 45% or more
for base at 128.

--flash-check runs no timing: it checks the packed layout on Hugging Face's ModernBERT with flash-attention's varlen
kernels (attn_implementation="flash_attention_2", fed by bertcorpus.packed_to_flash_kwargs) against the same
instances as padded rows on sdpa (bertcorpus.packed_to_padded), instance by instance, in bf16 on a CUDA device. It
needs torch with CUDA, transformers and flash-attn; without any of them it says which and exits 0 (skipped).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))
from bench_trainer import PREDICTIONS, build, repeated, result_row, set_backend, synthetic_batch, time_fit

VOCAB = ROOT / "tests" / "data" / "reference" / "bert-base-uncased-vocab.txt"
BOOKS = ROOT / "tests" / "data" / "books"
GPU_BATCH = {128: 256, 512: 64}
SMOKE_BATCH = {128: 8, 512: 2}
FLASH_TOLERANCE = 0.05  # bf16 logits of the same instance from two attention kernels: rounding only


def cli(*argv: str) -> None:
    """`bertcorpus ARGV` in a process of its own (Beam's local runner), its output kept unless it fails."""
    command = "import sys; from bertcorpus.pipeline.cli.commands import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", command, *argv], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bertcorpus {argv[0]} failed:\n{done.stderr[-3000:]}")


def make_records(work: Path, dupe_factor: int, masking: str) -> Path:
    """A `create` output with seq128 and seq512 from the bundled books, made with our own extract-books and create."""
    books, records = work / "books", work / "records"
    cli("extract-books", "--input", str(BOOKS), "--output", str(books), "--overwrite")
    cli(
        "create",
        "--input",
        str(books / "documents-*.parquet"),
        "--vocab",
        str(VOCAB),
        "--output",
        str(records),
        "--seq-configs",
        "128:20,512:80",
        "--dupe-factor",
        str(dupe_factor),
        "--masking",
        masking,
        "--overwrite",
    )
    return records


def instance_counts(records: Path) -> dict[int, int]:
    manifest = json.loads((records / "manifest.json").read_text())
    return {int(e["max_seq_length"]): int(e["train"]["instances"]) for e in manifest["outputs"].values()}


def flash_check(work: Path) -> int:
    """Each instance's logits through flash_attention_2 on the packed stream against sdpa on padded rows (a tiny,
    randomly initialised ModernBERT, bf16); 0 when they agree or the check cannot run here, 1 when they differ."""
    missing = [m for m in ("torch", "transformers", "flash_attn") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"flash check: skipped: {', '.join(missing)} not installed")
        return 0
    import torch
    import transformers

    if not torch.cuda.is_available():
        print("flash check: skipped: no CUDA device")
        return 0
    from bertcorpus import PretrainingLoader, packed_to_flash_kwargs, packed_to_padded

    records = make_records(work, 1, "dynamic")
    config = transformers.ModernBertConfig(
        vocab_size=30522, hidden_size=256, intermediate_size=384, num_hidden_layers=3, num_attention_heads=4,
        max_position_embeddings=512, pad_token_id=0, cls_token_id=101, sep_token_id=102, bos_token_id=101,
        eos_token_id=102, initializer_range=0.2,
    )  # fmt: skip
    torch.manual_seed(0)
    models = {
        name: transformers.ModernBertForMaskedLM(config).to("cuda", torch.bfloat16).eval()
        for name in ("flash_attention_2", "sdpa")
    }
    models["sdpa"].load_state_dict(models["flash_attention_2"].state_dict())
    for name, model in models.items():
        model.set_attn_implementation(name)

    def on_device(inputs: dict) -> dict:
        return {k: torch.from_numpy(v).cuda() if hasattr(v, "dtype") else v for k, v in inputs.items()}

    worst = 0.0
    for seq_len in (128, 512):
        loader = PretrainingLoader(records, seq_length=seq_len, layout="packed", tokens_per_batch=8 * seq_len)
        for i in range(min(4, len(loader))):
            batch = loader[i]
            flash_inputs = {k: v for k, v in packed_to_flash_kwargs(batch).items() if k != "labels"}
            padded = packed_to_padded(batch)
            with torch.no_grad():
                flat = models["flash_attention_2"](**on_device(flash_inputs)).logits.float().reshape(-1, 30522)
                rows = models["sdpa"](
                    **on_device({k: padded[k] for k in ("input_ids", "attention_mask", "position_ids")})
                ).logits.float()
            cu = batch["cu_seqlens"].tolist()
            for j, (a, b) in enumerate(zip(cu[:-1], cu[1:])):
                worst = max(worst, (flat[a:b] - rows[j, : b - a]).abs().max().item())
    verdict = "agree" if worst <= FLASH_TOLERANCE else "DIFFER"
    print(
        f"flash check: transformers {transformers.__version__}, {torch.cuda.get_device_name()}: packed batches on "
        f"flash_attention_2 and padded rows on sdpa {verdict} (largest logit difference {worst:.4f}, bf16; "
        f"tolerance {FLASH_TOLERANCE})"
    )
    return 0 if worst <= FLASH_TOLERANCE else 1


def main() -> None:
    if "--flash-check" in sys.argv[1:]:
        work = Path(tempfile.mkdtemp(prefix="bench_trainer_gpu_"))
        sys.exit(flash_check(work))
    backend = set_backend(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", help="jax or torch (default: $KERAS_BACKEND, else the first installed)")
    parser.add_argument("--records", help="a `create` output with the seq lengths to time (default: made here)")
    parser.add_argument("--work", help="where the records are made (default: a temporary folder)")
    parser.add_argument("--masking", choices=["static", "dynamic"], default="static", help="the form create writes")
    parser.add_argument("--config", help="model preset (default: base; tiny with --smoke)")
    parser.add_argument("--seq-lengths", default="128,512", help="comma-separated: 128 (P 20) and/or 512 (P 80)")
    parser.add_argument(
        "--batch-size", type=int, help="global batch (default: 256 at 128, 64 at 512; 8 and 2 with --smoke)"
    )
    parser.add_argument(
        "--precision",
        choices=["auto", "bf16", "fp32"],
        default="auto",
        help="auto: bf16 on GPUs of compute capability 8.0 or newer and on TPUs, else fp32",
    )
    parser.add_argument("--steps-per-execution", type=int, help="steps per compiled call (default: 10; 1 on torch)")
    parser.add_argument("--epoch-steps", type=int, help="steps per timed Keras epoch (default: 50; 5 with --smoke)")
    parser.add_argument("--seconds", type=float, help="timed seconds per configuration (default: 60; 5 with --smoke)")
    parser.add_argument(
        "--peak-tflops", type=float, help="the chip's dense bf16 peak, where the built-in table lacks it"
    )
    parser.add_argument("--smoke", action="store_true", help="a quick run of the tiny model, e.g. on CPU")
    parser.add_argument("--flash-check", action="store_true", help="check packed batches on flash-attention (above)")
    parser.add_argument("--json", help="append one JSON line per configuration to this file")
    args = parser.parse_args()

    config_name = args.config or ("tiny" if args.smoke else "base")
    seconds = args.seconds or (5.0 if args.smoke else 60.0)
    epoch_steps = args.epoch_steps or (5 if args.smoke else 50)
    steps_per_execution = args.steps_per_execution or (1 if backend == "torch" or args.smoke else 10)
    if epoch_steps % steps_per_execution:
        raise SystemExit("error: --steps-per-execution must divide --epoch-steps")
    seq_lengths = [int(s) for s in args.seq_lengths.split(",")]

    from bertcorpus.trainer.config import TrainConfig
    from bertcorpus.trainer.data import CreateOutput, LoaderBatches
    from bertcorpus.trainer.training_input import DataSource, loader_args

    missing = [m for m in ("apache_beam", "pyarrow") if importlib.util.find_spec(m) is None]
    records = Path(args.records) if args.records else None
    if records is None and not missing:
        work = Path(args.work or tempfile.mkdtemp(prefix="bench_trainer_gpu_"))
        records = make_records(work, 1 if args.smoke else 5, args.masking)
        counts = instance_counts(records)
        print(
            f"records: made by `bertcorpus create` from {BOOKS.relative_to(ROOT)} in {records} "
            f"({', '.join(f'{n:,} instances at {L}' for L, n in sorted(counts.items()))})",
            flush=True,
        )
    elif records is not None:
        counts = sorted(instance_counts(records).items())
        print(f"records: {records} ({', '.join(f'{n:,} instances at {L}' for L, n in counts)})")
    else:
        print(
            f"records: NONE - {' and '.join(missing)} missing here, so `create` cannot run: the batches are "
            f"SYNTHETIC, random ids from {VOCAB.name} in the shapes of 128/20 and 512/80",
            flush=True,
        )

    print(
        "| backend | device | config | L | batch | precision | seq/s | step ms | peak memory GiB | model TFLOP/s "
        "| MFU |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for seq_len in seq_lengths:
        predictions = PREDICTIONS[seq_len]
        batch_size = args.batch_size or (SMOKE_BATCH if args.smoke else GPU_BATCH)[seq_len]
        model, bert_config, devices = build(
            config_name, seq_len, predictions, batch_size, args.precision, steps_per_execution, strategy="auto"
        )
        if records is not None:
            source = DataSource(seq_len, predictions, "nsp", bert_config.vocab_size)
            config = TrainConfig(data=str(records), output="", batch_size=batch_size)
            data = LoaderBatches(
                loader_args(source, CreateOutput.read(str(records)), config, devices, "train", batch_size),
                None,
                threads=2,
            )
        else:
            data = repeated(synthetic_batch(batch_size, seq_len, predictions, bert_config.vocab_size))
        timing = time_fit(model, data, batch_size, seconds, epoch_steps)
        if records is not None:
            data.close()
        row = result_row(
            backend,
            config_name,
            bert_config,
            seq_len,
            predictions,
            batch_size,
            devices.precision,
            timing,
            args.peak_tflops,
        )
        mfu = f"{100 * row['mfu']:.1f}%" if row["mfu"] is not None else "–"
        print(
            f"| {backend} | {row['device']} | {config_name} | {seq_len} | {batch_size} | {devices.precision} | "
            f"{row['seq_per_s']} | {row['step_ms']} | {row['peak_memory_gib']} ({row['memory_of']}) | "
            f"{row['tflops']} | {mfu} |",
            flush=True,
        )
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps({**row, "records": str(records) if records else "synthetic"}) + "\n")


if __name__ == "__main__":
    main()
