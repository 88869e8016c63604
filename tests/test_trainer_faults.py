"""`bertcorpus train` where its input or its disk lets it down: a binned output on every backend installed here,
a checkpoint that cannot be written (a file size limit, a full filesystem), an eval split too small for one batch
and length bins smaller than one batch, each named in one line before the first step or where it happens.

The data are conftest.py's real `create` output (`records_dir`), in the dynamic form with length bins of 32
(tests/loader_data.py). TensorFlow runs in this process; JAX and the file size limit need processes of their own.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")

from bertcorpus.trainer.config import TrainerError
from bertcorpus.trainer.loader import PretrainingLoader
from bertcorpus.trainer.train import TrainConfig, train

from conftest import mounted_tmpfs
from loader_data import dynamic_copy

ROOT = Path(__file__).resolve().parents[1]
BATCH, STEPS = 8, 6
_CLI = "import sys; from bertcorpus.pipeline.cli.commands import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture(scope="module")
def binned(records_dir, tmp_path_factory) -> Path:
    return dynamic_copy(Path(records_dir), tmp_path_factory.mktemp("binned") / "out", bin_size=32)


def short_run(data: Path, output: Path, *more: str) -> list[str]:
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
        "3",
        "--checkpoint-every",
        "3",
        "--eval-steps",
        "4",
        *more,
    ]


def cli(argv: list[str], backend: str, preexec_fn=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", _CLI, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        preexec_fn=preexec_fn,
        env={**os.environ, "KERAS_BACKEND": backend},
    )


def error_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert "Traceback" not in stderr and len(lines) >= 1, stderr[-3000:]
    return lines[-1]


def steps_to_another_width(data: Path) -> int:
    """Steps after which the run has trained on batches of two widths (the loader's batches, as train draws them):
    most instances of these books fill all 128 tokens, so the first batch of another bin comes a few steps in."""
    loader = PretrainingLoader(data, seq_length=128, batch_size=BATCH, seed=TrainConfig.seed)
    first = loader[0]["input_ids"].shape[1]
    return next(i + 1 for i in range(40) if loader[i]["input_ids"].shape[1] != first)


def test_a_binned_output_trains_and_evaluates_on_tensorflow(binned, tmp_path):
    steps = steps_to_another_width(binned)
    output = tmp_path / "run"
    result = train(
        TrainConfig(
            data=str(binned),
            output=str(output),
            model="tiny",
            batch_size=BATCH,
            steps=steps,
            log_every=steps,
            eval_steps=4,
        )
    )
    assert result.step == steps and result.eval_results["eval_sequences"] == 4 * BATCH
    assert [json.loads(line)["step"] for line in (output / "train_log.jsonl").read_text().splitlines()] == [steps]


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_binned_output_trains_and_evaluates_on_other_backends(binned, tmp_path, backend):
    pytest.importorskip(backend)
    steps = steps_to_another_width(binned)
    output = tmp_path / "run"
    argv = [*short_run(binned, output), "--steps", str(steps), "--log-every", str(steps), "--backend", backend]
    done = cli(argv, backend)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((output / "eval_results.json").read_text())
    assert results["global_step"] == steps and results["eval_sequences"] == 4 * BATCH


def _no_larger_files_than(size: int):
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def test_a_checkpoint_that_cannot_be_written_leaves_nothing_and_the_run_resumes(binned, tmp_path):
    output = tmp_path / "run"
    first = TrainConfig(
        data=str(binned), output=str(output), model="tiny", batch_size=BATCH, steps=3, log_every=3, eval_data="none"
    )
    train(first)
    weights = output / "checkpoints" / "ckpt-3" / "model.weights.h5"
    # Going on to step 6 where no file may grow past half a weights file: the checkpoint at step 6 fails.
    argv = [*short_run(binned, output), "--eval-data", "none"]
    done = cli(argv, "tensorflow", preexec_fn=_no_larger_files_than(weights.stat().st_size // 2))
    assert done.returncode == 2 and error_line(done.stderr) == (
        f"bertcorpus train: error: cannot write the checkpoint {output}/checkpoints/ckpt-6: File too large; nothing "
        "of it is left: make room and run the same command again (it resumes from step 3)"
    )
    assert sorted(p.name for p in (output / "checkpoints").iterdir()) == ["ckpt-3"]
    # Run again with room: it resumes from step 3 and ends where an unbroken run ends.
    import dataclasses

    assert train(dataclasses.replace(first, steps=STEPS)).step == STEPS
    assert sorted(p.name for p in (output / "checkpoints").iterdir()) == ["ckpt-3", "ckpt-6"]


def test_a_full_disk_at_a_checkpoint_is_one_line_and_no_crash(binned, tmp_path):
    with mounted_tmpfs(tmp_path / "disk", "size=2m") as disk:
        output = disk / "run"
        done = cli([*short_run(binned, output), "--eval-data", "none"], "tensorflow")
        assert done.returncode == 2, (done.returncode, done.stderr[-3000:])  # not 139: HDF5 let go of its file
        assert error_line(done.stderr) == (
            f"bertcorpus train: error: cannot write the checkpoint {output}/checkpoints/ckpt-3: No space left on "
            "device; nothing of it is left: make room and run the same command again (it starts again from step 0)"
        )
        assert list((output / "checkpoints").iterdir()) == []


def test_an_eval_split_smaller_than_a_batch_is_named_before_training(binned, tmp_path):
    eval_instances = json.loads((binned / "manifest.json").read_text())["outputs"]["seq128"]["eval"]["instances"]
    output = tmp_path / "run"
    with pytest.raises(TrainerError) as e:
        train(
            TrainConfig(
                data=str(binned),
                output=str(output),
                model="tiny",
                batch_size=BATCH,
                eval_batch_size=eval_instances + 1,
                steps=STEPS,
            )
        )
    assert str(e.value).startswith(f"cannot evaluate: a global batch of {eval_instances + 1}")
    assert "(--eval-data none trains without evaluation)" in str(e.value)
    assert not output.exists()  # before the first step: no config, log or checkpoint


def test_an_empty_eval_split_is_named_before_training(binned, tmp_path):
    empty = tmp_path / "empty-eval"
    import shutil

    shutil.copytree(binned, empty)
    manifest = json.loads((empty / "manifest.json").read_text())
    for shard in manifest["outputs"]["seq128"]["eval"]["shards"]:
        (empty / shard["path"]).unlink()
    manifest["outputs"]["seq128"]["eval"].update(instances=0, shards=[], bins=[])
    (empty / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(TrainerError, match=r"^cannot evaluate: .* holds 0 instances"):
        train(TrainConfig(data=str(empty), output=str(tmp_path / "run"), model="tiny", batch_size=BATCH, steps=STEPS))
    assert not (tmp_path / "run").exists()


def test_bins_smaller_than_a_batch_are_named_before_training(binned, tmp_path):
    bins = [
        b["instances"] for b in json.loads((binned / "manifest.json").read_text())["outputs"]["seq128"]["train"]["bins"]
    ]
    largest = max(bins)
    with pytest.raises(TrainerError, match=r"^every length bin of the train split of seq128 holds fewer instances"):
        train(
            TrainConfig(
                data=str(binned), output=str(tmp_path / "run"), model="tiny", batch_size=largest + 1, eval_data="none"
            )
        )
    assert not (tmp_path / "run").exists()
    assert sum(bins) > largest + 1  # the split holds a global batch: only its bins do not


def test_an_output_that_is_a_file_is_named_before_training(binned, tmp_path):
    taken = tmp_path / "notes.txt"
    taken.write_text("mine")
    with pytest.raises(TrainerError, match=rf"^--output {taken} is a file, not a folder"):
        train(TrainConfig(data=str(binned), output=str(taken), model="tiny", batch_size=BATCH, steps=STEPS))
    assert taken.read_text() == "mine"


def test_a_warning_is_one_line_without_python_source(binned, tmp_path):
    """Bins smaller than a global batch are left out of every epoch: train says so in one line, as errors are said,
    without the line of Python that warned."""
    entry = json.loads((binned / "manifest.json").read_text())["outputs"]["seq128"]["train"]
    sizes = sorted(b["instances"] for b in entry["bins"])
    batch = sizes[0] + 1  # the smallest bin is left out, the largest still gives batches
    assert batch <= sizes[-1]
    argv = [*short_run(binned, tmp_path / "run"), "--steps", "1", "--eval-data", "none", "--batch-size", str(batch)]
    done = cli(argv, "tensorflow")
    assert done.returncode == 0, done.stderr[-3000:]
    warned = [line for line in done.stderr.splitlines() if "warning" in line.lower()]
    assert len(warned) == 1 and warned[0].startswith("bertcorpus train: warning: "), done.stderr[-3000:]
    assert "are in length bins smaller than a global batch" in warned[0]
    assert "warnings.warn(" not in done.stderr and "UserWarning" not in done.stderr
