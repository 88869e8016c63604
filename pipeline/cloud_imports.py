"""Local commands start without the client libraries of Google Cloud and MongoDB.

`import apache_beam` loads, through its Cloud Storage filesystem and its BigQuery, Pub/Sub and Datastore modules,
the Google Cloud client libraries that Beam's `gcp` extra installs, and through its MongoDB connector the MongoDB
client, whether a job uses them or not: about 550 modules and 0.35–0.45 CPU-s at the start of every command, more
with worker processes, which then copy the pages those modules' objects live on. Beam's own modules import these
libraries inside `try: ... except ImportError` and carry on without them, as on an installation without them
(which Beam supports). So a fresh command process whose arguments name no remote runner and no remote path
(nothing with '://') hides those libraries from the import system before Beam loads.

It also hides one module of Beam's own: the BigQuery connector, which `apache_beam.io` loads in the same optional
block as the Pub/Sub and Cloud Storage ones (so those stay unloaded too, and importable), with ~150 modules of
its own and 0.06–0.1 CPU-s that no local command uses.
"""
from __future__ import annotations

import importlib.abc
import logging
import sys


# The client libraries of Beam's gcp extra, under the google.cloud namespace (the namespace package itself is
# loaded at start-up by the clients' .pth files), the Google API core and auth libraries they stand on, and the
# MongoDB client with its bson. Beam's older apitools clients stay importable: without them Beam logs a warning
# on every start.
CLOUD_NAMESPACE = "google.cloud."
CLIENT_PACKAGES = ("google.api_core", "google.auth", "google_auth_httplib2", "pymongo", "bson")
BEAM_CONNECTORS = ("apache_beam.io.gcp.bigquery",)
# What Beam's MongoDB connector logs when it finds no bson: true, and beside the point, for a hidden client.
_MONGODB_LOGGER = "apache_beam.io.mongodbio"


def is_client_module(name: str) -> bool:
    return name.startswith(CLOUD_NAMESPACE) or any(name == p or name.startswith(p + ".") for p in CLIENT_PACKAGES)


# Commands that run Beam jobs whose arguments say everything about where they run and what they touch.
LOCAL_CAPABLE_COMMANDS = {"create", "extract-wiki", "extract-books", "vocab", "demo"}
# The runners bertcorpus runs on Beam's FnApiRunner on this machine (pipeline/runners.py).
LOCAL_RUNNERS = {"DirectRunner", "FnApiRunner", "SwitchingDirectRunner"}


class _HiddenModules(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if is_client_module(name) or name in BEAM_CONNECTORS:
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


def hide_client_modules() -> bool:
    """Hide the client modules and BEAM_CONNECTORS from later imports; False (and nothing done) where Beam is
    loaded already."""
    if any(isinstance(finder, _HiddenModules) for finder in sys.meta_path):
        return True
    if "apache_beam" in sys.modules or any(map(is_client_module, sys.modules)):
        return False
    sys.meta_path.insert(0, _HiddenModules())
    logging.getLogger(_MONGODB_LOGGER).addFilter(lambda record: "bson" not in record.getMessage())
    return True
