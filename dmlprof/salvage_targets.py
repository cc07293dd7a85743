"""Finishing a side-by-side run (``scan --target dml,xpu,mps``) whose child died in one target's prediction: each
target reported on its own line, as the run would have said it (dmlprof.salvage calls this; docs/targets.md).

The child journals each target as it begins (:meth:`dmlprof.record.journal.Journal.target_begins`), with the lines
of the targets finished before it and the sessions they saved: what a native crash in a later target's branch must
not take with it. The dead target is named as the one that crashed, with its partial session where its recording
had begun; the targets after it were never predicted.
"""
from __future__ import annotations

import sys

from dmlprof.salvage import CRASHED_EXIT_CODE, session_from_journal


def salvage_side_by_side(args, contents, user_line: str, message: str, ended: str, code: int) -> int:
    """Report a side-by-side run whose process ended in one target's prediction (``message``, ``ended`` and
    ``code``: how, as :func:`dmlprof.salvage.how_it_ended` says it): every target's line, one error line whose
    bracket names each session kept, and the exit code (a death's 7; never 0: targets were left unpredicted)."""
    from dmlprof.output import emit, error_line, to_stdout
    from dmlprof.report.targets import cut_short_lines, lines_block, saved_note, title

    words = contents.side_by_side
    target, targets = words["target"], words["targets"]
    saved = [tuple(entry) for entry in words["saved"]]
    path = _saved_partial(args, contents, message, ended, user_line)
    if path is not None:
        saved.append((target, path, True))
    kept_of_it = "its partial session saved" if path is not None else "nothing of it was recorded"
    if not getattr(args, "quiet", False):
        lines = cut_short_lines(words["lines"], targets, target, message, kept_of_it,
                                "crashed" if code == CRASHED_EXIT_CODE else "cut short")
        emit(lines_block(lines), sys.stderr if to_stdout(args) else sys.stdout)
    done = ", ".join(title(name) for name in targets[:targets.index(target)])
    error_line(f"{title(target)}'s prediction: {message}" + (f"; {done} had been predicted (lines above)"
                                                              if done else ""), saved_note(saved) or "nothing was saved")
    return code if code != 0 else CRASHED_EXIT_CODE


def _saved_partial(args, contents, message: str, ended: str, user_line: str):
    """The dead target's partial session saved under --out (where its recording had begun), or None."""
    from dmlprof.output import save_session

    if contents.header is None:  # it died before its recording began (its warm-up step)
        return None
    session = session_from_journal(contents, message, ended, user_line, partial=True)
    return save_session(session, args).session_path
