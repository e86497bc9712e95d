"""Sharing the protocol state machine fairly: a FIFO lock and predictions in row blocks.

The state machine runs one call at a time. A prediction of many rows would hold it for as
long as all its rows take, and every other user's request would wait behind it. So the
service predicts in blocks of rows, one state-machine call per block, taking the
:class:`FairLock` again for each: a request that arrives meanwhile is served after the
block in progress (the lock is granted in arrival order, which ``threading.Lock`` does not
promise), so its wait is bounded by one block per prediction in progress.
:func:`merge_scores` joins the blocks' replies into the reply the whole prediction would
have had.
"""

from __future__ import annotations

import threading

import numpy as np

from ..privacy.protocol import Message, ProtocolError

__all__ = ["FairLock", "block_rows", "merge_scores"]


class FairLock:
    """A non-reentrant lock granted in the order it was asked for."""

    def __init__(self):
        self._condition = threading.Condition(threading.Lock())
        self._next_ticket = 0
        self._serving = 0

    def acquire(self) -> None:
        with self._condition:
            ticket = self._next_ticket
            self._next_ticket += 1
            self._condition.wait_for(lambda: self._serving == ticket)

    def release(self) -> None:
        with self._condition:
            self._serving += 1
            self._condition.notify_all()

    def __enter__(self) -> FairLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def block_rows(target: int, rows_per_sum: int) -> int:
    """Rows per block: ``target`` rounded down to a multiple of ``rows_per_sum`` (the rows
    one row-sum ciphertext holds, so that blocks' sums concatenate), at least one such."""
    return max(rows_per_sum, target // rows_per_sum * rows_per_sum)


def merge_scores(replies: list[Message]) -> Message:
    """The ``scores`` reply of a prediction from the replies of its consecutive row blocks.

    ``sums`` replies (blocks of whole row-sum ciphertexts) concatenate their ciphertexts;
    ``leaves`` replies concatenate their rows, each block's leaf positions moved to its own
    ciphertexts in the joined list (a ciphertext several blocks reached is sent once).

    Raises
    ------
    ProtocolError
        The replies are not of one kind and layout.
    """
    first = replies[0]
    kind = first.meta.get("reply")
    shared = {k: v for k, v in first.meta.items() if k != "n_rows"}
    for reply in replies[1:]:
        if {k: v for k, v in reply.meta.items() if k != "n_rows"} != shared:
            raise ProtocolError("the blocks of a prediction were answered differently")
    meta = {**first.meta, "n_rows": sum(reply.meta["n_rows"] for reply in replies)}
    if kind == "sums":
        return Message("scores", meta, {}, {"sums": [blob for reply in replies
                                                     for blob in reply.blobs["sums"]]})
    per_ct = int(first.meta["leaves_per_ciphertext"])
    joined: dict[bytes, int] = {}
    positions, draws = [], []
    for reply in replies:
        blobs = [bytes(blob) for blob in reply.blobs["leaves"]]
        where = np.array([joined.setdefault(blob, len(joined)) for blob in blobs],
                         dtype=np.int64)
        local, lane = np.divmod(reply.arrays["leaf"].astype(np.int64), per_ct)
        positions.append(where[local] * per_ct + lane if len(where) else local)
        draws.append(reply.arrays["draws"])
    return Message("scores", meta, {"leaf": np.concatenate(positions).astype(np.int32),
                                    "draws": np.concatenate(draws)},
                   {"leaves": list(joined)})
