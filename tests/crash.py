"""Crash injection at commit boundaries (issue 17).

A *commit* is a new entry in any Delta table's log (``_delta_log/NNN.json``) or in a Structured Streaming
checkpoint's ``offsets``/``commits`` log under a folder. The injectors count them with plain file listings,
so every table and every stage is covered without hooks in the library:

- :class:`RaiseAfterCommit` raises :class:`CrashError` from the first Py4J call that returns once the
  folder holds ``target`` commits: the Python code that made the commit (or ran next) fails right there.
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from py4j import java_gateway

DELTA_COMMIT = re.compile(r"^\d{20}\.json$")


class CrashError(Exception):
    """Injected after a commit."""


def commits(root: Path) -> int:
    """Delta commits of every table and streaming ``offsets``/``commits`` entries under ``root``."""
    count = 0
    for folder, subfolders, files in os.walk(root):
        name = os.path.basename(folder)
        if name == "_delta_log":
            count += sum(1 for f in files if DELTA_COMMIT.match(f))
            subfolders.clear()
        elif name in ("offsets", "commits"):
            count += sum(1 for f in files if f.isdigit())
            subfolders.clear()
        else:  # partition folders hold data files only
            subfolders[:] = [s for s in subfolders if "=" not in s]
    return count


class RaiseAfterCommit:
    """Within ``with``: the first Py4J call returning when ``root`` holds ``target`` or more commits raises
    :class:`CrashError` (once). ``fired_at`` is the commit count it saw, None if it never fired."""

    def __init__(self, root: Path, target: int) -> None:
        self.root, self.target = root, target
        self.fired_at: int | None = None
        self._lock = threading.Lock()

    @contextmanager
    def armed(self) -> Iterator[RaiseAfterCommit]:
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
            if self.fired_at is not None:
                return
            seen = commits(self.root)
            if seen >= self.target:
                self.fired_at = seen
                raise CrashError(f"injected after commit {seen}")


def kill_after_commit(
    command: list[str], root: Path, target: int, **popen: Any
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
