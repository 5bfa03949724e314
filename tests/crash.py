"""Crash injection at commit boundaries (issue 17).

A *commit* is a new entry in any Delta table's log (``_delta_log/NNN.json``) or in a Structured Streaming
checkpoint's ``offsets``/``commits`` log under a folder (:data:`Root`: local, or an object store's). The
injectors count them with plain file listings (an object store's through pyarrow's S3 client, not the JVM),
so every table and every stage is covered without hooks in the library:

- :func:`after_commit` raises :class:`CrashError` from the first Py4J call that returns once the folder
  holds ``target`` commits: the Python code that made the commit (or ran next) fails right there;
  :func:`at_call` raises it from the n-th Py4J call, anywhere inside a batch.
- :func:`kill_after_commit` SIGKILLs a job's whole process group (Python and its JVM) once the folder holds
  ``target`` commits.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from py4j import java_gateway

from tests.objectstore import ObjectStore

DELTA_COMMIT = re.compile(r"^\d{20}\.json$")
#: The folders of a Structured Streaming checkpoint whose entries are its commits.
LOGS = ("offsets", "commits")
#: Where a pipeline's tables are: a local folder, or a folder of an object store (its ``uri()``).
Root = Path | ObjectStore


class CrashError(Exception):
    """Injected after a commit."""


def commits(root: Root) -> int:
    """Delta commits of every table and streaming ``offsets``/``commits`` entries under ``root``."""
    return sum(1 for parts in listed(root) if is_commit(parts))


def is_commit(parts: tuple[str, ...]) -> bool:
    """Whether the file at relative path ``parts`` is a Delta commit or a streaming log entry."""
    if len(parts) < 2 or any("=" in part for part in parts[:-1]):  # partition folders hold data files only
        return False
    folder, name = parts[-2:]
    return bool(DELTA_COMMIT.match(name)) if folder == "_delta_log" else folder in LOGS and name.isdigit()


def listed(root: Root) -> list[tuple[str, ...]]:
    """The files under ``root`` that may be commits (relative paths as parts): on a local folder, walked
    without entering partition folders or a log's subfolders; on an object store, every object (one
    listing, no JVM)."""
    if isinstance(root, ObjectStore):
        return root.files()
    found = []
    for folder, subfolders, files in os.walk(root):
        parts = Path(folder).relative_to(root).parts
        found += [(*parts, name) for name in files]
        if parts and parts[-1] in ("_delta_log", *LOGS):
            subfolders.clear()
        else:
            subfolders[:] = [s for s in subfolders if "=" not in s]
    return found


class Py4JCrash:
    """Within :meth:`armed`: the first Py4J call returning when ``due(n)`` (``n``: the calls so far,
    this one included) gives a number raises :class:`CrashError` (once); ``fired_at`` is that number, None
    if it never fired. ``calls`` counts the Py4J calls made while armed."""

    def __init__(self, due: Callable[[int], int | None]) -> None:
        self.due = due
        self.calls = 0
        self.fired_at: int | None = None
        self._lock = threading.Lock()

    @contextmanager
    def armed(self) -> Iterator[Py4JCrash]:
        call = java_gateway.JavaMember.__call__
        injector = self

        def crashing_call(member: Any, *args: Any) -> Any:
            result = call(member, *args)
            injector.check()
            return result

        java_gateway.JavaMember.__call__ = crashing_call  # type: ignore[method-assign]
        try:
            yield self
        finally:
            java_gateway.JavaMember.__call__ = call  # type: ignore[method-assign]

    def check(self) -> None:
        with self._lock:
            self.calls += 1
            if self.fired_at is not None:
                return
            self.fired_at = self.due(self.calls)
        if self.fired_at is not None:
            raise CrashError(f"injected at {self.fired_at}")


def after_commit(root: Root, target: int) -> Py4JCrash:
    """Crash once ``root`` holds ``target`` or more commits (``fired_at``: the commits seen)."""
    return Py4JCrash(lambda _: seen if (seen := commits(root)) >= target else None)


def at_call(target: int) -> Py4JCrash:
    """Crash at the ``target``-th Py4J call: a random point inside a batch (``fired_at``: ``target``)."""
    return Py4JCrash(lambda calls: calls if calls >= target else None)


def kill_after_commit(
    command: list[str], root: Root, target: int, **popen: Any
) -> tuple[int | None, subprocess.CompletedProcess[str]]:
    """Run ``command`` in its own process group; SIGKILL the group once ``root`` holds ``target`` commits
    (polled every 10 ms, so the job may have gone on a little: a random point after that commit).

    Returns the commit count seen when it killed (None if the command finished first) and the process.
    """
    process = subprocess.Popen(command, start_new_session=True, text=True, **popen)
    killed_at = None
    while process.poll() is None:
        seen = commits(root)
        if seen >= target:
            os.killpg(process.pid, signal.SIGKILL)
            killed_at = seen
            break
        time.sleep(0.01)
    out, err = process.communicate(timeout=600)
    return killed_at, subprocess.CompletedProcess(command, process.returncode, out, err)
