"""A real Spark standalone cluster on 127.0.0.1: one master and N worker JVMs from pyspark's spark-class.

Each JVM runs in its own process group, so losing a worker (``kill_worker``) also ends the executors it
launched, as losing a machine would. Everything is torn down by process group when the context exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_BIN = Path(sys.executable).parent
_START_TIMEOUT_S = 180


@dataclass
class Cluster:
    """A running standalone cluster: its master URL and its worker processes."""

    url: str
    logs: Path
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index`` and every executor it launched (its process group)."""
        _kill_group(self.workers[index])


def cluster_env() -> dict[str, str]:
    """Environment of the cluster's JVMs and of spark-submit: loopback only, pyspark's SPARK_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEHOUSE_", "PYSPARK_", "SPARK_"))}
    env["PATH"] = f"{_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PYSPARK_PYTHON"] = sys.executable
    return env


@contextlib.contextmanager
def standalone_cluster(work_dir: Path, workers: int = 2, memory: str = "1g") -> Iterator[Cluster]:
    """Start a master and ``workers`` one-core workers; yield the cluster; stop every JVM at exit."""
    logs = work_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    port = free_port()
    master_log = logs / "master.log"
    processes = [
        _start(
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
            ],
            master_log,
        )
    ]
    cluster = Cluster(f"spark://127.0.0.1:{port}", logs)
    try:
        _wait_for(master_log, "I have been elected leader", processes[0])
        for n in range(workers):
            log = logs / f"worker-{n}.log"
            worker = _start(
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    memory,
                    "--work-dir",
                    str(work_dir / f"worker-{n}"),
                    "--webui-port",
                    str(free_port()),
                    cluster.url,
                ],
                log,
            )
            processes.append(worker)
            cluster.workers.append(worker)
            _wait_for(log, "Successfully registered with master", worker)
        yield cluster
    finally:
        for process in reversed(processes):
            _kill_group(process)


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(_BIN / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=cluster_env(),
            start_new_session=True,
        )


def _wait_for(log: Path, text: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.5)
    raise RuntimeError(f"{log.name}: no {text!r}; last lines: {log.read_text(errors='replace')[-1500:]}")


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
