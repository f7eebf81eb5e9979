"""report.html rendering: escaping, images, tables."""
from __future__ import annotations

from pipeline.html_report import Section, render_html


def test_sections_render_escaped_with_images_and_tables():
    text = render_html("T <1>", "intro & more", [
        Section("Pairs", "0-9-1->1.0", image="charts/p.png", headers=("pair", "n"),
                rows=[("<script>", 1234567), ("x", None), ("y", 2.25)]),
    ])
    assert "<title>T &lt;1&gt;</title>" in text and "intro &amp; more" in text
    assert "<img src='charts/p.png'" in text
    assert "<td>&lt;script&gt;</td><td>1,234,567</td>" in text
    assert "<td>x</td><td></td>" in text and "<td>2.2</td>" in text
    assert "<script>" not in text
