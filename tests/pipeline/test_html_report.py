"""report.html rendering: escaping, images, tables, sections; and a real report as a
browser shows it (headless Chromium)."""
from __future__ import annotations

import os

import pytest

from pipeline.html_report import Section, render_html
from tests.support.browser import ARTIFACTS, chromium_page


def test_sections_render_escaped_with_images_and_tables():
    text = render_html("T <1>", "intro & more", [
        Section("Pairs", "0-9-1->1.0", image="charts/p.png", headers=("pair", "n"),
                rows=[("<script>", 1234567), ("x", None), ("y", 2.25), ("z", 31528.431)]),
    ])
    assert "<title>T &lt;1&gt;</title>" in text and "intro &amp; more" in text
    assert "<img src='charts/p.png'" in text
    assert "<td>&lt;script&gt;</td><td>1,234,567</td>" in text
    assert "<td>x</td><td></td>" in text and "<td>2.25</td>" in text and "<td>31,528.43</td>" in text
    assert "<script>" not in text


def test_an_anchored_section_wraps_the_level_3_ones_after_it():
    text = render_html("T", "", [
        Section("Summary", "one\n\ntwo", anchor="summary"),
        Section("Detail", level=3, anchor="detail"),
        Section("Next"),
    ])
    assert "<section id='summary'>\n<h2>Summary</h2>\n<p>one</p>\n<p>two</p>" in text
    assert "<h3 id='detail'>Detail</h3>\n</section>\n<h2>Next</h2>" in text


@pytest.mark.pipeline
@pytest.mark.timeout(600)
def test_report_html_in_headless_chromium_shows_the_summary_and_every_chart(single_gateway_report):
    summary, out = single_gateway_report
    os.makedirs(ARTIFACTS, exist_ok=True)
    shot = os.path.join(ARTIFACTS, "report-single-gateway.png")
    with chromium_page() as page:
        page.goto((out / "report.html").as_uri())
        assert page.title() == "Gateway ledger report"
        text = page.inner_text("#summary")
        # what an operator reads first, as the browser lays it out
        for words in ("1 gateway (gw-A)", "34 messages received", "27 deliveries to consumers",
                      "p50 14.00 ms, p95 500.00 ms, p99 500.00 ms",
                      "Refused or unroutable: 7 messages (unroutable 3, returned 2, refused 2)",
                      "Not finally settled at the end of the ledger: 4 messages (expired 4)",
                      "TTL ran out, no dead-letter exchange",
                      # issue 41: one final state each, the ledger's gaps
                      "Final state of every message: delivered 25, expired 4, dropped 5; none lost.",
                      "Ledger gaps: none; every record the gateways made was written.",
                      "unroutable: no queue took it"):
            assert words in text, words
        # throughput as numbers: per route, the busiest minute's rate and the mean
        rates = page.locator("h2:has-text('Throughput by route') + p + table").inner_text()
        assert "gw-A\t/\tin\t/exchanges/ex/k\t20\t1\t0.33\t2023-11-14 22:13\t0.33" in rates, rates
        assert "gw-A\t/\tout\t/queues/q1\t22\t1\t0.37\t2023-11-14 22:13\t0.37" in rates, rates
        summary_box = page.locator("#summary").bounding_box()
        first_chart = page.locator("img").first.bounding_box()
        assert summary_box["y"] + summary_box["height"] <= first_chart["y"], "the summary comes first"
        images = page.evaluate("Array.from(document.images).map(i => [i.getAttribute('src'), "
                               "i.complete && i.naturalWidth > 0])")
        assert len(images) >= 12 and all(loaded for _src, loaded in images), images
        page.screenshot(path=shot, full_page=True)
    with open(shot, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000
    print(f"screenshot of report.html: {shot}")
