"""Progress of long commands: a bar on stderr on a terminal, plain lines otherwise."""

from __future__ import annotations

import pytest

from lakehouse.progress import progress


def test_a_bar_names_each_step_and_lines_print_above_it(capsys: pytest.CaptureFixture[str]) -> None:
    with progress(2, enabled=True) as bar:
        bar.step("run 1")
        bar.echo("[demo] run 1: landed")
        bar.step("run 2")
    out, err = capsys.readouterr()
    assert out == "[demo] run 1: landed\n"
    assert "run 1 [0/2]" in err and "run 2 [1/2]" in err


def test_without_a_terminal_there_is_no_bar(capsys: pytest.CaptureFixture[str]) -> None:
    with progress(2) as bar:  # pytest's captured stderr is not a TTY
        bar.step("run 1")
        bar.echo("a line")
    assert capsys.readouterr() == ("a line\n", "")
