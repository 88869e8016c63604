"""Commands start light: local ones without the Google Cloud and MongoDB clients and Beam's BigQuery connector
(pipeline/cloud_imports.py), and a command process without collecting garbage while its modules load
(pipeline/cli.py)."""
from __future__ import annotations

import gc
import json
import subprocess
import sys

import pytest
from conftest import TESTS, VOCAB

from pipeline.cloud_imports import runs_locally

CREATE = ["create", "--input", "docs/*.parquet", "--vocab", "vocab.txt", "--output", "out"]


@pytest.mark.parametrize("words, local", [
    (CREATE, True),
    (CREATE + ["--direct_running_mode=multi_processing", "--direct_num_workers=2"], True),
    (CREATE + ["--runner", "DirectRunner"], True),
    (CREATE + ["--runner=FnApiRunner"], True),
    (["-v", "extract-wiki", "--input", "dump.xml.bz2", "--output", "docs"], True),
    (["demo"], True),
    (CREATE + ["--runner", "DataflowRunner", "--project", "p", "--region", "r"], False),
    (CREATE + ["--runner=apache_beam.runners.render.RenderRunner"], False),
    (CREATE + ["--runner"], False),
    (CREATE[:3] + ["gs://bucket/docs/*.parquet"] + CREATE[4:], False),
    (CREATE + ["--temp_location=gs://bucket/tmp"], False),
    (["run", "pretraining-128", "--profile", "local"], False),  # decided again once the job is expanded
    (["train", "--input", "out"], False),
    ([], False),
])
def test_a_command_runs_locally_only_with_a_local_runner_and_no_remote_path(words, local):
    command = next((w for w in words if not w.startswith("-")), None)
    assert runs_locally(command, words) is local


_LOADED = """
import json, sys
sys.path.insert(0, {root!r})
from pipeline import cloud_imports
hidden = sys.argv[1] == "hide" and cloud_imports.hide_client_modules()
import apache_beam
from apache_beam.io.filesystems import FileSystems
import pipeline.create
print(json.dumps({{"hidden": hidden, "local_files": FileSystems.exists({root!r}),
                   "clients": sorted(filter(cloud_imports.is_client_module, sys.modules))[:5],
                   "connectors": sorted(set(cloud_imports.BEAM_CONNECTORS) & set(sys.modules))}}))
"""


def loaded(mode: str) -> tuple[dict, str]:
    """What a fresh process importing Beam loaded, and what it logged (Beam's warnings reach stderr)."""
    code = _LOADED.format(root=str(TESTS.parent))
    done = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, check=True)
    return json.loads(done.stdout), done.stderr


def test_hidden_client_modules_stay_unloaded_and_local_files_still_work():
    shown, _ = loaded("show")
    if not shown["clients"]:
        pytest.skip("neither Beam's GCP extra nor pymongo is installed here")
    assert shown["connectors"] == ["apache_beam.io.gcp.bigquery"]
    hidden, logged = loaded("hide")
    assert hidden == {"hidden": True, "local_files": True, "clients": [], "connectors": []}
    assert "bson" not in logged  # Beam's MongoDB connector notices, and says nothing


def test_a_command_process_collects_garbage_again_once_its_module_is_loaded(monkeypatch, tmp_path):
    from pipeline import cli

    monkeypatch.setattr(cli, "_fresh_process", True)
    gc.disable()  # as entry_point leaves it
    try:
        code = cli.main(["create", "--input", str(tmp_path / "missing.txt"), "--vocab", str(VOCAB),
                         "--output", str(tmp_path / "out")])
        assert code == 2 and gc.isenabled()
        assert gc.get_freeze_count() > 10_000  # what loading made is out of later collections' way
    finally:
        gc.unfreeze()
        gc.enable()
