"""Great Expectations plumbing: an ephemeral context, one suite per checked table, Data Docs on disk.

Each rule is a ``gx.expectations.UnexpectedRowsExpectation`` over the table's violations frame
(``SELECT key, detail FROM {batch} WHERE rule = '<name>'``): GX runs it on Spark (a count and a sample of
at most 200 rows per expectation) and renders it in Data Docs with the rule's description.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from lakehouse._compat import import_great_expectations
from lakehouse.errors import LakehouseInternalError
from lakehouse.quality.rules import DETAIL_COL, KEY_COL, RULE_COL, Rule

if TYPE_CHECKING:
    from great_expectations.core import ExpectationValidationResult

SITE = "lakehouse_quality"
SAMPLE_KEYS = 5
_RESULT_FORMAT = "COMPLETE"  # the sample of unexpected rows comes with COMPLETE only


@dataclass(frozen=True)
class RuleResult:
    """One expectation's outcome: the rule, success, rows breaking it and up to 5 distinct keys of them."""

    rule: Rule
    success: bool
    unexpected_count: int
    sample_keys: tuple[str, ...]


class QualityContext:
    """An ephemeral GX context whose Data Docs site is the folder ``docs_dir`` (index.html at its top)."""

    def __init__(self, docs_dir: str) -> None:
        # GX is imported when a context is made, not with lakehouse (it takes seconds to import).
        gx: Any = import_great_expectations()
        base = importlib.import_module("great_expectations.data_context.types.base")
        self._gx = gx
        self.docs_dir = docs_dir
        site = {
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": docs_dir},
            "site_index_builder": {
                "class_name": "DefaultSiteIndexBuilder",
                "view": {"module_name": "lakehouse.quality._docs_view", "class_name": "StaticIndexPageView"},
            },
        }
        config = base.DataContextConfig(
            store_backend_defaults=base.InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
            data_docs_sites={SITE: site},
            analytics_enabled=False,
            progress_bars=base.ProgressBarsConfig(globally=False),
        )
        logging.getLogger("great_expectations").setLevel(logging.ERROR)
        self.context = gx.get_context(project_config=config, mode="ephemeral")
        # persist=False: the caller persists the violations frame and releases it after the run.
        self.source = self.context.data_sources.add_spark(name="lakehouse", persist=False)

    def validate(
        self, suite_name: str, rules: tuple[Rule, ...], violations: DataFrame, scope: str
    ) -> list[RuleResult]:
        """Run the suite of ``rules`` on ``violations``; the result is kept for :meth:`build_docs`.

        ``scope`` (what the violations cover, e.g. ``full``) becomes the suite's notes in Data Docs.
        """
        asset = self.source.add_dataframe_asset(name=suite_name)
        batch = asset.add_batch_definition_whole_dataframe("whole table")
        gx = self._gx
        suite = self.context.suites.add(gx.ExpectationSuite(name=suite_name, notes=f"Checked: {scope}."))
        for rule in rules:
            suite.add_expectation(
                gx.expectations.UnexpectedRowsExpectation(
                    unexpected_rows_query=(
                        f"SELECT {KEY_COL}, {DETAIL_COL} FROM {{batch}} WHERE {RULE_COL} = '{rule.name}'"
                    ),
                    description=f"{rule.name}: {rule.description}",
                    meta={"rule": rule.name},
                )
            )
        definition = self.context.validation_definitions.add(
            gx.ValidationDefinition(name=suite_name, data=batch, suite=suite)
        )
        outcome = definition.run(batch_parameters={"dataframe": violations}, result_format=_RESULT_FORMAT)
        by_name = {rule.name: rule for rule in rules}
        return [_rule_result(by_name, result) for result in outcome.results]

    def build_docs(self) -> str:
        """Write the Data Docs site; returns the path of its ``index.html``."""
        self.context.build_data_docs(site_names=[SITE])
        return str(Path(self.docs_dir) / "index.html")


def _rule_result(rules: dict[str, Rule], result: ExpectationValidationResult) -> RuleResult:
    message = _exception_message(result.exception_info or {})
    if message is not None:
        raise LakehouseInternalError(f"a quality expectation could not run: {message}")
    rule = rules[result.expectation_config.meta["rule"]]
    rows = result.result.get("details", {}).get("unexpected_rows", [])
    return RuleResult(
        rule=rule,
        success=bool(result.success),
        unexpected_count=int(result.result.get("observed_value") or 0),
        sample_keys=tuple(dict.fromkeys(str(row[KEY_COL]) for row in rows))[:SAMPLE_KEYS],
    )


def _exception_message(info: dict[str, Any]) -> str | None:
    """The message of an exception GX caught while validating, or None (flat, or per metric)."""
    entries = [info, *(value for value in info.values() if isinstance(value, dict))]
    for entry in entries:
        if entry.get("raised_exception"):
            return str(entry.get("exception_message"))
    return None
