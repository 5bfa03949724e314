"""The Data Docs a person looks at: the index opens in real headless Chromium and lists every suite with
its pass/fail state."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from lakehouse.quality import QualityReport

CHROMIUM = shutil.which("chromium")
BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
ROW = re.compile(r'<tr class="validation" data-suite="([^"]+)" data-status="(\w+)">')
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (issue 15; .ci/run installs it)"
)


def browse(*args: str) -> str:
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, *BROWSER_FLAGS, *args], capture_output=True, text=True, timeout=180, check=True
    )
    return done.stdout


def test_the_rendered_index_lists_each_suite_with_its_state(
    broken: tuple[dict[str, str], QualityReport], tmp_path: Path
) -> None:
    _, report = broken
    index = Path(report.docs_index)
    dom = browse("--dump-dom", index.as_uri())
    shown = dict(ROW.findall(dom))
    assert shown == {v.suite: "Success" if v.success else "Failed" for v in report.verdicts}
    assert set(shown.values()) == {"Success", "Failed"}
    screenshot = tmp_path / "quality.png"
    browse(f"--screenshot={screenshot}", "--window-size=1000,400", index.as_uri())
    assert screenshot.read_bytes().startswith(PNG_MAGIC)


def test_each_suite_page_names_the_failed_expectation(broken: tuple[dict[str, str], QualityReport]) -> None:
    _, report = broken
    overlap = next(v for v in report.verdicts if v.suite.endswith("rates_overlap"))
    dom = browse("--dump-dom", Path(report.docs_index).as_uri())
    link = re.search(rf'href="([^"]+)">{re.escape(overlap.suite)}</a>', dom)
    assert link is not None
    page = browse("--dump-dom", (Path(report.docs_index).parent / link.group(1)).as_uri())
    (row,) = [tr for tr in page.split("<tr") if "no_overlap: no two versions of a key overlap" in tr]
    assert "fa-times" in row  # GX's failed mark
    assert re.search(r">\s*2\s*</div>", row)  # the unexpected rows GX observed
