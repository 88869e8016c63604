"""The trainer on the JAX backend beside TensorFlow's, on both forms of `create` output, and its one-line errors.

The data are real: `records_dir` (conftest.py) is a static `create` output of real books with the BERT uncased vocab
(128/20); tests/loader_data.py writes its instances in the dynamic form (Parquet, masks drawn at load time), once with
the pair objective and once without. JAX runs in a subprocess: Keras takes one backend per process, and this one's
is TensorFlow. PyTorch is too heavy for the test extra; benchmarks/bench_trainer.py runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("jax")

from bertcorpus.trainer.loader import PretrainingLoader
from bertcorpus.trainer.train import TrainConfig, train

from conftest import run_cli
from loader_data import dynamic_copy

ROOT = Path(__file__).resolve().parents[1]
VOCAB_SIZE = 30522
STEPS, BATCH, LOG_EVERY = 300, 8, 20
# The tests that need the 300-step runs (minutes of training on each backend): `make test-slow`, which CI runs.
LEARNING = pytest.mark.slow


@pytest.fixture(scope="module")
def dynamic_outputs(records_dir, tmp_path_factory) -> dict[str, Path]:
    """The static output's instances in the dynamic form, with the pair objective (nsp) and without (none)."""
    root = tmp_path_factory.mktemp("dynamic")
    return {
        objective: dynamic_copy(Path(records_dir), root / objective, pair_objective=objective)
        for objective in ("nsp", "none")
    }


def learning_run(data: Path, output: Path) -> list[str]:
    """The flags of a tiny 300-step run with the defaults' schedule, evaluated on the output's eval split."""
    return [
        "train",
        "--data",
        str(data),
        "--output",
        str(output),
        "--config",
        "tiny",
        "--batch-size",
        str(BATCH),
        "--steps",
        str(STEPS),
        "--log-every",
        str(LOG_EVERY),
        "--checkpoint-every",
        "1000",
    ]


_CLI_RUNS = """
import json, shutil, sys
from bertcorpus.pipeline.cli.commands import main
argvs = json.loads(sys.argv[1])
print(json.dumps([shutil.copytree(*argv[1:]) and 0 if argv[0] == "copy" else main(argv) for argv in argvs]))
"""


def run_on_jax(*argvs: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    """`bertcorpus ARGV` for each argv (or, for ["copy", FROM, TO], a copy of a folder), one after the other in one
    process on the JAX backend."""
    return subprocess.run(
        [sys.executable, "-c", _CLI_RUNS, json.dumps(argvs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "KERAS_BACKEND": "jax", **(env or {})},
    )


@pytest.fixture(scope="module")
def tensorflow_run(dynamic_outputs, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("tensorflow") / "run"
    assert run_cli(*learning_run(dynamic_outputs["nsp"], output)) == 0
    return output


@pytest.fixture(scope="module")
def jax_runs(dynamic_outputs, tmp_path_factory) -> dict[str, Path]:
    """On JAX: the same run as tensorflow_run's, the same without a pair objective, and a short run stopped after
    its first checkpoint and resumed (beside one that went through)."""
    root = tmp_path_factory.mktemp("jax")
    short = [
        "--config",
        "tiny",
        "--batch-size",
        str(BATCH),
        "--eval-data",
        "none",
        "--log-every",
        "1",
        "--checkpoint-every",
        "2",
        "--data",
        str(dynamic_outputs["nsp"]),
    ]
    checkpoint = Path("checkpoints") / "ckpt-2"
    done = run_on_jax(
        learning_run(dynamic_outputs["nsp"], root / "nsp"),
        learning_run(dynamic_outputs["none"], root / "none"),
        ["train", *short, "--steps", "4", "--output", str(root / "through")],
        # A run that stopped after its checkpoint at step 2, run again.
        ["copy", str(root / "through" / checkpoint), str(root / "stopped" / checkpoint)],
        ["train", *short, "--steps", "4", "--output", str(root / "stopped")],
    )
    assert done.returncode == 0 and json.loads(done.stdout.strip().splitlines()[-1]) == [0] * 5, done.stderr[-3000:]
    assert f"resuming from {root / 'stopped' / checkpoint} at step 2" in done.stdout
    return {name: root / name for name in ("nsp", "none", "through", "stopped")}


def read_log(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / "train_log.jsonl").read_text().splitlines()]


def eval_baseline(data: Path) -> float:
    """What always predicting the most frequent masked token scores on the eval batches, counted with numpy."""
    loader = PretrainingLoader(data, seq_length=128, split="eval", batch_size=BATCH, seed=TrainConfig.seed)
    targets = np.concatenate([batch["masked_lm_ids"][batch["masked_lm_weights"] > 0] for batch in loader])
    return np.bincount(targets).max() / targets.size


def assert_learned(output: Path, data: Path, chance: float) -> dict:
    log = read_log(output)
    assert [r["step"] for r in log] == list(range(LOG_EVERY, STEPS + 1, LOG_EVERY))
    assert log[-1]["loss"] <= chance * 2 / 3, [round(r["loss"], 3) for r in log]
    results = json.loads((output / "eval_results.json").read_text())
    assert results["masked_lm_baseline_accuracy"] == pytest.approx(eval_baseline(data), abs=1e-9)
    assert results["masked_lm_accuracy"] > results["masked_lm_baseline_accuracy"] + 0.01, results
    return results


@LEARNING
def test_tiny_model_learns_on_tensorflow(tensorflow_run, dynamic_outputs):
    results = assert_learned(tensorflow_run, dynamic_outputs["nsp"], np.log(VOCAB_SIZE) + np.log(2))
    assert results["pair_objective"] == "nsp" and 0.4 < results["next_sentence_baseline_accuracy"] <= 1


@LEARNING
def test_tiny_model_learns_on_jax(jax_runs, dynamic_outputs):
    assert_learned(jax_runs["nsp"], dynamic_outputs["nsp"], np.log(VOCAB_SIZE) + np.log(2))
    assert json.loads((jax_runs["nsp"] / "config.json").read_text())["backend"] == "jax"


@LEARNING
def test_backends_agree_after_20_steps(tensorflow_run, jax_runs):
    # The same seed, data and schedule: only the initial weights and dropout masks are drawn differently.
    tf_loss, jax_loss = (read_log(run)[0]["loss"] for run in (tensorflow_run, jax_runs["nsp"]))
    assert read_log(tensorflow_run)[0]["step"] == 20
    assert abs(tf_loss - jax_loss) <= 0.05 * tf_loss, (tf_loss, jax_loss)


@LEARNING
def test_records_without_a_pair_objective_train_without_the_head(jax_runs, dynamic_outputs):
    results = assert_learned(jax_runs["none"], dynamic_outputs["none"], np.log(VOCAB_SIZE))
    assert results["pair_objective"] == "none" and not any(k.startswith("next_sentence") for k in results)
    assert "nsp_loss" not in read_log(jax_runs["none"])[0]
    assert json.loads((jax_runs["none"] / "config.json").read_text())["model"]["pair_head"] is False


@LEARNING
def test_resume_is_exact_on_jax(jax_runs):
    import h5py

    def arrays(run: Path) -> dict[str, np.ndarray]:
        folder = run / "checkpoints" / "ckpt-4"
        found: dict[str, np.ndarray] = {}
        with h5py.File(folder / "model.weights.h5") as f:
            f.visititems(lambda name, item: found.update({name: item[()]}) if isinstance(item, h5py.Dataset) else None)
        with np.load(folder / "random_state.npz") as state:
            found.update({f"random/{name}": state[name] for name in state.files})
        return found

    through, stopped = arrays(jax_runs["through"]), arrays(jax_runs["stopped"])
    assert through.keys() == stopped.keys() and "optimizer/vars/0" in through
    for name in through:
        np.testing.assert_array_equal(stopped[name], through[name], err_msg=name)
    assert [r["loss"] for r in read_log(jax_runs["stopped"])] == [r["loss"] for r in read_log(jax_runs["through"])][2:]


@LEARNING
def test_a_run_on_gcs_resumes_exactly_and_keeps_its_last_checkpoint(gcs, jax_runs, dynamic_outputs, tmp_path):
    """--output gs://…: a run stopped after its checkpoint at step 2 (the local run's, uploaded) and run again ends
    with the local run's step-4 weights and losses; the store keeps only the last checkpoint (--keep-checkpoints 1),
    and phase 2 starts from the store."""
    url = gcs.url("trainer", "run")
    for f in sorted((jax_runs["through"] / "checkpoints" / "ckpt-2").iterdir()):
        gcs.upload(f, f"{url}/checkpoints/ckpt-2/{f.name}")
    short = [
        "--config",
        "tiny",
        "--batch-size",
        str(BATCH),
        "--eval-data",
        "none",
        "--log-every",
        "1",
        "--checkpoint-every",
        "2",
        "--keep-checkpoints",
        "1",
        "--data",
        str(dynamic_outputs["nsp"]),
    ]
    done = run_on_jax(
        ["train", *short, "--steps", "4", "--output", url],
        ["train", *short, "--steps", "2", "--output", url + "-phase2", "--init-checkpoint", url],
    )
    assert done.returncode == 0 and json.loads(done.stdout.strip().splitlines()[-1]) == [0] * 2, done.stderr[-3000:]
    assert f"resuming from {url}/checkpoints/ckpt-2 at step 2" in done.stdout
    assert f"initialised the model from {url}/checkpoints/ckpt-4" in done.stdout

    assert sorted(name for name in gcs.objects(url) if name.startswith("checkpoints/")) == [
        "checkpoints/ckpt-4/checkpoint.json",
        "checkpoints/ckpt-4/model.weights.h5",
        "checkpoints/ckpt-4/random_state.npz",
    ]
    local = tmp_path / "run"
    for name in ("train_log.jsonl", "checkpoints/ckpt-4/random_state.npz"):
        gcs.download(f"{url}/{name}", local / name)
    assert [r["loss"] for r in read_log(local)] == [r["loss"] for r in read_log(jax_runs["through"])][2:]
    through = jax_runs["through"] / "checkpoints" / "ckpt-4" / "random_state.npz"
    with np.load(local / "checkpoints/ckpt-4/random_state.npz") as remote, np.load(through) as here:
        assert remote.files == here.files and all(np.array_equal(remote[k], here[k]) for k in here.files)
    assert "checkpoints/ckpt-2/checkpoint.json" in gcs.objects(url + "-phase2")

    missing = gcs.url("trainer", "missing")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CLI,
            "train",
            "--backend",
            "jax",
            "--data",
            missing,
            "--output",
            str(tmp_path / "none"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2 and one_error_line(done.stderr) == (
        f"bertcorpus train: error: {missing} is neither a finished `bertcorpus create` output "
        f"(no {missing}/manifest.json) nor a file (TFRecords made elsewhere are given as globs, "
        f"e.g. '{missing}/*.tfrecord')"
    )


# ----------------------------------------------------------------------------- one-line errors


_CLI = "import sys; from bertcorpus.pipeline.cli.commands import main; sys.exit(main(sys.argv[1:]))"


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr[-3000:]
    return lines[-1]


def test_unknown_or_missing_backends_are_one_line(records_dir, tmp_path, capsys, monkeypatch):
    base = ["train", "--data", str(records_dir), "--output", str(tmp_path / "run"), "--config", "tiny"]
    assert run_cli(*base, "--backend", "mxnet") == 2
    assert (
        capsys.readouterr().err.strip()
        == "bertcorpus train: error: unknown --backend 'mxnet'; choose tensorflow, jax, torch"
    )
    if not __import__("importlib").util.find_spec("torch"):
        assert run_cli(*base, "--backend", "torch") == 2
        assert capsys.readouterr().err.strip() == (
            "bertcorpus train: error: the torch backend is not installed: pip install 'bertcorpus[torch]'"
        )
    monkeypatch.setenv("KERAS_BACKEND", "mxnet")
    assert run_cli(*base) == 2
    assert capsys.readouterr().err.strip() == (
        "bertcorpus train: error: unknown backend 'mxnet' (KERAS_BACKEND); choose tensorflow, jax, torch"
    )


def test_tpu_strategy_without_a_tpu_and_another_backends_checkpoint_are_one_line(records_dir, tmp_path):
    run = tmp_path / "run"
    assert (
        train(
            TrainConfig(
                data=str(records_dir),
                eval_data="none",
                output=str(run),
                model="tiny",
                batch_size=8,
                steps=1,
                log_every=1,
            )
        ).step
        == 1
    )
    base = [
        "train",
        "--backend",
        "jax",
        "--data",
        str(records_dir),
        "--config",
        "tiny",
        "--batch-size",
        "8",
        "--steps",
        "2",
        "--eval-data",
        "none",
    ]
    for argv, expected in [
        (
            [*base, "--output", str(tmp_path / "tpu"), "--strategy", "tpu"],
            "bertcorpus train: error: --strategy tpu but JAX finds no TPU (its devices: cpu)",
        ),
        (
            [*base, "--output", str(run)],
            f"bertcorpus train: error: {run}/checkpoints/ckpt-1 was written by the tensorflow backend; resume it with "
            f"--backend tensorflow (or start a new --output with --init-checkpoint {run}: its weights load on any "
            "backend)",
        ),
    ]:
        done = subprocess.run(
            [sys.executable, "-c", _CLI, *argv], cwd=ROOT, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 2, done.stderr[-3000:]
        assert one_error_line(done.stderr) == expected


# ----------------------------------------------------------------------------- the GPU benchmark, without TensorFlow


def test_gpu_benchmark_smoke_runs_with_jax_alone(tmp_path):
    """benchmarks/bench_trainer_gpu.py --smoke on CPU, where importing TensorFlow fails: it makes its records with
    `create`, trains through the loader and prints its table without TensorFlow."""
    blocked = tmp_path / "blocked" / "tensorflow"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('TensorFlow is blocked in this test')\n")
    done = subprocess.run(
        [sys.executable, "benchmarks/bench_trainer_gpu.py", "--smoke", "--work", str(tmp_path / "work")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": os.pathsep.join([str(blocked.parent), str(ROOT)])},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "records: made by `bertcorpus create`" in out
    rows = [line for line in out.splitlines() if line.startswith("| jax ")]
    assert len(rows) == 2 and all("| tiny |" in row for row in rows), out
    assert {row.split("|")[4].strip() for row in rows} == {"128", "512"}
    for row in rows:
        seq_per_s = float(row.split("|")[7])
        assert seq_per_s > 0
