"""The devices a training run uses and how: TPU, several GPUs, one GPU or the CPU, and the precision, on each
Keras backend (TensorFlow's tf.distribute strategies, JAX's data parallel distribution, one torch device)."""

from __future__ import annotations

import glob
import os
from contextlib import nullcontext
from dataclasses import dataclass

import keras

from bertcorpus.trainer.config import PRECISIONS, STRATEGIES, TrainConfig, TrainerError


def choose_strategy_name(
    requested: str,
    tpu_available: bool,
    num_gpus: int,
    no_tpu: str = "no TPU was found (pass --tpu NAME or set TPU_NAME)",
) -> str:
    """How to use the devices: auto picks TPU, then several GPUs, then one GPU, then the default."""
    if requested not in STRATEGIES:
        raise TrainerError(f"unknown --strategy {requested!r}; choose from {', '.join(STRATEGIES)}")
    if requested == "auto":
        if tpu_available:
            return "tpu"
        if num_gpus > 1:
            return "mirrored"
        return "one_device" if num_gpus == 1 else "default"
    if requested == "tpu" and not tpu_available:
        raise TrainerError(f"--strategy tpu but {no_tpu}")
    return requested


def choose_precision(requested: str, on_tpu: bool, gpu_compute_capabilities: list[tuple[int, int]]) -> str:
    """auto: bf16 on TPUs and on GPUs of compute capability 8.0 (Ampere) or newer, else fp32."""
    if requested not in PRECISIONS:
        raise TrainerError(f"unknown --mixed-precision {requested!r}; choose from {', '.join(PRECISIONS)}")
    if requested == "fp16" and on_tpu:
        raise TrainerError("--mixed-precision fp16 is not supported on TPU; use bf16")
    if requested != "auto":
        return requested
    if on_tpu or (gpu_compute_capabilities and min(gpu_compute_capabilities) >= (8, 0)):
        return "bf16"
    return "fp32"


def tpu_available(tpu: str | None) -> bool:
    # A TPU VM exposes /dev/accel*; a TPU node is named by --tpu or TPU_NAME. Asking TPUClusterResolver
    # instead would query the GCE metadata server, which hangs on machines outside Google Cloud.
    return bool(tpu or os.environ.get("TPU_NAME") or glob.glob("/dev/accel*"))


def make_strategy(name: str, tpu: str | None):
    """The tf.distribute strategy of that name."""
    import tensorflow as tf

    if name == "tpu":
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
                tpu=tpu or os.environ.get("TPU_NAME") or "local"
            )
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except (ValueError, tf.errors.OpError) as err:
            raise TrainerError(f"cannot start the TPU: {str(err).splitlines()[0]}") from None
        return tf.distribute.TPUStrategy(resolver)
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0")
    return tf.distribute.get_strategy()


@dataclass
class Devices:
    """The devices a run uses, however the backend names them."""

    strategy: str  # one of STRATEGIES but auto
    precision: str
    replicas: int  # devices a global batch is split over
    scope: object  # a context manager in which the model and the optimizer are made
    rank: int = 0  # this process among those that read the data (JAX on several hosts)
    world_size: int = 1
    jit_compile: bool = True


def choose_devices(config: TrainConfig, backend: str) -> Devices:
    jit_compile = config.jit_compile if config.jit_compile is not None else backend != "torch"
    if backend == "tensorflow":
        import tensorflow as tf

        on_tpu = tpu_available(config.tpu)
        gpus = [] if on_tpu else tf.config.list_physical_devices("GPU")
        capabilities = [
            tuple(tf.config.experimental.get_device_details(g).get("compute_capability", (0, 0))) for g in gpus
        ]
        name = choose_strategy_name(config.strategy, on_tpu, len(capabilities))
        precision = choose_precision(config.mixed_precision, name == "tpu", capabilities)
        strategy = make_strategy(name, config.tpu)
        replicas = strategy.num_replicas_in_sync
        if replicas > 1 and name != "tpu":
            # Keras's fit under MirroredStrategy fails with XLA (variables on other devices than the compiled step)
            # and with several steps per call; JAX has neither limit.
            if config.jit_compile or config.steps_per_execution > 1:
                raise TrainerError(
                    "Keras's fit cannot compile the step (--jit-compile) or run several steps per call "
                    "(--steps-per-execution) under TensorFlow's MirroredStrategy; leave them out, or "
                    "use --backend jax for several GPUs"
                )
            jit_compile = False
        return Devices(name, precision, replicas, strategy.scope(), jit_compile=jit_compile)
    if backend == "jax":
        import jax

        devices = jax.devices()
        platform = devices[0].platform
        gpus = [d for d in devices if d.platform == "gpu"]
        capabilities = [
            tuple(int(part) for part in str(getattr(d, "compute_capability", "0.0")).split(".")[:2]) for d in gpus
        ]
        found = ", ".join(sorted({d.platform for d in devices}))
        name = choose_strategy_name(
            config.strategy, platform == "tpu", len(gpus), no_tpu=f"JAX finds no TPU (its devices: {found})"
        )
        precision = choose_precision(config.mixed_precision, platform == "tpu", capabilities)
        replicas = 1
        if name in ("tpu", "mirrored") and len(devices) > 1:
            keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
            replicas = len(devices)
        return Devices(name, precision, replicas, nullcontext(), jax.process_index(), jax.process_count(), jit_compile)
    import torch

    gpus = list(range(torch.cuda.device_count()))
    name = choose_strategy_name(
        config.strategy, False, min(len(gpus), 1), no_tpu="the torch backend runs on GPUs and CPUs"
    )
    if name == "mirrored":
        raise TrainerError(
            "--strategy mirrored is not supported on the torch backend, which trains on one device; "
            "use --backend jax or tensorflow for several GPUs"
        )
    precision = choose_precision(config.mixed_precision, False, [torch.cuda.get_device_capability(i) for i in gpus])
    return Devices(name, precision, 1, nullcontext(), jit_compile=jit_compile)
