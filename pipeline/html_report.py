"""``report.html``: sections of text, a PNG chart and a table each; everything escaped."""
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


_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th { background: #eee; } td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; border: 1px solid #ddd; }
"""


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape(str(value))


def render_html(title: str, intro: str, sections: Sequence[Section]) -> str:
    """The whole document as text."""
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>",
           f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
           f"<h1>{html.escape(title)}</h1>", f"<p>{html.escape(intro)}</p>"]
    for s in sections:
        out.append(f"<h2>{html.escape(s.title)}</h2>")
        if s.text:
            out.append(f"<p>{html.escape(s.text)}</p>")
        if s.image:
            out.append(f"<img src='{html.escape(s.image, quote=True)}' alt='{html.escape(s.title, quote=True)}'>")
        if s.headers:
            out.append("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in s.headers) + "</tr>")
            for row in s.rows:
                out.append("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>")
            out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out)
