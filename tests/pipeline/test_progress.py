"""Stage lines with a fake clock."""
from __future__ import annotations

import io

from pipeline.progress import Progress


def test_stage_lines_count_and_time():
    ticks = iter([10.0, 11.5, 14.0])
    out = io.StringIO()
    p = Progress(3, stream=out, clock=lambda: next(ticks))
    p.stage("reading")
    p.note("hello")
    assert out.getvalue() == "[report 1/3 +1.5s] reading\n[report +4.0s] hello\n"
