"""One real Kafka broker (KRaft, one node, 127.0.0.1) for the whole test session, stopped by its pid."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from lakehouse.config import load_settings
from lakehouse.kafka_broker import Broker, start_broker, stop_broker


def _free_port_pair() -> int:
    """A port whose next port is free too (broker listener, controller listener)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port + 1)) != 0:
                return port
    raise RuntimeError("no two free consecutive ports on 127.0.0.1")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A broker started once per test session (slow tests only use it); torn down by its process id."""
    folder = tmp_path_factory.mktemp("kafka")
    broker = start_broker(folder, load_settings("local").ivy_cache, port=_free_port_pair())
    yield broker
    stop_broker(folder)
