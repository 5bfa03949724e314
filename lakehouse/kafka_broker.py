"""A local, one-node Apache Kafka broker (KRaft: broker and controller in one JVM) on 127.0.0.1.

For tests and for trying the Kafka source locally: the broker's jars (``KAFKA_COORDINATE``) are resolved
from Maven Central once, through the same Ivy cache and manifest mechanism as the Delta jars
(:func:`lakehouse._jars.resolve_jars`), then the broker runs as ``java -cp <jars> kafka.Kafka
server.properties`` after its log folder was formatted with Kafka's storage tool. Everything it keeps
(config, data, log, pid file) lives in one folder. Not a production setup: one replica, plaintext.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyspark

from lakehouse._jars import resolve_jars
from lakehouse.errors import KafkaBrokerError

KAFKA_COORDINATE = "org.apache.kafka:kafka_2.13:4.2.0"
DEFAULT_PORT = 9092
_HOST = "127.0.0.1"
_PID_FILE = "broker.pid"
_START_TIMEOUT_S = 120
_STOP_TIMEOUT_S = 30
_JAVA_OPTIONS = ("-Xms256m", "-Xmx512m", "-XX:+UseSerialGC")


@dataclass(frozen=True)
class Broker:
    """A running local broker: clients connect to ``bootstrap_servers``; ``pid`` is its JVM."""

    folder: Path
    port: int
    pid: int

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for ``kafka.bootstrap.servers``."""
        return f"{_HOST}:{self.port}"


def server_properties(folder: Path, port: int, controller_port: int) -> str:
    """The broker's ``server.properties``: KRaft, node 1 as broker and controller, 127.0.0.1 only.

    Internal topics have one replica; new topics get one partition unless created otherwise; consumer
    groups start without the initial rebalance delay.
    """
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@{_HOST}:{controller_port}",
            f"listeners=PLAINTEXT://{_HOST}:{port},CONTROLLER://{_HOST}:{controller_port}",
            f"advertised.listeners=PLAINTEXT://{_HOST}:{port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            f"log.dirs={folder / 'data'}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "",
        ]
    )


def start_broker(
    folder: str | Path, ivy_cache: str | Path, port: int = DEFAULT_PORT, controller_port: int | None = None
) -> Broker:
    """Start a broker keeping its files in ``folder``; return once its listener accepts connections.

    ``folder`` is formatted on first use (a new cluster id) and reused afterwards, so topics survive a
    restart. ``controller_port`` defaults to ``port + 1``.

    Raises:
        KafkaBrokerError: a broker of ``folder`` is already running, a port is taken, or the broker
            exited or did not start within the timeout (the message names its log file).
        JarResolutionError: the broker's jars could not be resolved.
    """
    folder = Path(folder).resolve()
    controller_port = port + 1 if controller_port is None else controller_port
    running = _running_pid(folder)
    if running is not None:
        raise KafkaBrokerError(f"a broker of {folder} is running already (pid {running})")
    for taken in (p for p in (port, controller_port) if _port_open(p)):
        raise KafkaBrokerError(f"port {taken} on {_HOST} is in use: choose another with --port")
    folder.mkdir(parents=True, exist_ok=True)
    jars = resolve_jars(Path(ivy_cache).expanduser(), [KAFKA_COORDINATE], with_delta=False)
    # Spark's resolution leaves Scala's library out (Spark brings its own): take the one pyspark ships.
    scala = sorted((Path(pyspark.__file__).parent / "jars").glob("scala-library-2.13*.jar"))
    properties = folder / "server.properties"
    properties.write_text(server_properties(folder, port, controller_port))
    java = ["java", *_JAVA_OPTIONS, "-cp", ":".join([*jars, *map(str, scala)])]
    log = folder / "broker.log"
    if not (folder / "data" / "meta.properties").is_file():
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        fmt = [
            *java,
            "kafka.tools.StorageTool",
            "format",
            f"--cluster-id={cluster_id}",
            f"--config={properties}",
        ]
        done = subprocess.run(fmt, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            (folder / "format.log").write_text(done.stdout + done.stderr)
            raise KafkaBrokerError(f"formatting {folder / 'data'} failed: see {folder / 'format.log'}")
    with log.open("w") as out:
        process = subprocess.Popen(
            [*java, "kafka.Kafka", str(properties)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    (folder / _PID_FILE).write_text(str(process.pid))
    deadline = time.monotonic() + _START_TIMEOUT_S
    while not _port_open(port):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_broker(folder)
            raise KafkaBrokerError(f"the Kafka broker did not start: see {log}")
        time.sleep(0.2)
    return Broker(folder, port, process.pid)


def stop_broker(folder: str | Path) -> bool:
    """Stop the broker of ``folder`` by its process id (SIGTERM, then SIGKILL); False if none was running."""
    folder = Path(folder).resolve()
    pid = _running_pid(folder)
    (folder / _PID_FILE).unlink(missing_ok=True)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    while _alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
    return True


def _running_pid(folder: Path) -> int | None:
    pid_file = folder / _PID_FILE
    if not pid_file.is_file():
        return None
    pid = int(pid_file.read_text().strip())
    return pid if _alive(pid) else None


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie child of this process counts as gone once reaped)."""
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child: ask the kernel
        reaped = 0
    if reaped == pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((_HOST, port)) == 0
