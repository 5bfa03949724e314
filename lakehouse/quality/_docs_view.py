"""The Data Docs index as static HTML: it renders with no network and no JavaScript.

Great Expectations' own index page draws its tables with bootstrap-table loaded from CDNs, so on a machine
without internet access (a cluster node, CI) it shows no table at all. This view, plugged into GX's
``DefaultSiteIndexBuilder`` (its ``view`` setting), renders the same index data (every validation result
and expectation suite GX would list, with GX's links) as plain HTML with inline styles. The per-suite pages
stay GX's.
"""

from __future__ import annotations

import html
from typing import Any

from great_expectations.render.view import DefaultJinjaIndexPageView

_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; } th, td { border: 1px solid #ccc; padding: 4px 10px; text-align: left; }
th { background: #f0f0f0; }
.success { color: #1a7f37; font-weight: bold; } .failed { color: #cf222e; font-weight: bold; }
"""


class StaticIndexPageView(DefaultJinjaIndexPageView):
    """GX's index page view, rendering static HTML instead of a JavaScript table."""

    def render(self, document: Any, template: Any = None, **kwargs: Any) -> str:
        """The index page of ``document`` (GX's rendered index: tabs of link tables)."""
        data = document.to_json_dict() if hasattr(document, "to_json_dict") else document
        tabs = {
            tab["tab_name"]: tab["tab_content"]["table_data"]
            for section in data["sections"]
            for block in section["content_blocks"]
            for tab in block.get("tabs", [])
        }
        site = html.escape(data["sections"][0]["section_name"] if data["sections"] else "")
        body = [f"<h1>Data Docs | {site}</h1>"]
        body += _validations(tabs.get("Validation Results", []))
        body += _suites(tabs.get("Expectation Suites", []))
        return (
            "<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>Data Docs | {site}</title><style>{_STYLE}</style></head>"
            f"<body>{''.join(body)}</body></html>"
        )


def _validations(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "<h2>Validation Results</h2><table id='validations'>",
        "<tr><th>Status</th><th>Expectation Suite</th><th>Run Time</th></tr>",
    ]
    for row in sorted(rows, key=lambda r: str(r.get("_expectation_suite_name_sort"))):
        status = str(row.get("_validation_success_text"))
        suite = html.escape(str(row.get("_expectation_suite_name_sort")))
        link = html.escape(str(row.get("_table_row_link_path")), quote=True)
        css = "success" if status == "Success" else "failed"
        out.append(
            f"<tr class='validation' data-suite='{suite}' data-status='{status}'>"
            f"<td class='{css}'>{status}</td><td><a href='{link}'>{suite}</a></td>"
            f"<td>{html.escape(str(row.get('run_time')))}</td></tr>"
        )
    return [*out, "</table>"]


def _suites(rows: list[dict[str, Any]]) -> list[str]:
    out = ["<h2>Expectation Suites</h2><ul>"]
    for row in sorted(rows, key=lambda r: str(r.get("expectation_suite_name"))):
        name = html.escape(str(row.get("expectation_suite_name")))
        link = html.escape(str(row.get("_table_row_link_path")), quote=True)
        out.append(f"<li><a href='{link}'>{name}</a></li>")
    return [*out, "</ul>"]
