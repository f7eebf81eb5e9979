"""``report.html``: sections of text, a PNG chart and a table each; everything escaped.

A section is a heading (``level`` 2, or 3 under the one before), paragraphs (``text``,
split at blank lines), an image and a table. ``anchor`` gives it an id to link to (a
level-2 section's id covers the level-3 ones that follow it).
Numbers are written with thousands separators; floats with two decimals (latencies are
milliseconds, so that is 10 µs).
"""
from __future__ import annotations

import dataclasses
import html
from typing import Optional, Sequence

__all__ = ["Section", "render_html"]


@dataclasses.dataclass(frozen=True, slots=True)
class Section:
    title: str
    text: str = ""
    image: Optional[str] = None                # path relative to report.html
    headers: Sequence[str] = ()
    rows: Sequence[Sequence[object]] = ()
    level: int = 2
    anchor: Optional[str] = None


_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th { background: #eee; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; border: 1px solid #ddd; }
#summary { background: #f7f7f2; padding: 0.2em 1em 0.5em; border: 1px solid #ddd; }
"""


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape(str(value))


def render_html(title: str, intro: str, sections: Sequence[Section]) -> str:
    """The whole document as text."""
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>",
           f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
           f"<h1>{html.escape(title)}</h1>", f"<p>{html.escape(intro)}</p>"]
    open_anchor = False
    for s in sections:
        if s.level == 2 and open_anchor:
            out.append("</section>")
            open_anchor = False
        tag, ident = f"h{s.level}", ""
        if s.anchor and s.level == 2:  # the section and the level-3 ones under it
            out.append(f"<section id='{html.escape(s.anchor, quote=True)}'>")
            open_anchor = True
        elif s.anchor:
            ident = f" id='{html.escape(s.anchor, quote=True)}'"
        out.append(f"<{tag}{ident}>{html.escape(s.title)}</{tag}>")
        for paragraph in filter(None, (p.strip() for p in s.text.split("\n\n"))):
            out.append(f"<p>{html.escape(paragraph)}</p>")
        if s.image:
            out.append(f"<img src='{html.escape(s.image, quote=True)}' alt='{html.escape(s.title, quote=True)}'>")
        if s.headers:
            out.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in s.headers) + "</tr>")
            for row in s.rows:
                out.append("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>")
            out.append("</table>")
    if open_anchor:
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out)
