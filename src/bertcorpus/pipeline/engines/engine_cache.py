"""Flink, Spark and Beam's job servers for them, fetched and built once into a cache outside any repository.

- **Flink** comes from PyPI: `apache-flink-libraries` (lib/, opt/, plugins/) and the `apache-flink` wheel (bin/ and
  conf/), fetched with `pip download --no-deps` and unpacked together into one FLINK_HOME. Nothing is installed into
  any environment (apache-flink pins an old Beam).
- **Spark** comes from PyPI too: the pyspark sdist holds a whole SPARK_HOME (bin/, sbin/, jars/).
- **Beam's job servers** are built with Maven from the runners' published artifacts: the shaded
  `beam-runners-*-job-server` jars are not published for the Beam releases this project uses, so the poms shipped
  beside this module (job-server-poms/) shade `beam-runners-flink-1.19` and `beam-runners-spark-3` into one
  runnable jar each, as Beam's own build does. The Spark one names the cluster's own jars in its manifest's
  Class-Path, so the Spark driver inside the job server is exactly the cluster's Spark.

The Java side is Beam 2.62.0 (the newest whose Flink 1.19 runner and job service both resolve from Maven Central);
the Python SDK is the project's own Beam. docs/engines.md says why and what the tests prove about the skew.
The cache is $BERTCORPUS_ENGINES_CACHE, else ~/.cache/bertcorpus/engines. Each item is built in a temporary folder
and renamed into place, so an interrupted fetch never leaves a half item that looks complete. Each item records the
sha256 of its files as it is built (CONTENTS), and every later use checks them: an item damaged since (a truncated
jar, a file changed or gone) is named in one line and built again, where it would otherwise start a cluster whose
every job fails ("not a jar").
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from importlib import resources
from pathlib import Path

from bertcorpus.pipeline.errors import UserError

FLINK_VERSION = "1.19.3"
FLINK_MINOR = "1.19"
SPARK_VERSION = "3.5.7"
BEAM_JAVA_VERSION = "2.62.0"
# The apache-flink wheel is used for its bin/ and conf/ only, which are the same in every build of a release.
_FLINK_WHEEL_PLATFORM = [
    "--python-version",
    "3.11",
    "--implementation",
    "cp",
    "--abi",
    "cp311",
    "--platform",
    "manylinux2014_x86_64",
    "--only-binary",
    ":all:",
]


def cache_dir() -> Path:
    return Path(os.environ.get("BERTCORPUS_ENGINES_CACHE") or "~/.cache/bertcorpus/engines").expanduser()


def say(message: str) -> None:
    print(f"cluster: {message}", file=sys.stderr, flush=True)


def require_tool(name: str, why: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise UserError(f"`{name}` is not on PATH: {why}")
    return path


def require_java() -> str:
    return require_tool(
        "java",
        "Flink, Spark and Beam's job servers run on Java 11 or 17 (e.g. apt-get install openjdk-17-jre-headless)",
    )


# Each fetch and build step downloads (PyPI, Maven Central): where it fails, the network may be what is missing.
OFFLINE_HINT = (
    "; without network here (a network namespace, an offline host), fetch where there is network first: "
    "`bertcorpus cluster flink --fetch-only` (or spark) fills the cache that a later start only reads"
)


def _run(command: list[str], what: str, cwd: Path | None = None) -> None:
    """Run a fetch or build step; on failure one line naming the command and its last words."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines() if line.strip()]
        errors = [line for line in lines if "ERROR" in line or "error" in line.lower()] or lines
        shown = " ".join(command[:6]) + (" ..." if len(command) > 6 else "")
        failed = f"{what} failed: `{shown}` exited {done.returncode}: {errors[-1] if errors else ''}"[:600]
        raise UserError(failed + OFFLINE_HINT)


def _pip_download(requirement: str, into: Path, *extra: str) -> Path:
    """One distribution file from PyPI (no dependencies, never installed), cached in into/."""
    into.mkdir(parents=True, exist_ok=True)
    name, version = requirement.split("==")
    stem = name.replace("-", "_").lower()
    found = [p for p in into.iterdir() if p.name.replace("-", "_").lower().startswith(f"{stem}_{version}")]
    if found:
        return found[0]
    say(f"downloading {requirement} from PyPI (once; cached in {into}) ...")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=into) as partial:
        _run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", requirement, "-d", partial, *extra],
            f"downloading {requirement}",
        )
        (got,) = Path(partial).iterdir()
        target = into / got.name
        got.rename(target)
    say(f"downloaded {target.name} ({target.stat().st_size / 1e6:.0f} MB) in {time.monotonic() - started:.0f} s")
    return target


CONTENTS = ".bertcorpus-contents.json"  # in each item: {relative path: sha256} of its files, written as it is built


def _file_digests(folder: Path) -> dict[str, str]:
    """The sha256 of every file under folder (but the record of them), by path relative to it."""
    digests = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != CONTENTS:
            with path.open("rb") as f:
                digests[path.relative_to(folder).as_posix()] = hashlib.file_digest(f, "sha256").hexdigest()
    return digests


def _record_contents(folder: Path) -> None:
    (folder / CONTENTS).write_text(json.dumps(_file_digests(folder), indent=0, sort_keys=True))


def _unreadable_jar(folder: Path) -> str | None:
    """The first jar under folder whose zip directory cannot be read (a truncated jar), with why; else None."""
    for jar in sorted(folder.rglob("*.jar")):
        try:
            zipfile.ZipFile(jar).close()
        except (OSError, zipfile.BadZipFile) as e:
            return f"{jar.relative_to(folder)} is not a whole jar: {e}"
    return None


def damage(item: Path) -> str | None:
    """What is wrong with a cached item, or None: a file whose sha256 differs from the one recorded when the item was
    built, or one missing (files added since, such as caches a tool keeps beside its own, harm nothing). An item built
    before records were kept has its jars' zip directories checked, and its record written then."""
    record = item / CONTENTS
    if not record.exists():
        problem = _unreadable_jar(item)
        if problem is None:
            _record_contents(item)
        return problem
    try:
        recorded = json.loads(record.read_text())
    except (OSError, ValueError) as e:
        return f"its record of contents {CONTENTS} cannot be read ({e})"
    found = _file_digests(item)
    changed = sorted(name for name in recorded.keys() & found.keys() if recorded[name] != found[name])
    missing = sorted(recorded.keys() - found.keys())
    for names, what in ((changed, "differs from what was built"), (missing, "is missing")):
        if names:
            more = f" (and {len(names) - 1} more)" if len(names) > 1 else ""
            return f"{names[0]}{more} {what}"
    return None


def rebuild_hint(path: Path) -> str:
    """For a file that cannot be used: how to build it again, where it lies in the cache; else nothing."""
    if not Path(path).expanduser().resolve().is_relative_to(cache_dir().resolve()):
        return ""
    return (
        "; it lies in the engines cache: `bertcorpus cluster flink --fetch-only` (or spark) checks what the cache "
        "holds and builds a damaged item again"
    )


def _build_atomically(target: Path, build) -> Path:
    """build(folder) fills a temporary folder, which then becomes target, with the record of its contents. An existing
    target is taken as it is when its files are those built; a damaged one is removed and built again."""
    if target.exists():
        problem = damage(target)
        if problem is None:
            return target
        say(f"the cached {target} is damaged: {problem}; removing it and building it again")
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        build(partial)
        _record_contents(partial)
        partial.rename(target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def flink_home() -> Path:
    """A FLINK_HOME of Flink FLINK_VERSION, from its two PyPI distributions."""

    def build(home: Path) -> None:
        downloads = cache_dir() / "downloads"
        libraries = _pip_download(f"apache-flink-libraries=={FLINK_VERSION}", downloads, "--no-binary", ":all:")
        wheel = _pip_download(f"apache-flink=={FLINK_VERSION}", downloads, *_FLINK_WHEEL_PLATFORM)
        say(f"unpacking Flink {FLINK_VERSION} ...")
        _extract_deps(libraries, f"apache-flink-libraries-{FLINK_VERSION}/deps/", home)
        with zipfile.ZipFile(wheel) as whl:
            for name in whl.namelist():
                if name.startswith(("pyflink/bin/", "pyflink/conf/")) and not name.endswith("/"):
                    target = home / name[len("pyflink/") :]
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(whl.read(name))
        for script in (home / "bin").iterdir():
            script.chmod(0o755)
        if not (home / "lib" / f"flink-dist-{FLINK_VERSION}.jar").exists():
            raise UserError(f"the Flink {FLINK_VERSION} distributions from PyPI lack lib/flink-dist: {libraries}")

    return _build_atomically(cache_dir() / f"flink-{FLINK_VERSION}", build)


def _extract_deps(sdist: Path, prefix: str, home: Path) -> None:
    """The files under `prefix` in a PyPI sdist (its deps/ folder: the distribution itself), unpacked into home."""
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and len(m.name) > len(prefix)]
        for member in members:
            member.name = member.name[len(prefix) :]
        tar.extractall(home, members=members, filter="data")


def spark_home() -> Path:
    """A SPARK_HOME of Spark SPARK_VERSION, from the pyspark sdist (which carries bin/, sbin/ and jars/)."""

    def build(home: Path) -> None:
        sdist = _pip_download(f"pyspark=={SPARK_VERSION}", cache_dir() / "downloads", "--no-binary", ":all:")
        say(f"unpacking Spark {SPARK_VERSION} ...")
        _extract_deps(sdist, f"pyspark-{SPARK_VERSION}/deps/", home)
        for folder in ("bin", "sbin"):
            for script in (home / folder).iterdir():
                script.chmod(0o755)

    return _build_atomically(cache_dir() / f"spark-{SPARK_VERSION}", build)


def _maven_build(pom_name: str, jar_name: str, properties: dict[str, str]) -> Path:
    """Build one of the shipped poms with `mvn package`; the shaded jar, cached under jars/."""

    def build(folder: Path) -> None:
        mvn = require_tool("mvn", "the Beam job server is built once from Maven Central (apt-get install maven)")
        require_java()
        (folder / "pom.xml").write_bytes(
            resources.files("bertcorpus.pipeline.engines").joinpath("job-server-poms", pom_name).read_bytes()
        )
        say(f"building {jar_name} with Maven from Maven Central (once; about 3 minutes on 2 cores) ...")
        started = time.monotonic()
        _run(
            [mvn, "--batch-mode", "--quiet", "package", *(f"-D{k}={v}" for k, v in properties.items())],
            f"building {jar_name}",
            cwd=folder,
        )
        shutil.move(str(folder / "target" / jar_name), folder / "built.jar")
        say(f"built {jar_name} in {time.monotonic() - started:.0f} s")

    built = _build_atomically(cache_dir() / "build" / jar_name.removesuffix(".jar"), build)
    return built / "built.jar"


def flink_job_server_jar() -> Path:
    return _maven_build(
        "flink-job-server.xml",
        f"beam-runners-flink-{FLINK_MINOR}-job-server-{BEAM_JAVA_VERSION}.jar",
        {"beam.version": BEAM_JAVA_VERSION, "flink.minor": FLINK_MINOR},
    )


def spark_job_server_jar(spark: Path) -> Path:
    """Beam's Spark 3 job server, whose Class-Path is the Spark at spark (its jars/ folder)."""
    class_path = " ".join(sorted(p.resolve().as_uri() for p in (spark / "jars").glob("*.jar")))
    return _maven_build(
        "spark-job-server.xml",
        f"beam-runners-spark-3-job-server-{BEAM_JAVA_VERSION}.jar",
        {"beam.version": BEAM_JAVA_VERSION, "spark.classpath": class_path},
    )
