"""Training throughput of the BERT pretraining module: sequences/s and model-FLOPs utilisation (MFU).

    python benchmarks/bench_trainer.py                                   # CPU: tiny and mini at 128
    python benchmarks/bench_trainer.py --configs base,large --seq-lengths 128,512          # GPU, TensorFlow
    KERAS_BACKEND=jax python benchmarks/bench_trainer.py --configs base,large --seq-lengths 128,512

Batches are synthetic (random ids, 15% of positions predicted), so only the model and the optimizer are
timed, not the input pipeline. On TensorFlow the step is the trainer's own (trainer/train.py: XLA, AdamW,
clipping, weight decay); on JAX it is the same model, loss and Keras optimizer under jax.jit.
MFU = seq/s × train FLOPs per sequence (trainer.model.train_flops_per_sequence) / the device's peak.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from trainer.model import BertConfig, BertPretrainer, dummy_batch, parameter_count, pretraining_loss, train_flops_per_sequence  # noqa: E402

# Dense tensor-core peaks in TFLOP/s (bf16, tf32), from the vendors' data sheets; the first match wins.
PEAK_TFLOPS = {
    "H200": (989.0, 494.0),
    "H100 PCIe": (756.0, 378.0),
    "H100": (989.0, 494.0),
    "A100": (312.0, 156.0),
    "L4": (121.0, 60.0),
    "A10": (125.0, 62.5),
}
PREDICTIONS = {128: 20, 512: 80}
DEFAULT_BATCH = {("cpu", 128): 32, ("cpu", 512): 8, ("gpu", 128): 256, ("gpu", 512): 64}


def synthetic_batch(batch_size: int, seq_len: int, predictions: int, vocab_size: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq_len), predictions, replace=False) for _ in range(batch_size)]), axis=1)
    return {
        "input_ids": rng.integers(999, vocab_size, (batch_size, seq_len)).astype("int32"),
        "input_mask": np.ones((batch_size, seq_len), "int32"),
        "segment_ids": (np.arange(seq_len) >= seq_len // 2).astype("int32")[None].repeat(batch_size, 0),
        "masked_lm_positions": positions.astype("int32"),
        "masked_lm_ids": rng.integers(999, vocab_size, (batch_size, predictions)).astype("int32"),
        "masked_lm_weights": np.ones((batch_size, predictions), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (batch_size, 1)).astype("int32"),
    }


def device_name() -> str:
    if keras.backend.backend() == "jax":
        import jax

        device = jax.devices()[0]
        return "cpu" if device.platform == "cpu" else device.device_kind
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU") if gpus else "cpu"


def peak_flops(name: str, precision: str) -> float | None:
    for key, (bf16, tf32) in PEAK_TFLOPS.items():
        if key in name:
            return 1e12 * (bf16 if precision == "bf16" else tf32)
    return None


def tensorflow_stepper(model, batch: dict, steps_per_call: int):
    """Returns run() doing `steps_per_call` steps of the trainer's own train function; waits for the result."""
    import tensorflow as tf

    from trainer.train import TrainConfig, make_optimizer, make_train_function

    precision = "bf16" if keras.mixed_precision.global_policy().name == "mixed_bfloat16" else "fp32"
    optimizer = make_optimizer(TrainConfig(data="", output="", warmup_steps=10, steps=10**6), model, precision)
    strategy = tf.distribute.get_strategy()
    train_steps = make_train_function(model, optimizer, strategy, jit_compile=True)
    iterator = iter(tf.data.Dataset.from_tensors({k: tf.constant(v) for k, v in batch.items()}).repeat())
    n = tf.constant(steps_per_call)
    return lambda: float(train_steps(iterator, n)[0].numpy())


def jax_stepper(model, batch: dict, steps_per_call: int):
    """The same step on JAX: Keras stateless calls under jax.jit, parameters donated between steps."""
    import jax

    optimizer = keras.optimizers.AdamW(learning_rate=1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_list=[v for v in model.trainable_variables if len(v.shape) == 1])
    optimizer.build(model.trainable_variables)

    def loss_fn(trainable, non_trainable, batch):
        outputs, non_trainable = model.stateless_call(trainable, non_trainable, batch, training=True)
        return pretraining_loss(outputs, batch)[0], non_trainable

    def step(state, batch):
        trainable, non_trainable, optimizer_vars = state
        (loss, non_trainable), grads = jax.value_and_grad(loss_fn, has_aux=True)(trainable, non_trainable, batch)
        trainable, optimizer_vars = optimizer.stateless_apply(optimizer_vars, grads, trainable)
        return (trainable, non_trainable, optimizer_vars), loss

    step = jax.jit(step, donate_argnums=0)
    state = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables], [v.value for v in optimizer.variables])
    batch = jax.device_put(batch)

    def run() -> float:
        nonlocal state
        for _ in range(steps_per_call):
            state, loss = step(state, batch)
        return float(loss)

    return run


def bench(config_name: str, seq_len: int, batch_size: int, precision: str, seconds: float, steps_per_call: int) -> dict:
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if precision == "bf16" else "float32")
    config = BertConfig.preset(config_name)
    predictions = PREDICTIONS.get(seq_len, round(0.15 * seq_len))
    model = BertPretrainer(config)
    model(dummy_batch(1, seq_len, predictions))
    batch = synthetic_batch(batch_size, seq_len, predictions, config.vocab_size)
    run = (jax_stepper if keras.backend.backend() == "jax" else tensorflow_stepper)(model, batch, steps_per_call)

    for _ in range(2):  # compile, then one more call so that every buffer is allocated
        loss = run()
    calls, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while calls < 3 or time.perf_counter() - start < seconds:
        loss = run()
        calls += 1
    elapsed, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start

    seq_per_s = calls * steps_per_call * batch_size / elapsed
    flops = train_flops_per_sequence(config, seq_len, predictions)
    name = device_name()
    peak = peak_flops(name, precision)
    return {
        "backend": keras.backend.backend(), "device": name, "config": config_name, "params_m": round(parameter_count(config)["total"] / 1e6, 1),
        "seq_len": seq_len, "predictions": predictions, "batch_size": batch_size, "precision": precision,
        "seq_per_s": round(seq_per_s, 1), "tflops": round(seq_per_s * flops / 1e12, 3),
        "mfu": round(seq_per_s * flops / peak, 3) if peak else None, "loss": round(loss, 3),
        # CPU time of this process per step: on a machine shared with other jobs it varies far less than seq/s.
        "cpu_s_per_step": round(cpu_seconds / (calls * steps_per_call), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="tiny,mini", help="comma-separated model presets")
    parser.add_argument("--seq-lengths", default="128", help="comma-separated; P = 20 at 128, 80 at 512")
    parser.add_argument("--batch-size", type=int, help="default: 32 (CPU) or 256 (GPU) at 128; 8 or 64 at 512")
    parser.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto", help="auto: bf16 on GPU, fp32 on CPU")
    parser.add_argument("--seconds", type=float, default=20.0, help="timed seconds per configuration, after warm-up")
    parser.add_argument("--steps-per-call", type=int, default=1, help="steps per compiled call (host overhead)")
    parser.add_argument("--peak-tflops", type=float, help="the device's peak, when it is not in the built-in table")
    parser.add_argument("--json", help="append one JSON line per configuration to this file")
    args = parser.parse_args()

    kind = "cpu" if device_name() == "cpu" else "gpu"
    precision = args.precision if args.precision != "auto" else ("bf16" if kind == "gpu" else "fp32")
    print("| backend | device | config | L | batch | precision | seq/s | model TFLOP/s | MFU | CPU s/step |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for config_name in args.configs.split(","):
        for seq_len in (int(s) for s in args.seq_lengths.split(",")):
            batch_size = args.batch_size or DEFAULT_BATCH[(kind, 512 if seq_len > 128 else 128)]
            result = bench(config_name, seq_len, batch_size, precision, args.seconds, args.steps_per_call)
            if args.peak_tflops:
                result["mfu"] = round(result["tflops"] / args.peak_tflops, 3)
            mfu = f"{100 * result['mfu']:.1f}%" if result["mfu"] is not None else "–"
            print(f"| {result['backend']} | {result['device']} | {config_name} | {seq_len} | {batch_size} | {precision} | "
                  f"{result['seq_per_s']} | {result['tflops']} | {mfu} | {result['cpu_s_per_step']} |", flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
