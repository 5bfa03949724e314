"""Rebuild ``bench/RESULTS.md`` from the per-feature results each benchmark writes.

Each ``bench/bench_<feature>.py`` writes ``bench/RESULTS_<feature>.md``; this joins them, in issue order,
under one header, so the collected file never drifts from what the benchmarks last wrote.
Run: ``python bench/collect_results.py`` (no Spark).
"""

from __future__ import annotations

from pathlib import Path

BENCH = Path(__file__).parent
#: Issues 3-6, 13-15, 18, 34 and 36.
FEATURES = (
    "versioned",
    "dedup",
    "asof",
    "assignment",
    "replica",
    "quality",
    "pipeline",
    "read",
    "steady",
    "continuous",
)
HEADER = """# Benchmark results

Collected by `bench/collect_results.py` from the `RESULTS_<feature>.md` file each benchmark writes
(`bench/bench_<feature>.py`); edit those, not this file. Every benchmark runs its peers side by side in one
process on the same generated data, on this machine kind (2 cores, 24 GB); each section gives its command,
date and the machine's load while it ran.
"""


def collect() -> str:
    """The collected text: the header, then each feature's results separated by a rule."""
    sections = [_as_section((BENCH / f"RESULTS_{name}.md").read_text()) for name in FEATURES]
    return HEADER + "\n" + "\n\n---\n\n".join(sections) + "\n"


def _as_section(text: str) -> str:
    """A feature's results one heading level down when it opens with a ``# `` title (code blocks kept)."""
    lines = text.strip().splitlines()
    if not lines[0].startswith("# "):
        return "\n".join(lines)
    in_code = False
    for i, line in enumerate(lines):
        in_code ^= line.startswith("```")
        if not in_code and line.startswith("#"):
            lines[i] = "#" + line
    return "\n".join(lines)


def main() -> None:
    (BENCH / "RESULTS.md").write_text(collect())


if __name__ == "__main__":
    main()
