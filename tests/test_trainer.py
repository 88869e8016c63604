"""The BERT pretraining module on the TensorFlow backend: device choice, input checks, checkpoints, resume and phase 2.

`records_dir` (from conftest.py) is a `bertcorpus create` output: seq128/train-*.tfrecord and seq128/eval-*.tfrecord
from real text with the BERT uncased vocab, L=128, P=20. The other backends: test_trainer_backends.py.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from bertcorpus.trainer.config import PRESET_LEARNING_RATES  # noqa: E402 - after the skip, as these load Keras
from bertcorpus.trainer.data import (  # noqa: E402
    CreateOutput,
    TrainerError,
    check_records,
    eval_dataset,
    list_files,
    train_dataset,
)
from bertcorpus.trainer.devices import choose_precision, choose_strategy_name  # noqa: E402
from bertcorpus.trainer.model import BertConfig, BertPretrainer, dummy_batch, parameter_count  # noqa: E402
from bertcorpus.trainer.optimization import peak_learning_rate, warmup_steps  # noqa: E402
from bertcorpus.trainer.train import TrainConfig, fit_segments, main, train  # noqa: E402

L, P = 128, 20


def globs(records_dir) -> tuple[str, str]:
    seq = Path(records_dir) / f"seq{L}"
    return str(seq / "train-*.tfrecord"), str(seq / "eval-*.tfrecord")


def small_run(records_dir, output: Path, **overrides) -> TrainConfig:
    """A few steps of the tiny model on the `create` output: enough to exercise the loop, checkpoints and logs."""
    config = TrainConfig(
        data=str(records_dir),
        eval_data="none",
        output=str(output),
        model="tiny",
        batch_size=8,
        steps=3,
        warmup_steps=2,
        log_every=1,
        checkpoint_every=1000,
    )
    return dataclasses.replace(config, **overrides)


def read_log(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / "train_log.jsonl").read_text().splitlines()]


# ----------------------------------------------------------------------------- devices


@pytest.mark.parametrize(
    ("requested", "tpu", "gpus", "expected"),
    [
        ("auto", True, 0, "tpu"),
        ("auto", True, 8, "tpu"),
        ("auto", False, 8, "mirrored"),
        ("auto", False, 2, "mirrored"),
        ("auto", False, 1, "one_device"),
        ("auto", False, 0, "default"),
        ("mirrored", False, 0, "mirrored"),
        ("one_device", False, 4, "one_device"),
        ("default", True, 4, "default"),
        ("tpu", True, 0, "tpu"),
    ],
)
def test_choose_strategy_name(requested, tpu, gpus, expected):
    assert choose_strategy_name(requested, tpu_available=tpu, num_gpus=gpus) == expected


def test_choose_strategy_name_rejects_impossible_requests():
    with pytest.raises(TrainerError, match="no TPU"):
        choose_strategy_name("tpu", tpu_available=False, num_gpus=8)
    with pytest.raises(TrainerError, match="unknown --strategy"):
        choose_strategy_name("horovod", tpu_available=False, num_gpus=0)


def test_choose_precision():
    assert choose_precision("auto", on_tpu=True, gpu_compute_capabilities=[]) == "bf16"
    assert choose_precision("auto", on_tpu=False, gpu_compute_capabilities=[(8, 0), (9, 0)]) == "bf16"
    assert choose_precision("auto", on_tpu=False, gpu_compute_capabilities=[(7, 0)]) == "fp32"
    assert choose_precision("auto", on_tpu=False, gpu_compute_capabilities=[]) == "fp32"
    assert choose_precision("fp16", on_tpu=False, gpu_compute_capabilities=[(7, 0)]) == "fp16"
    with pytest.raises(TrainerError, match="not supported on TPU"):
        choose_precision("fp16", on_tpu=True, gpu_compute_capabilities=[])


# ----------------------------------------------------------------------------- model


@pytest.mark.parametrize("preset", ["tiny", "mini"])
def test_parameter_count_matches_the_model(preset):
    config = BertConfig.preset(preset)
    model = BertPretrainer(config)
    model(dummy_batch(1, 16, 4))
    assert parameter_count(config)["total"] == model.count_params()


def test_base_and_large_have_the_published_sizes():
    # BERT-Base ≈ 110M and BERT-Large ≈ 340M parameters (with the pretraining heads).
    assert 108e6 < parameter_count(BertConfig.preset("base"))["total"] < 112e6
    assert 333e6 < parameter_count(BertConfig.preset("large"))["total"] < 338e6


# ----------------------------------------------------------------------------- input errors


def test_records_longer_than_max_seq_length_are_named(records_dir, tmp_path, capsys):
    train_glob, _ = globs(records_dir)
    code = main(
        ["--data", train_glob, "--output", str(tmp_path / "run"), "--config", "tiny", "--max-seq-length", "512"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.endswith(f"input_ids has {L} values but --max-seq-length is 512")
    assert "\n" not in err and "Traceback" not in err

    with pytest.raises(TrainerError, match=f"masked_lm_positions has {P} values but --max-predictions-per-seq is 80"):
        check_records(list_files(train_glob), L, 80)


def test_records_with_ids_past_the_vocab_are_named(records_dir, tmp_path, capsys):
    train_glob, _ = globs(records_dir)
    first = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(list_files(train_glob)[0]))).numpy())
    largest = max(max(first.features.feature[name].int64_list.value) for name in ("input_ids", "masked_lm_ids"))
    check_records(list_files(train_glob), L, P, vocab_size=largest + 1)
    code = main(
        ["--data", train_glob, "--output", str(tmp_path / "run"), "--config", "tiny", "--vocab-size", str(largest)]
    )
    assert code == 2
    assert capsys.readouterr().err.strip().endswith(f"records hold token id {largest} but --vocab-size is {largest}")


def test_glob_that_matches_nothing(tmp_path, capsys):
    code = main(["--data", str(tmp_path / "nothing-*.tfrecord"), "--output", str(tmp_path / "run"), "--config", "tiny"])
    assert code == 2
    assert capsys.readouterr().err.strip() == f"error: no files match '{tmp_path / 'nothing-*.tfrecord'}'"


def test_a_glob_that_cannot_be_listed_is_one_line(tmp_path, capsys):
    code = main(["--data", "nosuchscheme://bucket/*.tfrecord", "--output", str(tmp_path / "run"), "--config", "tiny"])
    assert code == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .startswith(
            "error: cannot list nosuchscheme://bucket/*.tfrecord: File system scheme 'nosuchscheme' not implemented"
        )
    )


def test_corrupt_record_file_is_named(records_dir, tmp_path, capsys):
    source = list_files(globs(records_dir)[0])[0]
    data = bytearray(Path(source).read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside some record after the first: found only while training
    bad = tmp_path / "train-00000-of-00001.tfrecord"
    bad.write_bytes(bytes(data))

    code = main(
        [
            "--data",
            str(bad),
            "--output",
            str(tmp_path / "run"),
            "--config",
            "tiny",
            "--batch-size",
            "8",
            "--steps",
            "2",
            "--no-jit-compile",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith(f"error: corrupt record file {bad}: "), err
    assert "\n" not in err

    data[len(data) // 2] ^= 0xFF
    data[20] ^= 0xFF  # inside the first record: found before training starts
    bad.write_bytes(bytes(data))
    with pytest.raises(TrainerError, match=f"corrupt record file {bad}: corrupted record at"):
        check_records([str(bad)], L, P)


# ----------------------------------------------------------------------------- record layout


def test_records_in_the_reference_layout_load(tmp_path):
    """Eight records written as the reference's create_pretraining_data.py writes them."""
    rng = np.random.default_rng(0)
    path = tmp_path / "reference.tfrecord"
    written = []
    with tf.io.TFRecordWriter(str(path)) as writer:
        for _ in range(8):
            n = int(rng.integers(10, L))
            positions = sorted(rng.choice(np.arange(1, n - 1), size=5, replace=False).tolist())
            values = {
                "input_ids": [101] + rng.integers(999, 30522, n - 2).tolist() + [102] + [0] * (L - n),
                "input_mask": [1] * n + [0] * (L - n),
                "segment_ids": [0] * (n // 2) + [1] * (n - n // 2) + [0] * (L - n),
                "masked_lm_positions": positions + [0] * (P - 5),
                "masked_lm_ids": rng.integers(999, 30522, 5).tolist() + [0] * (P - 5),
                "masked_lm_weights": [1.0] * 5 + [0.0] * (P - 5),
                "next_sentence_labels": [int(rng.integers(0, 2))],
            }
            features = collections.OrderedDict()  # the reference's insertion order and list types
            for name, value in values.items():
                if name == "masked_lm_weights":
                    features[name] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
                else:
                    features[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
            writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
            written.append(values)

    check_records([str(path)], L, P)
    batches = list(eval_dataset([str(path)], 4, L, P))
    assert len(batches) == 2
    for name, expected_shape in [
        ("input_ids", (4, L)),
        ("masked_lm_weights", (4, P)),
        ("next_sentence_labels", (4, 1)),
    ]:
        assert tuple(batches[0][name].shape) == expected_shape
    assert batches[0]["input_ids"].dtype == tf.int32 and batches[0]["masked_lm_weights"].dtype == tf.float32
    for i, values in enumerate(written):
        batch = batches[i // 4]
        for name, value in values.items():
            np.testing.assert_array_equal(
                batch[name][i % 4].numpy(), np.asarray(value, dtype=batch[name].dtype.as_numpy_dtype)
            )

    batch = next(iter(train_dataset([str(path)], 8, L, P, seed=1)))  # shuffled and repeated: rows of the file
    assert {tuple(row) for row in batch["input_ids"].numpy().tolist()} <= {tuple(v["input_ids"]) for v in written}


# ----------------------------------------------------------------------------- training


def test_schedule_defaults_follow_the_preset_and_the_run_length():
    config = TrainConfig(data="", output="", model="tiny", steps=300)
    assert (peak_learning_rate(config), warmup_steps(config)) == (1e-3, 3)
    base = dataclasses.replace(config, model="base", steps=1_000_000)
    assert (peak_learning_rate(base), warmup_steps(base)) == (1e-4, 10_000)  # the reference's schedule
    explicit = dataclasses.replace(config, learning_rate=5e-4, warmup_steps=50)
    assert (peak_learning_rate(explicit), warmup_steps(explicit)) == (5e-4, 50)
    assert warmup_steps(dataclasses.replace(config, warmup_steps=1000)) == 300  # capped at --steps
    assert warmup_steps(dataclasses.replace(config, warmup_fraction=0.1)) == 30
    assert [PRESET_LEARNING_RATES[name] for name in ("tiny", "mini", "small", "medium", "base", "large")] == sorted(
        PRESET_LEARNING_RATES.values(), reverse=True
    )


def test_schedule_flags_are_checked(records_dir, tmp_path, capsys):
    train_glob, _ = globs(records_dir)
    for flags, message in [
        (["--warmup-fraction", "1.5"], "--warmup-fraction must be between 0 and 1"),
        (["--warmup-steps", "-1"], "--warmup-steps cannot be negative"),
    ]:
        assert main(["--data", train_glob, "--output", str(tmp_path / "run"), "--config", "tiny", *flags]) == 2
        assert capsys.readouterr().err.strip() == f"error: {message}"


def checkpoint_arrays(folder: Path) -> dict[str, np.ndarray]:
    """Every array of a checkpoint: its weights file's (the weights, and the optimizer's variables) and the random
    state; and the weights file loads into a plain BertPretrainer."""
    import h5py

    meta = json.loads((folder / "checkpoint.json").read_text())
    model = BertPretrainer(BertConfig(**meta["model"]))
    model(dummy_batch(1, L, P))
    model.load_weights(folder / "model.weights.h5")
    arrays: dict[str, np.ndarray] = {}
    with h5py.File(folder / "model.weights.h5") as f:
        f.visititems(lambda name, item: arrays.update({name: item[()]}) if isinstance(item, h5py.Dataset) else None)
    with np.load(folder / "random_state.npz") as state:
        arrays.update({f"random/{name}": state[name] for name in state.files})
    weights = [k for k in arrays if not k.startswith(("optimizer/", "random/"))]
    assert len(weights) == len(model.weights)
    assert sum(k.startswith("optimizer/") for k in arrays) == 2 * len(model.weights) + 1  # two moments each, iterations
    return arrays


def test_resume_is_exact(records_dir, tmp_path):
    """A run stopped at a checkpoint and run again ends with the same weights, optimizer state, random state and
    place in the data as the run that went through, and logs each step once."""
    through = tmp_path / "through"
    config = small_run(records_dir, through, steps=6, checkpoint_every=3, keep_checkpoints=2)
    result = train(config)
    assert (result.step, result.optimizer_iterations) == (6, 6)
    assert sorted(p.name for p in (through / "checkpoints").iterdir()) == ["ckpt-3", "ckpt-6"]

    stopped = tmp_path / "stopped"
    (stopped / "checkpoints").mkdir(parents=True)
    shutil.copytree(through / "checkpoints" / "ckpt-3", stopped / "checkpoints" / "ckpt-3")
    # The stopped run had logged step 4 but died before its next checkpoint: step 4 is trained again, logged once.
    log = read_log(through)
    (stopped / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log[:4]))
    resumed = train(dataclasses.replace(config, output=str(stopped)))
    assert (resumed.step, resumed.optimizer_iterations) == (6, 6)
    assert [r["step"] for r in read_log(stopped)] == [1, 2, 3, 4, 5, 6]
    assert [r["loss"] for r in read_log(stopped)] == [r["loss"] for r in log]

    expected, got = (checkpoint_arrays(run / "checkpoints" / "ckpt-6") for run in (through, stopped))
    assert expected.keys() == got.keys() and any(k.startswith("optimizer/") for k in got)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    data_state = [
        json.loads((run / "checkpoints" / "ckpt-6" / "checkpoint.json").read_text())["data"]
        for run in (through, stopped)
    ]
    assert data_state[0] == data_state[1] and data_state[0]["batch"] == 6

    again = train(dataclasses.replace(config, output=str(stopped)))  # already done: nothing to train
    assert (again.step, again.optimizer_iterations) == (6, 6)
    assert len(read_log(stopped)) == 6


def test_log_and_checkpoint_steps_with_several_steps_per_execution(records_dir, tmp_path):
    output = tmp_path / "run"
    train(
        small_run(
            records_dir, output, steps=8, log_every=4, checkpoint_every=2, steps_per_execution=2, keep_checkpoints=3
        )
    )
    assert [r["step"] for r in read_log(output)] == [4, 8]
    assert sorted(p.name for p in (output / "checkpoints").iterdir()) == ["ckpt-4", "ckpt-6", "ckpt-8"]
    with pytest.raises(
        TrainerError, match="--steps-per-execution 3 must divide --log-every, --checkpoint-every and --steps"
    ):
        train(small_run(records_dir, tmp_path / "other", steps=8, log_every=4, steps_per_execution=3))


def test_a_progress_line_shows_a_slow_run_moving_between_log_lines(records_dir, tmp_path, capsys, monkeypatch):
    """Between two --log-every lines, a line comes as soon as BERTCORPUS_PROGRESS_INTERVAL seconds (30 unless set)
    have passed; set as low as it goes, after a step or more."""
    monkeypatch.setenv("BERTCORPUS_PROGRESS_INTERVAL", "1e-9")
    train(small_run(records_dir, tmp_path / "run", steps=4, log_every=4))
    lines = capsys.readouterr().out.splitlines()
    progress = [line.split() for line in lines if "(mean since step 0)" in line]
    assert progress, lines
    steps = [int(words[1].split("/")[0]) for words in progress]
    assert steps == sorted(set(steps)) and set(steps) <= {1, 2, 3, 4}
    assert all(words[0] == "step" and words[2] == "loss" and words[-1] == "seq/s" for words in progress)
    assert [r["step"] for r in read_log(tmp_path / "run")] == [4]  # the log file keeps its windows only


def test_fit_segments_end_at_every_log_and_checkpoint_step():
    assert fit_segments(0, 300, 100) == [(3, 100)]
    assert fit_segments(0, 250, 100) == [(2, 100), (1, 50)]
    assert fit_segments(250, 500, 100) == [(1, 50), (2, 100)]
    assert fit_segments(30, 50, 100) == [(1, 20)]


def test_the_seq_config_of_an_output_with_several(records_dir):
    output = CreateOutput.read(str(records_dir))
    assert (output.seq_length(None), output.seq_configs, output.pair_objective) == (L, {L: P}, "nsp")
    several = dataclasses.replace(output, seq_configs={128: 20, 512: 80})
    with pytest.raises(TrainerError, match="holds the seq lengths 128, 512: choose one with --seq-length"):
        several.seq_length(None)
    with pytest.raises(TrainerError, match="has no seq length 256 \\(it has 128, 512\\)"):
        several.seq_length(256)


def test_masking_flags_reach_the_loader_and_scale_the_cap(sample_dynamic_copy, records_dir):
    from bertcorpus.trainer.devices import Devices
    from bertcorpus.trainer.training_input import loader_args, resolve_input

    config = TrainConfig(
        data=str(sample_dynamic_copy),
        output="",
        masked_lm_prob="0:0.3,1:0.15",
        mask_replace_prob=1.0,
        random_replace_prob=0.0,
    )
    source = resolve_input(config)
    assert source.predictions == 40  # the manifest's 20 at 15%, at the schedule's highest rate of 30%
    devices = Devices(strategy="one_device", precision="fp32", replicas=1, scope=None)
    args = loader_args(source, source.output, config, devices, "train", 8)
    assert (args["masked_lm_prob"], args["mask_replace_prob"], args["random_replace_prob"]) == ("0:0.3,1:0.15", 1, 0)
    with pytest.raises(TrainerError, match=r"--masked-lm-prob must be in \(0, 1\), not 1\.5"):
        resolve_input(dataclasses.replace(config, masked_lm_prob="1.5"))
    glob = str(records_dir / "seq128" / "train-*")
    with pytest.raises(TrainerError, match="--masked-lm-prob set how masks are drawn at load time"):
        resolve_input(TrainConfig(data=glob, output="", masked_lm_prob="0.3"))


def test_init_checkpoint_loads_weights_and_starts_a_fresh_optimizer(records_dir, tmp_path):
    phase1 = tmp_path / "phase1"
    train(small_run(records_dir, phase1, steps=2))
    phase2 = tmp_path / "phase2"
    # A zero learning rate leaves the weights as loaded, so phase 2's checkpoint must equal phase 1's.
    result = train(small_run(records_dir, phase2, steps=1, init_checkpoint=str(phase1), learning_rate=0.0))
    assert (result.step, result.optimizer_iterations) == (1, 1)
    before, after = (
        checkpoint_arrays(phase / "checkpoints" / f"ckpt-{step}") for phase, step in ((phase1, 2), (phase2, 1))
    )
    for name in (k for k in before if not k.startswith(("optimizer/", "random/"))):
        np.testing.assert_array_equal(before[name], after[name], err_msg=name)
    assert after["optimizer/vars/0"] == 1 and before["optimizer/vars/0"] == 2  # the iterations: phase 2's own

    with pytest.raises(TrainerError, match="no checkpoint found"):
        train(small_run(records_dir, tmp_path / "phase2b", init_checkpoint=str(tmp_path / "missing")))


TWO_REPLICAS = """
import dataclasses, json, sys
import tensorflow as tf
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
import bertcorpus.trainer.devices
import bertcorpus.trainer.train as tt
bertcorpus.trainer.devices.make_strategy = lambda name, tpu: tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
config = tt.TrainConfig(data=sys.argv[1], output=sys.argv[2], model="tiny", batch_size=8,
                        steps=2, warmup_steps=2, log_every=2, eval_steps=2, strategy="mirrored")
print(json.dumps(dataclasses.asdict(tt.train(config))))
"""


def test_two_replicas_train_and_evaluate(records_dir, tmp_path):
    """The distributed path (each replica's loss on its half of the batch, gradients summed) on two logical CPU
    devices."""
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, "-c", TWO_REPLICAS, str(records_dir), str(tmp_path / "run")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert (result["step"], result["optimizer_iterations"]) == (2, 2)
    assert result["eval_results"]["eval_sequences"] == 16
    assert [r["step"] for r in read_log(tmp_path / "run")] == [2]


_JAX_LOSS = """
import json, sys
import numpy as np
from bertcorpus.trainer.model import BertConfig, BertPretrainer, dummy_batch, pretraining_loss
config = BertConfig.preset("tiny")
model = BertPretrainer(config)
model(dummy_batch(2, 128, 20))
model.load_weights(sys.argv[1])
batch = dict(np.load(sys.argv[2]))
outputs = model(batch, training=False)
print(json.dumps({"losses": [float(x) for x in pretraining_loss(outputs, batch)],
                  "nsp_logits": np.asarray(outputs["nsp_logits"]).tolist()}))
"""


def test_the_model_gives_the_same_numbers_on_jax(records_dir, tmp_path):
    # The same weights and a batch of real records, through the TensorFlow and the JAX backends of Keras.
    pytest.importorskip("jax")
    from bertcorpus.trainer.model import pretraining_loss

    train_glob, _ = globs(records_dir)
    batch = {k: v.numpy() for k, v in next(iter(eval_dataset(list_files(train_glob), 8, L, P))).items()}
    np.savez(tmp_path / "batch.npz", **batch)
    model = BertPretrainer(BertConfig.preset("tiny"))
    model(dummy_batch(2, L, P))
    model.save_weights(tmp_path / "tiny.weights.h5")
    outputs = model(batch, training=False)
    expected = [float(x) for x in pretraining_loss(outputs, batch)]
    done = subprocess.run(
        [sys.executable, "-c", _JAX_LOSS, str(tmp_path / "tiny.weights.h5"), str(tmp_path / "batch.npz")],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "KERAS_BACKEND": "jax"},
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert np.allclose(got["losses"], expected, rtol=1e-4)
    assert np.allclose(got["nsp_logits"], outputs["nsp_logits"].numpy(), atol=1e-4)
    assert expected[1] > 5  # a real masked-LM loss on an untrained model, not an empty batch
