"""Local commands start without Google Cloud's client libraries.

`import apache_beam` loads, through its Cloud Storage filesystem and its BigQuery, Pub/Sub and Datastore modules,
the Google Cloud client libraries that Beam's `gcp` extra installs, whether a job uses them or not: about 400
modules and 0.3–0.4 CPU-s at the start of every command, more with worker processes, which then copy the pages
those modules' objects live on. Beam's own modules import these libraries inside `try: ... except ImportError` and
carry on without them, as on an installation without the extra (which Beam supports). So a fresh command process
whose arguments name no remote runner and no remote path (nothing with '://') hides those libraries, and only
those, from the import system before Beam loads.
"""
from __future__ import annotations

import importlib.abc
import sys


# The client libraries of Beam's gcp extra, under the google.cloud namespace (the namespace package itself is
# loaded at start-up by the clients' .pth files), and the Google API core and auth libraries they stand on. Its
# older apitools clients stay importable: without them Beam logs a warning on every start.
CLOUD_NAMESPACE = "google.cloud."
CLOUD_PACKAGES = ("google.api_core", "google.auth", "google_auth_httplib2")


def is_cloud_module(name: str) -> bool:
    return name.startswith(CLOUD_NAMESPACE) or any(name == p or name.startswith(p + ".") for p in CLOUD_PACKAGES)


# Commands that run Beam jobs whose arguments say everything about where they run and what they touch.
LOCAL_CAPABLE_COMMANDS = {"create", "extract-wiki", "extract-books", "vocab", "demo"}
# The runners bertcorpus runs on Beam's FnApiRunner on this machine (pipeline/runners.py).
LOCAL_RUNNERS = {"DirectRunner", "FnApiRunner", "SwitchingDirectRunner"}


class _HiddenCloudModules(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if is_cloud_module(name):
            raise ModuleNotFoundError(f"{name} is not loaded by a local bertcorpus command", name=name)
        return None


def runs_locally(command: str | None, words: list[str]) -> bool:
    """Whether the command's arguments keep it on this machine: a local runner and no remote path."""
    if command not in LOCAL_CAPABLE_COMMANDS or any("://" in w for w in words):
        return False
    for i, word in enumerate(words):
        if word == "--runner":
            runner = words[i + 1] if i + 1 < len(words) else ""
        elif word.startswith("--runner="):
            runner = word.split("=", 1)[1]
        else:
            continue
        if runner not in LOCAL_RUNNERS:
            return False
    return True


def hide_cloud_modules() -> bool:
    """Hide the cloud modules from later imports; False (and nothing done) where Beam is loaded already."""
    if any(isinstance(finder, _HiddenCloudModules) for finder in sys.meta_path):
        return True
    if "apache_beam" in sys.modules or any(map(is_cloud_module, sys.modules)):
        return False
    sys.meta_path.insert(0, _HiddenCloudModules())
    return True
