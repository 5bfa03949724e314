"""Progress of a long command on a terminal: a tqdm bar on stderr, nothing when stderr is not a TTY."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tqdm import tqdm


class Progress:
    """Steps of a long command: :meth:`step` names the next one, :meth:`echo` prints a line above the bar."""

    def __init__(self, bar: tqdm | None) -> None:
        self._bar = bar

    def step(self, name: str) -> None:
        """Start the step ``name`` (the one before it is done)."""
        if self._bar is not None:
            if self._bar.desc:
                self._bar.update(1)
            self._bar.set_description_str(name)

    def echo(self, line: str) -> None:
        """Print ``line`` on stdout, keeping the bar below it."""
        if self._bar is None:
            print(line, flush=True)
        else:
            self._bar.write(line, file=sys.stdout)


@contextmanager
def progress(total: int | None, enabled: bool | None = None) -> Iterator[Progress]:
    """A :class:`Progress` over ``total`` steps (None: not known ahead); a bar only when ``enabled``
    (default: stderr is a TTY)."""
    show = sys.stderr.isatty() if enabled is None else enabled
    if not show:
        yield Progress(None)
        return
    shape = "{desc} [{n}/{total}] {elapsed}" if total else "{desc} [{n}] {elapsed}"
    bar = tqdm(total=total, file=sys.stderr, leave=False, bar_format=shape)
    try:
        yield Progress(bar)
    finally:
        bar.close()
