"""Data-quality checks over every state table with Great Expectations (suites per table kind)."""

from lakehouse.quality.enriched import mark_enriched
from lakehouse.quality.job import QualityReport, TableVerdict, run_quality

__all__ = ["QualityReport", "TableVerdict", "mark_enriched", "run_quality"]
