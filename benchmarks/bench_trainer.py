"""Training throughput of the BERT pretraining module: sequences/s and model-FLOPs utilisation (MFU).

    python benchmarks/bench_trainer.py                                   # CPU: tiny and mini at 128, TensorFlow
    python benchmarks/bench_trainer.py --backend jax                     # the same on JAX
    /work/torchvenv/bin/python benchmarks/bench_trainer.py --backend torch   # PyTorch (a venv that has it)
    python benchmarks/bench_trainer.py --configs base,large --seq-lengths 128,512          # GPU

Batches are synthetic (random ids, 15% of positions predicted), so only the model and the optimizer are timed,
not the input. The step is the trainer's own on every backend (trainer/train.py: Keras's fit of PretrainingModel,
with XLA on TensorFlow and JAX, AdamW, clipping, weight decay); a Keras epoch of --epoch-steps steps is timed
after one of warm-up (compilation). benchmarks/bench_trainer_gpu.py times the same step on a GPU with real records.
MFU = seq/s × train FLOPs per sequence (trainer.model.train_flops_per_sequence) / the device's peak.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Dense tensor-core peaks in TFLOP/s (bf16, tf32), from the vendors' data sheets; the first match wins.
PEAK_TFLOPS = {
    "H200": (989.0, 494.0),
    "H100 PCIe": (756.0, 378.0),
    "H100": (989.0, 494.0),
    "A100": (312.0, 156.0),
    "L40S": (362.0, 183.0),
    "L4": (121.0, 60.0),
    "A10": (125.0, 62.5),
    "TPU v5 lite": (197.0, 197.0),
    "TPU v5p": (459.0, 459.0),
    "TPU v4": (275.0, 275.0),
}
PREDICTIONS = {128: 20, 512: 80}
DEFAULT_BATCH = {("cpu", 128): 32, ("cpu", 512): 8, ("gpu", 128): 256, ("gpu", 512): 64}


def set_backend(argv: list[str]) -> str:
    """--backend, else $KERAS_BACKEND, else the first installed: put where Keras reads it, before it is imported."""
    from bertcorpus.trainer.config import TrainerError, choose_backend, requested_backend

    try:
        backend = choose_backend(requested_backend(argv), os.environ.get("KERAS_BACKEND"))
    except TrainerError as err:
        raise SystemExit(f"error: {err}") from None
    os.environ["KERAS_BACKEND"] = backend
    return backend


def synthetic_batch(batch_size: int, seq_len: int, predictions: int, vocab_size: int, seed: int = 0) -> dict:
    import numpy as np

    rng = np.random.default_rng(seed)
    positions = np.sort(
        np.stack([rng.choice(np.arange(1, seq_len), predictions, replace=False) for _ in range(batch_size)]), axis=1
    )
    return {
        "input_ids": rng.integers(999, vocab_size, (batch_size, seq_len)).astype("int32"),
        "input_mask": np.ones((batch_size, seq_len), "int32"),
        "segment_ids": (np.arange(seq_len) >= seq_len // 2).astype("int32")[None].repeat(batch_size, 0),
        "masked_lm_positions": positions.astype("int32"),
        "masked_lm_ids": rng.integers(999, vocab_size, (batch_size, predictions)).astype("int32"),
        "masked_lm_weights": np.ones((batch_size, predictions), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (batch_size, 1)).astype("int32"),
    }


def repeated(batch: dict):
    """What fit reads: the same batch without end (tf.data on TensorFlow, as the trainer's glob input)."""
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.data.Dataset.from_tensors(batch).repeat()

    class Repeated(keras.utils.PyDataset):
        num_batches = None

        def __getitem__(self, index):
            return batch

    return Repeated()


def device_name() -> str:
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        return "cpu" if device.platform == "cpu" else device.device_kind
    if backend == "torch":
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU") if gpus else "cpu"


def peak_flops(name: str, precision: str) -> float | None:
    for key, (bf16, tf32) in PEAK_TFLOPS.items():
        if key in name:
            return 1e12 * (bf16 if precision == "bf16" else tf32)
    return None


def peak_memory() -> tuple[float, str]:
    """(GiB, where): the accelerator's peak allocation, or the process's peak resident memory on CPU."""
    import keras

    backend, name = keras.backend.backend(), device_name()
    if name != "cpu":
        if backend == "jax":
            import jax

            stats = jax.devices()[0].memory_stats() or {}
            if "peak_bytes_in_use" in stats:
                return stats["peak_bytes_in_use"] / 2**30, "device"
        elif backend == "torch":
            import torch

            return torch.cuda.max_memory_allocated() / 2**30, "device"
        else:
            import tensorflow as tf

            return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**30, "device"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "host RSS"


def time_fit(model, data, batch_size: int, seconds: float, epoch_steps: int) -> dict:
    """Keras's fit of the model on `data`, in epochs of `epoch_steps` steps: the first (compilation) is left out,
    then epochs run until `seconds` have passed (at least three)."""
    import keras

    class Clock(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.wall, self.cpu, self.loss = [], [], float("nan")

        def on_epoch_begin(self, epoch, logs=None):
            self.started = (time.perf_counter(), time.process_time())

        def on_epoch_end(self, epoch, logs=None):
            self.loss = float(logs["loss"])  # waits for the device's last step
            self.wall.append(time.perf_counter() - self.started[0])
            self.cpu.append(time.process_time() - self.started[1])
            timed = self.wall[1:]
            if len(timed) >= 3 and sum(timed) >= seconds:
                self.model.stop_training = True

    clock = Clock()
    model.fit(data, epochs=10**6, steps_per_epoch=epoch_steps, verbose=0, callbacks=[clock], shuffle=False)
    wall, cpu = sum(clock.wall[1:]), sum(clock.cpu[1:])
    steps = epoch_steps * (len(clock.wall) - 1)
    return {
        "seq_per_s": steps * batch_size / wall,
        "step_ms": 1000 * wall / steps,
        "cpu_s_per_step": cpu / steps,
        "loss": clock.loss,
        "compile_s": clock.wall[0],
    }


def build(
    config_name: str,
    seq_len: int,
    predictions: int,
    batch_size: int,
    precision: str,
    steps_per_execution: int,
    strategy: str = "default",
    vocab_size: int | None = None,
):
    """The trainer's model, optimizer and compiled step, as `bertcorpus train` makes them."""
    import keras

    from bertcorpus.trainer.config import BertConfig, TrainConfig
    from bertcorpus.trainer.devices import choose_devices
    from bertcorpus.trainer.train import build_model

    config = TrainConfig(
        data="",
        output="",
        model=config_name,
        batch_size=batch_size,
        steps=10**6,
        warmup_steps=10,
        mixed_precision=precision,
        strategy=strategy,
        steps_per_execution=steps_per_execution,
    )
    devices = choose_devices(config, keras.backend.backend())
    bert_config = BertConfig.preset(config_name, **({"vocab_size": vocab_size} if vocab_size else {}))
    model, _ = build_model(bert_config, config, devices, seq_len, predictions)
    return model, bert_config, devices


def result_row(
    backend: str,
    config_name: str,
    bert_config,
    seq_len: int,
    predictions: int,
    batch_size: int,
    precision: str,
    timing: dict,
    peak_tflops: float | None = None,
) -> dict:
    from bertcorpus.trainer.model import parameter_count, train_flops_per_sequence

    flops = train_flops_per_sequence(bert_config, seq_len, predictions)
    name = device_name()
    peak = 1e12 * peak_tflops if peak_tflops else peak_flops(name, precision)
    tflops = timing["seq_per_s"] * flops / 1e12
    memory, where = peak_memory()
    return {
        "backend": backend,
        "device": name,
        "config": config_name,
        "params_m": round(parameter_count(bert_config)["total"] / 1e6, 1),
        "seq_len": seq_len,
        "predictions": predictions,
        "batch_size": batch_size,
        "precision": precision,
        "seq_per_s": round(timing["seq_per_s"], 1),
        "step_ms": round(timing["step_ms"], 1),
        "tflops": round(tflops, 3),
        "mfu": round(1e12 * tflops / peak, 3) if peak else None,
        "peak_memory_gib": round(memory, 2),
        "memory_of": where,
        "loss": round(timing["loss"], 3),
        # CPU time of this process per step: on a machine shared with other jobs it varies far less than seq/s.
        "cpu_s_per_step": round(timing["cpu_s_per_step"], 3),
        "compile_s": round(timing["compile_s"], 1),
    }


def main() -> None:
    backend = set_backend(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backend", help="tensorflow, jax or torch (default: $KERAS_BACKEND, else the first installed)"
    )
    parser.add_argument("--configs", default="tiny,mini", help="comma-separated model presets")
    parser.add_argument("--seq-lengths", default="128", help="comma-separated; P = 20 at 128, 80 at 512")
    parser.add_argument("--batch-size", type=int, help="default: 32 (CPU) or 256 (GPU) at 128; 8 or 64 at 512")
    parser.add_argument(
        "--precision", choices=["auto", "bf16", "fp32"], default="auto", help="auto: bf16 on GPU, fp32 on CPU"
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="timed seconds per configuration, after warm-up")
    parser.add_argument("--steps-per-execution", type=int, default=1, help="steps per compiled call (host overhead)")
    parser.add_argument("--epoch-steps", type=int, default=10, help="steps per timed Keras epoch")
    parser.add_argument("--peak-tflops", type=float, help="the device's peak, when it is not in the built-in table")
    parser.add_argument("--json", help="append one JSON line per configuration to this file")
    args = parser.parse_args()

    kind = "cpu" if device_name() == "cpu" else "gpu"
    precision = args.precision if args.precision != "auto" else ("bf16" if kind == "gpu" else "fp32")
    print("| backend | device | config | L | batch | precision | seq/s | step ms | model TFLOP/s | MFU | CPU s/step |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for config_name in args.configs.split(","):
        for seq_len in (int(s) for s in args.seq_lengths.split(",")):
            batch_size = args.batch_size or DEFAULT_BATCH[(kind, 512 if seq_len > 128 else 128)]
            predictions = PREDICTIONS.get(seq_len, round(0.15 * seq_len))
            model, bert_config, _ = build(
                config_name, seq_len, predictions, batch_size, precision, args.steps_per_execution
            )
            batch = synthetic_batch(batch_size, seq_len, predictions, bert_config.vocab_size)
            timing = time_fit(model, repeated(batch), batch_size, args.seconds, args.epoch_steps)
            result = result_row(
                backend, config_name, bert_config, seq_len, predictions, batch_size, precision, timing, args.peak_tflops
            )
            mfu = f"{100 * result['mfu']:.1f}%" if result["mfu"] is not None else "–"
            print(
                f"| {backend} | {result['device']} | {config_name} | {seq_len} | {batch_size} | {precision} | "
                f"{result['seq_per_s']} | {result['step_ms']} | {result['tflops']} | {mfu} | "
                f"{result['cpu_s_per_step']} |",
                flush=True,
            )
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
