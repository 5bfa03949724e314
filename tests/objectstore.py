"""A real S3-compatible object store on 127.0.0.1 for the tests: SeaweedFS's ``weed server`` (Apache-2.0).

The ``weed`` binary is built once from SeaweedFS's Go module (the Go module proxy, the machine's ``go``)
into ``~/.cache/lakehouse/bin`` (``SEAWEEDFS_WEED`` names another binary); ``.ci/run`` builds it before the
tests (``python -m tests.objectstore build``). Go refuses ``go install module@version`` for a module whose
go.mod has ``replace`` lines, as SeaweedFS's has, so the module is downloaded, copied and built in place.
Each test process starts its own server (every port free, loopback only, data under a temporary folder)
with one identity whose keys are made up per server, and one bucket; it is stopped by process group.

Where the binary can be neither found nor built (no ``go``, no network), :func:`weed_binary` says why and the
object-store tests skip with that one line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cluster import free_port

#: SeaweedFS's Go module and the version built (a pseudo-version of its main branch the proxy serves).
MODULE = "github.com/seaweedfs/seaweedfs"
VERSION = "v0.0.0-20261109003541-7506e5f91cd6"
BUCKET = "lakehouse"
_CACHE = Path("~/.cache/lakehouse/bin").expanduser()
_BUILD_TIMEOUT_S = 1800
_START_TIMEOUT_S = 60
_CLIENT_TIMEOUT_S = 60


@dataclass(frozen=True)
class ObjectStore:
    """A running S3 endpoint with one bucket and the keys of its one identity."""

    endpoint: str
    access_key: str
    secret_key: str
    bucket: str = BUCKET
    #: The folder under the bucket that :meth:`uri` starts from ("": the bucket's top).
    prefix: str = ""

    def uri(self, *parts: str) -> str:
        """``s3a://<bucket>/<prefix>/<parts...>``."""
        return "/".join([f"s3a://{self.bucket}", *filter(None, [self.prefix, *parts])])

    def hadoop_conf(self) -> dict[str, str]:
        """S3A's settings for this store (Hadoop keys, without the ``spark.hadoop.`` prefix)."""
        return {
            "fs.s3a.endpoint": self.endpoint,
            "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.path.style.access": "true",
            "fs.s3a.endpoint.region": "us-east-1",
            "fs.s3a.access.key": self.access_key,
            "fs.s3a.secret.key": self.secret_key,
        }

    def under(self, *parts: str) -> ObjectStore:
        """This store with ``parts`` appended to its prefix: ``under("a").uri()`` is ``uri("a")``."""
        return dataclasses.replace(self, prefix="/".join(filter(None, [self.prefix, *parts])))

    def files(self) -> list[tuple[str, ...]]:
        """Every object under :meth:`uri` (its path relative to it, as parts), listed with pyarrow's S3
        client: no JVM, so a hook inside a Py4J call (tests/crash.py) may list."""
        from pyarrow import fs

        top = "/".join(filter(None, [self.bucket, self.prefix]))
        found = self.client().get_file_info(fs.FileSelector(top, allow_not_found=True, recursive=True))
        return [
            tuple(info.path[len(top) + 1 :].split("/")) for info in found if info.type == fs.FileType.File
        ]

    def client(self, allow_bucket_creation: bool = False) -> Any:
        """pyarrow's ``S3FileSystem`` of this store."""
        from pyarrow import fs

        return fs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            endpoint_override=self.endpoint.removeprefix("http://"),
            scheme="http",
            region="us-east-1",
            allow_bucket_creation=allow_bucket_creation,
        )

    def env(self) -> dict[str, str]:
        """What a child process of the ``s3`` profile needs: the endpoint and the credentials."""
        return {
            "LAKEHOUSE_PROFILE": "s3",
            "LAKEHOUSE_S3_ENDPOINT": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
        }


def weed_binary(build: bool = True) -> tuple[Path | None, str]:
    """The ``weed`` binary (building it when missing and ``build``), or None and why it is not there."""
    named = os.environ.get("SEAWEEDFS_WEED")
    if named:
        return (Path(named), "") if Path(named).is_file() else (None, f"SEAWEEDFS_WEED={named} is no file")
    target = _CACHE / f"weed-{VERSION}"
    if target.is_file() or not build:
        return (target, "") if target.is_file() else (None, f"{target} is not built")
    if shutil.which("go") is None:
        return None, "no `go` on PATH to build SeaweedFS's weed"
    _CACHE.mkdir(parents=True, exist_ok=True)
    with (_CACHE / "weed-build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build for every test process of a run
        if not target.is_file():
            problem = _build(target)
            if problem:
                return None, problem
    return target, ""


def _build(target: Path) -> str:
    """Build ``weed`` into ``target``; "" or a one-line reason it failed."""
    try:
        download = subprocess.run(
            ["go", "mod", "download", "-json", f"{MODULE}@{VERSION}"],
            capture_output=True,
            text=True,
            timeout=_BUILD_TIMEOUT_S,
            check=True,
        )
        source = Path(json.loads(download.stdout)["Dir"])
        work = _CACHE / f"weed-src-{os.getpid()}"
        shutil.copytree(source, work, dirs_exist_ok=True)
        for path in [work, *work.rglob("*")]:  # the module cache is read-only; go build writes nothing
            if path.is_dir():  # here, but copies keep the mode
                path.chmod(0o755)
        subprocess.run(
            ["go", "build", "-o", str(target.with_suffix(".tmp")), "./weed"],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=_BUILD_TIMEOUT_S,
            check=True,
        )
        target.with_suffix(".tmp").rename(target)
        shutil.rmtree(work, ignore_errors=True)
        return ""
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as error:
        detail = getattr(error, "stderr", None) or str(error)
        return f"building SeaweedFS's weed failed: {str(detail).strip().splitlines()[-1][:200]}"


@contextlib.contextmanager
def object_store(work_dir: Path, binary: Path) -> Iterator[ObjectStore]:
    """Start ``weed server`` (master, volume, filer, S3 gateway) on free loopback ports with data under
    ``work_dir``; yield the store once its bucket exists; stop the server at exit."""
    work_dir.mkdir(parents=True, exist_ok=True)
    access_key, secret_key = f"lakehouse{secrets.token_hex(4)}", secrets.token_hex(16)
    identities = {
        "identities": [
            {
                "name": "lakehouse",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }
    config = work_dir / "s3.json"
    config.write_text(json.dumps(identities))
    ports = {name: free_port() for name in ("master", "volume", "filer", "s3")}
    grpc = {name: free_port() for name in ports}
    args = [
        str(binary),
        "server",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-dir={work_dir / 'data'}",
        "-volume.max=0",
        "-master.volumeSizeLimitMB=64",
        "-filer",
        "-s3",
        f"-s3.config={config}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        *(f"-{name}.port={port}" for name, port in ports.items()),
        *(f"-{name}.port.grpc={port}" for name, port in grpc.items()),
    ]
    (work_dir / "data").mkdir(exist_ok=True)
    log = work_dir / "weed.log"
    with log.open("wb") as out:
        server = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    store = ObjectStore(f"http://127.0.0.1:{ports['s3']}", access_key, secret_key)
    try:
        _create_bucket(store, server, log)
        yield store
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=60)


def _create_bucket(store: ObjectStore, server: subprocess.Popen[bytes], log: Path) -> None:
    """Create the bucket once the S3 gateway answers (pyarrow's S3 client: no JVM needed)."""
    client = store.client(allow_bucket_creation=True)
    deadline = time.monotonic() + _START_TIMEOUT_S
    while True:
        try:
            client.create_dir(store.bucket)
            return
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-1500:]
                raise RuntimeError(f"SeaweedFS did not start: {tail}") from None
            time.sleep(0.5)


@functools.cache
def _client(endpoint: str, access_key: str, secret_key: str, allow_bucket_creation: bool) -> Any:
    from pyarrow import fs

    return fs.S3FileSystem(
        access_key=access_key,
        secret_key=secret_key,
        endpoint_override=endpoint.removeprefix("http://"),
        scheme="http",
        region="us-east-1",
        allow_bucket_creation=allow_bucket_creation,
        # The SDK's defaults (1 s to connect, 3 s without a byte) failed a listing at load 20 (the server
        # starved of CPU); S3A in the JVM waits far longer.
        connect_timeout=_CLIENT_TIMEOUT_S,
        request_timeout=_CLIENT_TIMEOUT_S,
    )


if __name__ == "__main__":  # python -m tests.objectstore build: what .ci/run calls before the tests
    if sys.argv[1:] != ["build"]:
        sys.exit("usage: python -m tests.objectstore build")
    found, why = weed_binary()
    print(found or f"not built: {why}")
    sys.exit(0 if found else 1)
