"""The trainer's settings as plain data: the model shapes, the training config and the flags that set it.

Nothing here loads TensorFlow, JAX, PyTorch or Keras, so the command line can list the flags (`bertcorpus train
--help`) quickly, choose the Keras backend before Keras is imported, and work where no extra is installed.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
from dataclasses import dataclass


class TrainerError(Exception):
    """A problem the user must fix (a flag, a path, the data); its message is one line, shown without a traceback."""


# (layers, hidden size, attention heads); the feed-forward size is always 4 × hidden.
PRESETS: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    max_position: int = 512
    type_vocab_size: int = 2
    dropout: float = 0.1
    initializer_range: float = 0.02
    pair_head: bool = True  # the 2-way classifier on [CLS] (next sentence or sentence order); off for `none` records

    @classmethod
    def preset(cls, name: str, **overrides: object) -> BertConfig:
        if name not in PRESETS:
            raise ValueError(f"unknown model config {name!r}; choose from {', '.join(PRESETS)}")
        num_layers, hidden, heads = PRESETS[name]
        config = cls(num_layers=num_layers, hidden_size=hidden, num_heads=heads, intermediate_size=4 * hidden)
        return dataclasses.replace(config, **overrides)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


DEFAULT_SHUFFLE_BUFFER = 10_000
DEFAULT_SEQ_LENGTH, DEFAULT_PREDICTIONS = 128, 20  # for TFRecord globs, whose L and P no manifest gives
# Keras backends, and the extra of this package that installs each.
BACKENDS = {"tensorflow": "train", "jax": "jax", "torch": "torch"}
STRATEGIES = ("auto", "tpu", "mirrored", "one_device", "default")
PRECISIONS = ("auto", "bf16", "fp16", "fp32")

# Peak learning rates when --learning-rate is not given: smaller models take larger rates. base and large use
# the reference's 1e-4; the others are spaced between it and 1e-3, the rate at which the tiny shape learns
# fastest here (docs/trainer.md).
PRESET_LEARNING_RATES: dict[str, float] = {
    "tiny": 1e-3,
    "mini": 5e-4,
    "small": 3e-4,
    "medium": 2e-4,
    "base": 1e-4,
    "large": 1e-4,
}
DEFAULT_WARMUP_FRACTION = 0.01  # the reference warms up over 10,000 of its 1,000,000 steps


@dataclass
class TrainConfig:
    data: str  # a `create` output folder, or comma-separated TFRecord globs
    output: str
    eval_data: str | None = None  # default: the eval split of a `create` output; "none": no eval
    backend: str | None = None  # a Keras backend; default: $KERAS_BACKEND, else TensorFlow where installed, else JAX
    model: str = "base"  # a BertConfig preset (the --config flag)
    vocab_size: int | None = None  # default: the vocab of a `create` output, else BertConfig.vocab_size
    batch_size: int = 32  # global: split over the replicas
    eval_batch_size: int | None = None  # default: batch_size
    steps: int = 100_000  # total, including the steps of earlier runs that this one resumes
    max_seq_length: int | None = None  # default: the one seq config of a `create` output, else 128
    max_predictions_per_seq: int | None = None  # default: that config's P (scaled with --masked-lm-prob), else 20
    masked_lm_prob: str | None = None  # a rate or an EPOCH:RATE schedule, for dynamic records; default the manifest's
    mask_replace_prob: float | None = None  # default 0.8
    random_replace_prob: float | None = None  # default 0.1
    learning_rate: float | None = None  # default: PRESET_LEARNING_RATES[model]
    warmup_steps: int | None = None  # default: warmup_fraction × steps; capped at steps
    warmup_fraction: float = DEFAULT_WARMUP_FRACTION
    optimizer: str = "adamw"  # adamw | lamb
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-6
    clip_norm: float = 1.0  # global gradient norm; 0 turns clipping off
    mixed_precision: str = "auto"
    jit_compile: bool | None = None  # default: on for TensorFlow and JAX (XLA), off for PyTorch
    steps_per_execution: int = 1
    strategy: str = "auto"
    tpu: str | None = None  # TPU name or address for TPUClusterResolver (TensorFlow)
    init_checkpoint: str | None = None
    seed: int = 12345
    log_every: int = 100
    eval_steps: int | None = None  # default: one full pass over the eval files
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER  # TFRecord globs only


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `bertcorpus train` and `python -m bertcorpus.trainer.train`; dests are TrainConfig field names."""
    d = TrainConfig(data="", output="")
    parser.add_argument(
        "--data",
        required=True,
        help="a `bertcorpus create` output folder (its manifest gives the form, L, P and the pair "
        "objective), or TFRecord globs made elsewhere, comma-separated, e.g. 'rec/train-*'",
    )
    parser.add_argument(
        "--eval-data",
        help="eval records, evaluated once at the end: a `create` output folder or globs "
        "(default: the eval split of --data's output; 'none' to skip)",
    )
    parser.add_argument(
        "--output", required=True, help="run directory: checkpoints, logs, eval results; rerun to resume"
    )
    parser.add_argument(
        "--backend",
        help=f"Keras backend: {', '.join(BACKENDS)} (default: $KERAS_BACKEND, else "
        "tensorflow where installed, else jax)",
    )
    parser.add_argument(
        "--config", dest="model", default=d.model, choices=list(PRESETS), help="model size (default: %(default)s)"
    )
    parser.add_argument(
        "--vocab-size",
        type=int,
        help="tokens in the vocab the records were made with; a smaller vocab makes a smaller, faster "
        f"model (default: the `create` output's vocab, else {BertConfig.vocab_size})",
    )
    parser.add_argument(
        "--init-checkpoint",
        help="start from the weights of this run directory or checkpoint, for phase 2 (default: none)",
    )
    parser.add_argument("--batch-size", type=int, default=d.batch_size, help="global batch size (default: %(default)s)")
    parser.add_argument("--eval-batch-size", type=int, help="eval batch size (default: --batch-size)")
    parser.add_argument("--steps", type=int, default=d.steps, help="total training steps (default: %(default)s)")
    parser.add_argument(
        "--seq-length",
        "--max-seq-length",
        dest="max_seq_length",
        type=int,
        help=f"L: which seq config of a `create` output to train on, or the L of TFRecord globs (default: "
        f"the output's only one; {DEFAULT_SEQ_LENGTH} for globs)",
    )
    parser.add_argument(
        "--max-predictions-per-seq",
        type=int,
        help="P; masks drawn at load time (dynamic records) may take another (default: the manifest's; "
        f"{DEFAULT_PREDICTIONS} for globs)",
    )
    parser.add_argument(
        "--masked-lm-prob",
        metavar="RATE|SCHEDULE",
        help="the share of tokens to predict in dynamic records, in (0, 1), or a schedule by epoch such as "
        "0:0.3,2:0.15,4:0.05 (epochs may be fractional); --max-predictions-per-seq then scales with its "
        "highest rate (default: the manifest's masked_lm_prob)",
    )
    parser.add_argument(
        "--mask-replace-prob",
        type=float,
        help="share of the predicted tokens shown as [MASK], dynamic records (default: 0.8)",
    )
    parser.add_argument(
        "--random-replace-prob",
        type=float,
        help="share shown as a random token; the rest keep their token; 1 and 0 with --mask-replace-prob "
        "for all [MASK] (default: 0.1)",
    )
    rates = ", ".join(f"{name} {rate:g}" for name, rate in PRESET_LEARNING_RATES.items())
    parser.add_argument("--learning-rate", type=float, help=f"peak learning rate (default: by --config, {rates})")
    parser.add_argument(
        "--warmup-steps",
        type=int,
        help="linear warm-up steps, capped at --steps (default: --warmup-fraction of --steps)",
    )
    parser.add_argument(
        "--warmup-fraction",
        type=float,
        default=d.warmup_fraction,
        help="warm-up as a share of --steps, when --warmup-steps is not given (default: %(default)s)",
    )
    parser.add_argument("--optimizer", default=d.optimizer, choices=["adamw", "lamb"], help="(default: %(default)s)")
    parser.add_argument(
        "--weight-decay",
        type=float,
        default=d.weight_decay,
        help="not applied to LayerNorm and biases (default: %(default)s)",
    )
    parser.add_argument("--beta1", type=float, default=d.beta1, help="Adam's first-moment decay (default: %(default)s)")
    parser.add_argument(
        "--beta2", type=float, default=d.beta2, help="Adam's second-moment decay (default: %(default)s)"
    )
    parser.add_argument(
        "--epsilon", type=float, default=d.epsilon, help="Adam's denominator term (default: %(default)s)"
    )
    parser.add_argument(
        "--clip-norm", type=float, default=d.clip_norm, help="global gradient-norm clip, 0 = off (default: %(default)s)"
    )
    parser.add_argument(
        "--mixed-precision",
        default=d.mixed_precision,
        choices=list(PRECISIONS),
        help="auto = bf16 on TPU and Ampere-or-newer GPUs, fp32 otherwise (default: %(default)s)",
    )
    parser.add_argument(
        "--jit-compile",
        action=argparse.BooleanOptionalAction,
        help="compile the step: XLA on TensorFlow and JAX, torch.compile on PyTorch (default: on; off on PyTorch)",
    )
    parser.add_argument(
        "--steps-per-execution",
        type=int,
        default=d.steps_per_execution,
        help="steps per compiled call; must divide --log-every, --checkpoint-every and --steps; 1 on "
        "PyTorch (default: %(default)s)",
    )
    parser.add_argument(
        "--strategy",
        default=d.strategy,
        choices=list(STRATEGIES),
        help="devices: auto picks a TPU, then several GPUs (TensorFlow MirroredStrategy, JAX data "
        "parallel), then one device (default: %(default)s)",
    )
    parser.add_argument("--tpu", help="TPU name or grpc:// address (default: $TPU_NAME, or the local TPU VM)")
    parser.add_argument(
        "--seed", type=int, default=d.seed, help="initial weights, dropout and data order (default: %(default)s)"
    )
    parser.add_argument(
        "--log-every",
        type=int,
        default=d.log_every,
        help="steps between log lines and train_log.jsonl records; a progress line comes at least every "
        "30 s between them (default: %(default)s)",
    )
    parser.add_argument("--eval-steps", type=int, help="eval batches (default: one full pass over the eval records)")
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=d.checkpoint_every,
        help="steps between checkpoints (default: %(default)s)",
    )
    parser.add_argument(
        "--keep-checkpoints", type=int, default=d.keep_checkpoints, help="checkpoints kept (default: %(default)s)"
    )
    parser.add_argument(
        "--shuffle-buffer",
        type=int,
        default=d.shuffle_buffer,
        help="records, for TFRecord globs (a `create` output is read in the loader's seeded epoch "
        "order) (default: %(default)s)",
    )


def backend_extra(backend: str) -> str:
    return f"pip install 'bertcorpus[{BACKENDS[backend]}]'"


def choose_backend(requested: str | None, environment_backend: str | None) -> str:
    """The Keras backend to train on: --backend, else $KERAS_BACKEND, else TensorFlow where it is installed, else
    JAX, else PyTorch. Only looks for the packages (importing them costs seconds), so Keras can be told before it
    loads."""
    if requested is not None and requested not in BACKENDS:
        raise TrainerError(f"unknown --backend {requested!r}; choose {', '.join(BACKENDS)}")
    name = requested or environment_backend
    if name is None:
        found = next((b for b in BACKENDS if importlib.util.find_spec(b)), None)
        if found is None:
            raise TrainerError(
                "training needs Keras and one of its backends: pip install 'bertcorpus[train]' "
                "(TensorFlow), 'bertcorpus[jax]' or 'bertcorpus[torch]'"
            )
        name = found
    if name not in BACKENDS:
        raise TrainerError(f"unknown backend {name!r} (KERAS_BACKEND); choose {', '.join(BACKENDS)}")
    if importlib.util.find_spec(name) is None or importlib.util.find_spec("keras") is None:
        raise TrainerError(f"the {name} backend is not installed: {backend_extra(name)}")
    return name


def requested_backend(argv: list[str]) -> str | None:
    """The value of --backend in a command line, before the rest of it is parsed (Keras must know it at import)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--backend")
    return parser.parse_known_args(argv)[0].backend


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if hasattr(args, f.name)}
    )
