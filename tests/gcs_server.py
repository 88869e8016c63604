"""A real Cloud Storage JSON API server on the loopback, driven through Beam's own GcsFileSystem.

The server is gcp-storage-emulator, run as a subprocess on 127.0.0.1 with its objects in memory. Beam's
GcsFileSystem (google-cloud-storage underneath) reaches it through STORAGE_EMULATOR_HOST. Beam looks for Google
credentials before its first request, and without any it retries that search for about 25 s and probes the GCE
metadata server; an authorized-user credentials file holding a token that never expires ends the search at once,
and no request ever leaves the loopback (the token is only sent to the emulator, which ignores it).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BUCKET = "bertcorpus-test"
START_TIMEOUT_S = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, what: str) -> None:
    deadline = time.time() + START_TIMEOUT_S
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode} before it listened")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {START_TIMEOUT_S} s")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def write_credentials(path: Path) -> Path:
    """Credentials that Google's auth library loads without any request: a token with no refresh due before
    the year 2999."""
    path.write_text(
        json.dumps(
            {
                "type": "authorized_user",
                "token": "loopback-only",
                "expiry": "2999-01-01T00:00:00Z",
                "client_id": "bertcorpus-tests",
                "client_secret": "unused",
                "refresh_token": "unused",
            }
        )
    )
    return path


def client_environment(port: int, credentials: Path) -> dict[str, str]:
    """What a process needs to use the emulator as gs:// with nothing leaving the loopback."""
    return {
        "STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}",
        "GOOGLE_APPLICATION_CREDENTIALS": str(credentials),
        "GOOGLE_CLOUD_PROJECT": "bertcorpus-tests",
        # Should anything still look for a metadata server, it neither waits nor leaves the machine.
        "NO_GCE_CHECK": "true",
        "GCE_METADATA_HOST": "127.0.0.1:9",
        "GCE_METADATA_IP": "127.0.0.1:9",
    }


class GcsEmulator:
    """The running server: gs:// URLs in its one bucket, and what is stored under a prefix."""

    def __init__(self, port: int, environment: dict[str, str]):
        self.port, self.environment = port, environment

    def url(self, *parts: str) -> str:
        return "/".join([f"gs://{BUCKET}", *parts])

    def objects(self, prefix: str) -> dict[str, str]:
        """Every object whose URL starts with prefix + '/' → the sha256 of its bytes, by name under prefix."""
        from apache_beam.io.filesystems import FileSystems

        found = {}
        for m in FileSystems.match([prefix.rstrip("/") + "/**"])[0].metadata_list:
            with FileSystems.open(m.path, compression_type="uncompressed") as f:
                found[m.path[len(prefix.rstrip("/")) + 1 :]] = hashlib.sha256(f.read()).hexdigest()
        return found

    def upload(self, local: Path, url: str) -> str:
        from apache_beam.io.filesystems import FileSystems

        with FileSystems.create(url, compression_type="uncompressed") as f:  # the bytes as they are, .bz2 too
            f.write(local.read_bytes())
        return url

    def download(self, url: str, local: Path) -> Path:
        from apache_beam.io.filesystems import FileSystems

        local.parent.mkdir(parents=True, exist_ok=True)
        with FileSystems.open(url, compression_type="uncompressed") as f:
            local.write_bytes(f.read())
        return local


def local_files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def comparable(manifest: dict, *locations) -> str:
    """The manifest with every input and output location replaced by one word."""
    text = json.dumps(manifest, sort_keys=True)
    for location in locations:
        text = text.replace(str(location), "LOCATION")
    return text


def assert_same_output(gcs: GcsEmulator, url: str, local: Path, *locations) -> None:
    """The objects under url are the files under local, byte for byte, and so are the manifests but for the
    input and output locations they name."""
    remote = gcs.objects(url)
    files = local_files(local)
    assert remote.keys() == files.keys()
    assert {k: v for k, v in remote.items() if k != "manifest.json"} == {
        k: v for k, v in files.items() if k != "manifest.json"
    }
    manifest = json.loads(gcs.download(f"{url}/manifest.json", local.parent / "remote-manifest.json").read_text())
    assert comparable(manifest, url, *locations) == comparable(
        json.loads((local / "manifest.json").read_text()), local, *locations
    )


@contextmanager
def running_emulator(workdir: Path) -> Iterator[GcsEmulator]:
    """Start the emulator with one bucket, point this process at it, and stop it afterwards."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gcp_storage_emulator",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--in-memory",
            "--default-bucket",
            BUCKET,
            "--quiet",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, "the GCS emulator")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5):  # its health check
            pass
        environment = client_environment(port, write_credentials(workdir / "credentials.json"))
        saved = {name: os.environ.get(name) for name in environment}
        os.environ.update(environment)
        try:
            yield GcsEmulator(port, environment)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    finally:
        stop(process)
