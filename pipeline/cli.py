"""``amqp-gateway report``: the report job behind the gateway's command line.

The lead wires ``report_main`` as the ``report`` subcommand; it takes the arguments after
``report`` and returns the exit status (0 done, 1 the job failed, 2 usage error or a
missing dependency such as Java or PySpark, named in the message).
"""
from __future__ import annotations

from typing import Sequence

from pipeline.report import main

__all__ = ["report_main"]


def report_main(argv: Sequence[str]) -> int:
    """Run the report with ``argv`` (``--ledger DIR ... --out DIR [--master URL] ...``)."""
    return main(list(argv), prog="amqp-gateway report")
