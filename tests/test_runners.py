"""The choice of runner (pipeline/engines/runners.py): local jobs run on Beam's FnApiRunner through Beam's public API,
and leave every function and class of Beam as Beam defined it."""

from __future__ import annotations

import json
import subprocess
import sys

from bertcorpus.pipeline.engines import runners

from conftest import SAMPLE_TEXT, TESTS, VOCAB

# In a fresh process: note every function and class of the loaded Beam modules (and the functions and defaults
# inside those classes), run a job in each local mode, then list whatever was replaced or given other defaults.
_RUN_AND_COMPARE = """
import json, sys, types
sys.path[:0] = [{tests!r}]
import apache_beam
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.runners.worker import sdk_worker, statesampler
from bertcorpus.pipeline.cli import commands

def callables():
    seen = {{}}
    for name, module in list(sys.modules.items()):
        if not name.startswith("apache_beam") or not isinstance(module, types.ModuleType):
            continue
        for attr, value in list(vars(module).items()):
            if callable(value):
                seen[f"{{name}}.{{attr}}"] = (value, getattr(value, "__defaults__", None))
            if isinstance(value, type) and value.__module__ == name:
                for inner, member in list(vars(value).items()):
                    if callable(member):
                        seen[f"{{name}}.{{attr}}.{{inner}}"] = (member, getattr(member, "__defaults__", None))
    return seen

before, finders = callables(), list(sys.meta_path)
for mode in ("in_memory", "multi_threading", "multi_processing"):
    code = commands.main(["create", "--input", {sample!r}, "--vocab", {vocab!r}, "--output", {out!r} + "/" + mode,
                     "--dupe-factor", "1", "--runner=DirectRunner", "--direct_running_mode=" + mode,
                     "--direct_num_workers=2"])
    assert code == 0, mode
after = callables()
changed = sorted(k for k, (value, defaults) in before.items()
                 if k not in after or after[k][0] is not value or after[k][1] != defaults)
print(json.dumps({{"compared": len(before), "changed": changed, "finders_added": len(sys.meta_path) - len(finders)}}))
"""


def test_local_runs_leave_beam_as_beam_defined_it(tmp_path):
    script = _RUN_AND_COMPARE.format(
        root=str(TESTS.parent), tests=str(TESTS), sample=str(SAMPLE_TEXT), vocab=str(VOCAB), out=str(tmp_path)
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["compared"] > 5_000  # Beam's runner, worker and transform modules were loaded and compared
    assert found["changed"] == [] and found["finders_added"] == 0


def test_every_local_mode_makes_the_same_records(tmp_path):
    outputs = {}
    for mode in ("in_memory", "multi_threading", "multi_processing"):
        out = tmp_path / mode
        from conftest import file_digests, run_cli

        assert (
            run_cli(
                "create",
                "--input",
                SAMPLE_TEXT,
                "--vocab",
                VOCAB,
                "--output",
                out,
                "--dupe-factor",
                "2",
                "--runner=DirectRunner",
                f"--direct_running_mode={mode}",
                "--direct_num_workers=2",
            )
            == 0
        )
        outputs[mode] = file_digests(out, "seq128/*.tfrecord")
    assert len(outputs["in_memory"]) == 4  # train shards: the sample is too small for an eval split
    assert outputs["in_memory"] == outputs["multi_threading"] == outputs["multi_processing"]


def test_only_local_runner_names_run_on_this_machine():
    def local(*args: str) -> bool:
        return runners.is_local(runners.pipeline_options(list(args)))

    assert local() and local("--runner=DirectRunner") and local("--runner", "FnApiRunner")
    assert not local("--runner=PortableRunner") and not local("--runner=DataflowRunner")
    assert not local("--runner=FlinkRunner")
