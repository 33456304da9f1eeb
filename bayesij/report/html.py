"""The audit as HTML: the verdict first, each section collapsible, every table's columns
defined, figures rendered one at a time (PNG, embedded) and closed."""

from __future__ import annotations

import base64
import html
import io

import numpy as np

from bayesij.report.columns import column_definitions, index_as_columns

__all__ = ["html_body", "html_page", "table_html"]

STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:84em;margin:1em auto;padding:0 1em;"
    "line-height:1.4;color:#222}"
    "p,ul,dl{max-width:62em}"
    ".verdict{background:#f4f6fa;border-left:4px solid #3b6ea8;padding:.6em 1em;max-width:62em}"
    ".verdict li{margin:.25em 0}"
    "details{margin:.8em 0;border-top:1px solid #ddd;padding-top:.4em}"
    "summary{font-weight:600;font-size:1.1em;cursor:pointer}"
    "table{border-collapse:collapse;font-size:.9em;margin:.5em 0}"
    ".scroll{overflow-x:auto}"
    "td,th{padding:2px 8px;border-bottom:1px solid #eee;vertical-align:top}"
    "th{text-align:left}.n{text-align:right}td.t{text-align:left;max-width:30em}"
    "dl.columns{font-size:.85em;color:#444}dl.columns dt{font-family:monospace;float:left;"
    "clear:left;margin-right:.6em}dl.columns dd{margin-left:12em}"
    "figure{display:inline-block;margin:.4em;max-width:100%}figure img{max-width:100%;"
    "height:auto}figcaption{font-size:.85em;color:#555}"
    # A narrow screen: each row a card of 'column: value' lines, no column off the page.
    "@media (max-width:700px){table.cards thead{display:none}"
    "table.cards,table.cards tbody,table.cards tr,table.cards td{display:block;width:auto}"
    "table.cards tr{border-bottom:2px solid #ccc;padding:.3em 0}"
    "table.cards td{border:none;text-align:left;max-width:none;padding:1px 4px}"
    "table.cards td::before{content:attr(data-label) ': ';font-family:monospace;color:#555}"
    "dl.columns dd{margin-left:1em}dl.columns dt{float:none}}"
)


#: Tables shown open besides the first (the rest are folded under their titles).
OPEN_TABLES = ("Influential subsets (AMIP)",)


def html_body(audit, figures: bool = True) -> str:
    """The report's HTML (no page around it): heading, verdict, sections."""

    esc = html.escape
    parts = [
        "<h2>Model audit</h2>",
        f"<p>{esc(audit.description)}</p>",
        f"<p>{esc(audit.heading())}</p>",
        '<div class="verdict"><strong>Verdict</strong><ul>',
    ]
    parts += [f"<li>{esc(line)}</li>" for line in audit.summary()]
    parts.append("</ul></div>")
    parts += [f"<p>{esc(line)}</p>" for line in audit.skipped_words()]
    for index, (title, table) in enumerate(audit.tables().items()):
        # open: the first table and the AMIP answers (what the verdict rests on)
        opened = " open" if index == 0 or title in OPEN_TABLES else ""
        parts += [
            f"<details{opened}><summary>{esc(title)}</summary>",
            f'<div class="scroll">{table_html(table)}</div>',
        ]
        defined = column_definitions(table)
        if defined:
            parts.append('<dl class="columns">')
            parts += [f"<dt>{esc(c)}</dt><dd>{esc(d)}</dd>" for c, d in defined.items()]
            parts.append("</dl>")
        parts.append("</details>")
    if figures:
        parts += _figure_sections(audit)
    return "\n".join(parts)


def table_html(table) -> str:
    """A table as HTML with its index as ordinary first columns (one header row: the
    quantity and the target side by side), numbers right-aligned and text left-aligned,
    each cell labelled with its column (``data-label``) so that a narrow screen shows each
    row as a card of ``column: value`` lines instead of columns off the page."""
    esc = html.escape
    frame, _ = index_as_columns(table)
    columns = [str(c) for c in frame.columns]
    numeric_columns = {str(c) for c in frame.select_dtypes("number").columns}
    head = "".join(
        f'<th class="{"n" if c in numeric_columns else "t"}">{_breakable(esc(c))}</th>'
        for c in columns
    )
    rows = []
    for values in frame.itertuples(index=False):
        cells = []
        for column, value in zip(columns, values, strict=True):
            numeric = isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
            text = _number(value) if numeric else ("" if _missing(value) else str(value))
            kind = "n" if numeric else "t"
            cells.append(f'<td class="{kind}" data-label="{esc(column)}">{esc(text)}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<table class="cards"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _breakable(header: str) -> str:
    """A column name that may wrap after its underscores (``predicted_<wbr>change``)."""
    return header.replace("_", "_<wbr>")


def _missing(value) -> bool:
    try:
        return bool(value is None or (np.ndim(value) == 0 and np.isnan(value)))
    except TypeError:
        return False


def _number(value) -> str:
    if np.isnan(value):
        return ""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value)}"
    return f"{value:.4g}"


def _figure_sections(audit) -> list[str]:
    """Figures by section, each rendered, embedded and closed before the next is made."""
    import matplotlib.pyplot as plt

    sections: dict[str, list[str]] = {}
    for title, fig in audit.figures():
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
        plt.close(fig)
        data = base64.b64encode(buffer.getvalue()).decode()
        section = (
            "Influential subsets (figures)"
            if title.startswith("AMIP")
            else (
                "Influence (figures)" if title.startswith("Influence") else "Diagnostics (figures)"
            )
        )
        sections.setdefault(section, []).append(
            f'<figure><img alt="{html.escape(title)}" src="data:image/png;base64,{data}"/>'
            f"<figcaption>{html.escape(title)}</figcaption></figure>"
        )
    note = audit.figure_note()
    if note and "Influence (figures)" in sections:
        sections["Influence (figures)"].insert(0, f"<p>{html.escape(note)}</p>")
    parts = []
    for section, items in sections.items():
        parts += [f"<details><summary>{html.escape(section)}</summary>", *items, "</details>"]
    return parts


def html_page(audit) -> str:
    """A self-contained HTML page of the audit (figures embedded)."""
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<title>Model audit</title>"
        f"<style>{STYLE}</style></head><body>{html_body(audit)}</body></html>"
    )
