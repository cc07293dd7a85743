"""What a recording may hold in memory: a bound on bytes, not only on calls.

A recorded call keeps its metadata until the session is saved: about 600 bytes, plus about 180 for each
tensor among its inputs and outputs (measured with tracemalloc on torch 2.13: ``x.add_(1)`` 678 bytes a
call, ``torch.cat`` of 10 tensors 2.3 KB, of 500 tensors 91 KB). A bound on calls alone lets calls with
many tensors (a ``torch.cat`` of 500 pieces in a loop) fill the memory long before it is reached; the
recorder stops keeping calls at whichever bound comes first.
"""
from __future__ import annotations

import mmap

#: what a recorded call holds besides its tensors' metadata, and what each tensor's adds (see above)
ROW_BYTES = 600
TENSOR_BYTES = 180
#: the most the rows of one recording may hold: about what 800,000 plain calls hold (building the session
#: from them then takes about twice as much again; torch.profiler alongside adds its own, bounded apart)
MAX_RECORDED_BYTES = 512 * 2**20


def row_bytes(inputs: tuple, outputs: tuple) -> int:
    """About what one recorded call with these tensors' metadata holds."""
    return ROW_BYTES + TENSOR_BYTES * (len(inputs) + len(outputs))

#: address space a run sets aside and gives back when the memory runs out, so that saying so (an import, a
#: line) and saving what was recorded do not fail in turn where a limit on it (``ulimit -v``) ran out. An
#: anonymous mapping never touched: it costs no resident memory
RESERVE_BYTES = 64 * 2**20


def set_aside():
    """Address space held back for the end of a run (None where it cannot be had)."""
    try:
        return mmap.mmap(-1, RESERVE_BYTES)
    except (OSError, ValueError, MemoryError):
        return None


def give_back(reserve) -> None:
    if reserve is not None:
        reserve.close()
