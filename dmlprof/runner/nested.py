"""``dmlprof.profile()`` where a recording is already active in this process: a script that profiles a block
itself, scanned or checked (``dmlprof scan train.py``), or one ``profile`` block inside another.

The tap has room for one recording a process (:mod:`dmlprof.record.tap`), and a second one would change what the
program does: refused, it ended a scanned script with the tap's error, read as the script's own. So the inner block
records nothing of its own: it runs as it runs unscanned, and its session is the enclosing recording's own calls of
the block (the rows the recorder added while the block ran), or, where the enclosing recording kept none of them
(a warm-up step, a recorder already full, a stretch only the device's refusals watch), an empty session that says
why. Either way :attr:`~dmlprof.runner.Profiled.recorded_by` says, in words, whose recording the block's calls are.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

from dmlprof.model_file import describe_exception
from dmlprof.record.recorder import Recorder
from dmlprof.record.tap import DispatcherTap
from dmlprof.record.warning_capture import WarningCapture

#: what :attr:`Profiled.recorded_by` says of a block run inside another recording
RECORDED_BY = ("the dmlprof recording already active in this process (the scan or check running this script, or an "
               "enclosing dmlprof.profile block): one recording runs at a time, so this block's session holds that "
               "recording's own calls of the block")


def recording_active() -> bool:
    """Whether a dmlprof recording holds this process's tap (a second one cannot start)."""
    return DispatcherTap._installed is not None


class _BlockOfRecording:
    """The rows an enclosing recorder added while the block ran, read as :func:`~dmlprof.runner.assembly.assemble`
    reads a recorder of their own; nothing here changes the enclosing recorder."""

    def __init__(self, recorder: Recorder, first_row: int, first_warning: int):
        self.recorder = recorder
        self.backend = recorder.backend
        self.rows = recorder.rows[first_row:]
        self.first_row = first_row
        self.refused_rows = {row - first_row for row in recorder.refused_rows if row >= first_row}
        self.modules = recorder.modules
        self.warnings = WarningCapture()  # the block's warnings only: the enclosing run's earlier ones are not its
        self.warnings.messages = recorder.warnings.messages[first_warning:]
        self.warnings.categories = recorder.warnings.categories[first_warning:]
        self.failed_row = self.device_lost_row = None  # the enclosing run's finding, not the block's
        self.full = False  # said in the block's own note (what the enclosing recorder left out of the block)

    def frame(self):
        from dmlprof.record.frame import rows_to_frame

        # each row's span of evidence indexes the enclosing recorder's list, which is passed whole
        return rows_to_frame(list(self.rows), list(self.recorder.evidence), self.backend, refused=self.refused_rows)


class _Mark:
    """Where the enclosing recording stood when the block began."""

    def __init__(self, recorder: Optional[Recorder]):
        self.recorder = recorder
        self.rows = len(recorder.rows) if recorder is not None else 0
        self.drops = recorder.drops if recorder is not None else 0
        self.fills = len(recorder.filled_at) if recorder is not None else 0
        self.warnings = len(recorder.warnings.messages) if recorder is not None else 0


def _enclosing_recorder() -> Optional[Recorder]:
    """The recorder that holds the tap, if a recorder does (else only the device's refusals watch the calls)."""
    recorder = Recorder.current
    if recorder is not None and DispatcherTap._installed is recorder.tap:
        return recorder
    return None


def _what_was_left_out(mark: _Mark) -> Optional[str]:
    """In words, what of the block the enclosing recording did not keep (None: it kept every call it recorded)."""
    recorder = mark.recorder
    if recorder is None:
        return ("the recording active in this process records no calls where this block ran (only the device's "
                "refusals are watched there: a warm-up step, or a step past the recorded ones)")
    if recorder.drops != mark.drops:
        return ("the enclosing scan dropped its warm-up calls while this block ran: the block's calls before its "
                "warm-up ended are not here")
    if len(recorder.filled_at) != mark.fills or (recorder.full and len(recorder.rows) == mark.rows):
        return "the enclosing recording was full: the block's calls past its most ran unrecorded"
    return None


def _block_start(mark: _Mark) -> int:
    """The first of the enclosing recorder's rows that is the block's (rows dropped meanwhile: the first held)."""
    return mark.rows if mark.recorder.drops == mark.drops else 0


@contextmanager
def block_of_the_active_recording(result, name: str):
    """Run a ``dmlprof.profile`` block inside the recording already active; ``result`` (a
    :class:`~dmlprof.runner.Profiled`) gets the block's session when the block ends, as on its own."""
    result.recorded_by = RECORDED_BY
    mark = _Mark(_enclosing_recorder())
    start = time.perf_counter()
    raised = None
    try:
        yield result
    except BaseException as exc:
        raised = exc
        raise
    finally:
        result.session = _session_of_block(mark, name, raised, duration_s=time.perf_counter() - start)


def _session_of_block(mark: _Mark, name: str, raised: Optional[BaseException], *, duration_s: float):
    from dmlprof.runner.assembly import assemble
    from dmlprof.schema import empty_ops_frame
    from dmlprof.session import Session

    recorder = mark.recorder
    left_out = _what_was_left_out(mark)
    block = _BlockOfRecording(recorder, _block_start(mark), mark.warnings) if recorder is not None else None
    if block is not None and left_out is None and not block.rows:
        left_out = ("the recording active around this block kept none of its calls (they ran in a scanned script's "
                    "unrecorded warm-up steps, or past its recorded steps)")
    backend = recorder.backend if recorder is not None else _backend_of_the_tap()
    facts = _block_facts(name, backend, recorder, raised, duration_s)
    facts.note(_recorded_by_note(left_out))
    if block is None:
        return Session(meta=facts.build(), ops=empty_ops_frame())
    return assemble(block, None, backend, facts, losses=[], step_times_ms=[], raised=raised)


def _backend_of_the_tap():
    """The backend of whatever holds the tap without a recorder (the device's refusals alone), else the CPU's."""
    installed = DispatcherTap._installed
    handler = installed.handler if installed is not None else None
    backend = getattr(getattr(handler, "__self__", None), "backend", None)
    if backend is None:
        from dmlprof.backends import backend_class

        backend = backend_class("cpu")(0)
    return backend


def _block_facts(name: str, backend, recorder: Optional[Recorder], raised: Optional[BaseException],
                 duration_s: float):
    from dmlprof.runner.run import live_facts

    facts = live_facts(Path(name), backend, run_mode="block", sync=recorder is not None and recorder.sync is not None)
    facts.set(steps=0, batch_size=None, duration_s=round(duration_s, 3))
    facts.set_recording(description="the block's calls as the recording active around it recorded them",
                        profiler=False)
    if raised is not None:
        facts.set(partial=True, partial_reason=describe_exception(raised))
    return facts


def _recorded_by_note(left_out: Optional[str]) -> str:
    note = ("recorded by the dmlprof recording already active in this process (this block ran inside it, as it runs "
            "unscanned); its own options (device, sync, profiler) were not applied, and there is no torch.profiler "
            "cross-check of its calls")
    return f"{note}; {left_out}" if left_out else note
