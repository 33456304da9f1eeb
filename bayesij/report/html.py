"""The audit as HTML: the verdict first, each section collapsible, every table's columns
defined, figures rendered one at a time (PNG, embedded) and closed."""

from __future__ import annotations

import base64
import html
import io

from bayesij.report.columns import column_definitions

__all__ = ["html_body", "html_page"]

STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:62em;margin:1em auto;padding:0 1em;"
    "line-height:1.4;color:#222}"
    ".verdict{background:#f4f6fa;border-left:4px solid #3b6ea8;padding:.6em 1em}"
    ".verdict li{margin:.25em 0}"
    "details{margin:.8em 0;border-top:1px solid #ddd;padding-top:.4em}"
    "summary{font-weight:600;font-size:1.1em;cursor:pointer}"
    "table{border-collapse:collapse;font-size:.9em;margin:.5em 0}"
    ".scroll{overflow-x:auto}"
    "td,th{padding:2px 8px;text-align:right;border-bottom:1px solid #eee}"
    "th:first-child,td:first-child{text-align:left}"
    "td:last-child{text-align:left;max-width:30em}"
    "dl.columns{font-size:.85em;color:#444}dl.columns dt{font-family:monospace;float:left;"
    "clear:left;margin-right:.6em}dl.columns dd{margin-left:12em}"
    "figure{display:inline-block;margin:.4em;max-width:100%}figure img{max-width:100%;"
    "height:auto}figcaption{font-size:.85em;color:#555}"
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
            '<div class="scroll">'
            + table.to_html(float_format=_number, border=0, na_rep="")
            + "</div>",
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


def _number(value: float) -> str:
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
