"""The gateway's side of a ledger written by a separate process.

Encoding events as JSON costs about ten times what the hot path's ``list.append`` does
and, with four or five events per message, was a quarter to a third of the gateway's
CPU at full load. ``LedgerFeed`` keeps the hot path of ``EventBuffer`` and, every tenth
of a second or so (``edge.ledger_process.SHIP_INTERVAL``), turns the buffer into one
marshalled (or pickled) batch frame (``batches``) for the writer process
(``writer_process``), which encodes and writes on another core once per flush interval.
The edge owns the pipe and the process; this class never touches either.
"""
from __future__ import annotations

import logging
import pickle
import time
from typing import Iterable, Optional

from .batches import lines_frame, rows_frame
from .buffer import EventBuffer
from .encoding import PUBLISHED_KEEP_SECONDS, RowEncoder, sample_threshold

__all__ = ["LedgerFeed"]

log = logging.getLogger(__name__)

#: how old a shipped publish row may be and still be referred to by gateway id. Derived
#: from how long the writer keeps publish rows (``encoding.PUBLISHED_KEEP_SECONDS``, by
#: the rows' own times) less a margin for the time between a row's time and the frame
#: that ships it (``edge.ledger_process.SHIP_INTERVAL``): a second literal could drift
#: past it, and deliveries would then refer to rows the writer has let go. Why 4 s and
#: not 1.5: a message delivered later than this, from a backlog, has its key built from
#: the message and marshalled, its strings cold by then. Under a full 0-9-1 -> 0-9-1
#: load (queue latency 2-3 s) that cost the event loop up to 0.7 us a message (real
#: gateway, 100 B, 6 rounds with a 6 s window: ledger-on CPU 15.0 -> 14.3 us a message,
#: off 14.1). The price is the writer's memory: it keeps 4.5 to 9 s of publish rows (at
#: 65k messages/s its peak RSS went from 315 to 410 MB).
_KEEP_MARGIN = 0.5
KEY_REF_SECONDS = PUBLISHED_KEEP_SECONDS - _KEEP_MARGIN  # 4.0


class LedgerFeed(EventBuffer):
    """Buffers events and frames them for the writer process.

    ``container_id``, ``sample_rate`` and ``header_allowlist`` must be those the writer
    process is started with: they are used here only for a batch that can be neither
    marshalled nor pickled, which is encoded on the spot instead. Counters: ``batches``,
    ``rows_sent`` (a row may carry two events), ``batches_encoded_here``.
    """

    def __init__(self, *, container_id: str, sample_rate: float = 1.0,
                 header_allowlist: Iterable[str] = (), enabled: bool = True) -> None:
        encoder = RowEncoder(container_id, header_allowlist, sample_threshold(sample_rate))
        # no header is recorded: do not pay for pickling the applications' headers
        super().__init__(enabled=enabled, keep_headers=bool(encoder.allowlist))
        self._encoder = encoder
        self.batches = self.rows_sent = self.batches_encoded_here = 0

    def take_frame(self, now: Optional[float] = None) -> bytes:
        """The buffered events as one frame (an empty batch when there are none: the
        writer process then only rotates by age). ``now``: the time (``time.time()``
        when None); publish rows not older than ``KEY_REF_SECONDS`` may be referred to by
        gateway id (``EventBuffer.mark_taken``)."""
        if now is None:
            now = time.time()
        self.mark_taken(now, KEY_REF_SECONDS)
        items = self.take()
        self.batches += 1
        self.rows_sent += len(items)
        try:
            return rows_frame(items)
        except (pickle.PicklingError, TypeError, AttributeError, ValueError) as exc:
            log.debug("ledger batch not serializable (%r): encoding it here", exc)
        self.batches_encoded_here += 1
        data, kept = self._encoder.encode(items)
        return lines_frame(data, kept)
