"""Finishing a dead child's scan from its journal (:func:`salvage`): the report of every call recorded, the call
that was running named, one error line, the partial session (dmlprof.survival runs the child and calls this); a
side-by-side run's per target (:func:`salvage_side_by_side`).

The parent imports neither torch nor the user's code until it has to salvage a dead child's journal.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

from dmlprof.files import shown_path

#: the exit code of a scan whose process died (docs/exit_codes.md)
CRASHED_EXIT_CODE = 7
#: the exit code of a run that ended at a call the device refused (docs/exit_codes.md: DeviceError's)
REFUSED_EXIT_CODE = 4
#: how a child ended that exited without its last word (``abort()`` on Windows, a native ``exit()``, an ``os._exit``
#: outside the scan's run): the recording is salvaged, the exit status stands as a script's would (0, else 3; a model
#: file's is 3)
ABRUPT = "an abrupt exit"


def _exit_code(how: str, status: int) -> int:
    """A stopping signal keeps its documented code (130, 143, 129); an abrupt exit is a script's exit (0, else 3);
    a crash is 7."""
    if how == ABRUPT:
        return 0 if status == 0 else 3
    return _stopped_exit_code(how) or CRASHED_EXIT_CODE


def _stopped_exit_code(how: str) -> Optional[int]:
    """A signal that stops a run rather than crashing it keeps its documented code (130, 143, 129)."""
    return {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}.get(how)


def salvage(args, journal: Path, crash_log: Path, how: str, status: int) -> int:
    """Finish a dead child's scan from what it left: report, partial session, one error line."""
    from dmlprof.output import error_line
    from dmlprof.record.journal import read_journal

    contents = read_journal(journal)
    user_line = crash_location(crash_log)
    if contents.finished is not None:  # it had said its last word and saved what it had: its exit code stands
        if _stopped_exit_code(how) is not None:  # a signal that came after (docs/exit_codes.md)
            error_line(f"stopped by {how} after the scan ended")
            return _stopped_exit_code(how)
        if user_line:  # the script's own code (a thread of its own, its ctypes) crashed: plain python dies of it too
            error_line(f"the scanned process died of {how} at {user_line}, after its scan ended (the script's own "
                       "code, in a thread or an exit handler)", "the session is complete")
            return CRASHED_EXIT_CODE
        _note(f"the scanned process died of {how} on its way out, after its scan ended (a native library's exit "
              "handler); nothing was lost")
        return contents.finished
    if contents.side_by_side is not None:  # one target of several was predicted: each is reported on its own
        return salvage_side_by_side(args, contents, user_line, *how_it_ended(args, contents, user_line, how, status))
    message, ended, code = how_it_ended(args, contents, user_line, how, status)
    steps_done = recorded_steps_done(contents)
    # a call the device refused came first: on DirectML the process ended there, whatever came after (an exit
    # handler's os._exit(0), a catch-all's os._exit(1), a scheduler's SIGTERM); it leads, as where Python ends a run
    refusal = contents.refusal
    if refusal is not None:
        message, code = refusal_message(args, contents, message), REFUSED_EXIT_CODE
    if contents.header is None:
        if code == 0:  # a script that ended itself before it ran an op: nothing was lost
            _note(f"{message}, before the recording began; nothing was recorded")
        elif _journal_written(journal):
            error_line(f"{message}, before the recording began", "nothing was recorded")
        else:  # the child could not journal (a full or read-only temporary folder, or one the script removed)
            error_line(f"{message}; what it recorded is lost: its journal could not be kept in {journal.parent.parent} "
                       "(full, read-only or removed; TMPDIR picks another folder)", "nothing was saved")
        return code
    from dmlprof.errors import DmlprofError
    from dmlprof.output import print_report, write_outputs
    from dmlprof.report import build_report

    # a script that ended itself with os._exit(0) succeeded: its session is whole (as a sys.exit(0)'s is)
    ended_well = (contents.os_exit is not None and code == 0) or steps_done
    partial = refusal is not None or not ended_well or contents.stopped is not None
    session = session_from_journal(contents, message, ended, user_line, partial=partial, refusal=refusal)
    try:
        written = write_outputs(session, args)
        if not getattr(args, "quiet", False) and args.command == "scan":
            print_report(build_report(session), args)
    except DmlprofError as err:  # the report could not be shown: the session is on disk, and the error says so
        error_line(f"{message}; {err.one_line()}")
        return code
    if getattr(args, "gate", None) is not None and code == 0:  # dmlprof check: ended well, still held to its limits
        _note(message)
        return _gated(args, session, written)
    if getattr(args, "junit", None) and code != 0:  # dmlprof check: CI still gets its test case, in error
        from dmlprof.output import write_output
        from dmlprof.render.ci import junit_error_xml

        write_output(written, args.junit, lambda: junit_error_xml(args.model, message), "JUnit XML")
    if code == 0:
        _note(f"{message}; {written.note(partial=partial)}")
    else:
        error_line(message, written.note(partial=partial))
    return code


def how_it_ended(args, contents, user_line: str, how: str, status: int) -> "tuple[str, str, int]":
    """What a dead child's journal says of its end: the error line's words, how its process ended (a partial
    session's note), and the scan's exit code (docs/exit_codes.md)."""
    # a script that took all its recorded steps before its process ended (os._exit at its end, from an exit
    # handler or a watchdog thread; the OOM killer's SIGKILL, a native crash in its evaluation): its recording is
    # whole, the run did not stop early (re-probe 13, 17-20; re-probe 18, 12), though a signal still ended it
    steps_done = recorded_steps_done(contents)
    if contents.os_exit is not None:  # the scanned code's own os._exit: not a death
        message, code = os_exit_words(args, contents, user_line, status)
        ended = message
        if contents.stopped is not None:
            message += ", " + stop_words(contents)
    elif steps_done:
        running = (contents.running[-1] if contents.running else contents.unrecorded) if how != ABRUPT else None
        message = ended = crash_message(how, running, user_line) + ", after its recorded steps"
        code = _exit_code(how, status)
    elif contents.stopped is not None:  # what ran after the journal stopped is unknown: no call is named as the death's
        message = crash_message(how, None, "") + (f" at {user_line}" if user_line else "") + ", " + stop_words(contents)
        code, ended = _exit_code(how, status), f"the scanned process died of {how}"
    else:
        running = contents.running[-1] if contents.running else contents.unrecorded
        message = crash_message(how, running, user_line, contents.calls[-1] if contents.calls else None)
        code, ended = _exit_code(how, status), f"the scanned process died of {how}"
    if how == ABRUPT and _contract_run(contents):  # a model file's run ended, by whatever thread: never a success
        code = 3
    return message, ended, code


# -- a side-by-side run (scan --target dml,xpu,mps) whose child died in one target's prediction -----------------------
# The child journals each target as it begins (Journal.target_begins), with the lines of the targets finished before
# it and the sessions they saved: what a native crash in a later target's branch must not take with it. The dead
# target is named as the one that crashed, with its partial session where its recording had begun; the targets after
# it were never predicted (docs/targets.md).

def salvage_side_by_side(args, contents, user_line: str, message: str, ended: str, code: int) -> int:
    """Report a side-by-side run whose process ended in one target's prediction (``message``, ``ended`` and
    ``code``: how, as :func:`dmlprof.salvage.how_it_ended` says it): every target's line, one error line whose
    bracket names each session kept, and the exit code (a death's 7; a model file's own exit, 3, whatever its status:
    never 0, the targets after it were not predicted)."""
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
    return code if code != 0 else 3


def _saved_partial(args, contents, message: str, ended: str, user_line: str):
    """The dead target's partial session saved under --out (where its recording had begun), or None."""
    from dmlprof.output import save_session

    if contents.header is None:  # it died before its recording began (its warm-up step)
        return None
    session = session_from_journal(contents, message, ended, user_line, partial=True)
    return save_session(session, args).session_path


def _gated(args, session, written) -> int:
    """``dmlprof check``'s verdict on a salvaged session (its limits, annotations and --junit), as on a finished
    run's: a script's ``os._exit(0)`` must not pass a CI gate unchecked. (``args.gate``: the command's own, set by
    its parser: this layer imports no command.)"""
    from dmlprof.errors import DmlprofError
    from dmlprof.output import error_line
    from dmlprof.report import build_report

    try:
        return args.gate(args, lambda _: (session, build_report(session), written))
    except DmlprofError as err:
        error_line(err.one_line(), getattr(err, "kept", None))
        return err.exit_code


def os_exit_words(args, contents, user_line: str, status: int) -> "tuple[str, int]":
    """What a child that ended with the scanned code's own ``os._exit`` (journaled) is said to have done, and the
    scan's exit code (docs/exit_codes.md): a script's status 0 succeeded (0), any other failed (3); a model file's
    function has no business ending the process (3), from whatever thread."""
    code, at = contents.os_exit, f" at {user_line}" if user_line else ""
    name = Path(str(getattr(args, "model", "") or "the script")).name
    caller = f"a thread of {name}" if contents.os_exit_in_thread else name
    if _contract_run(contents):
        step = contents.calls[-1].step if contents.calls else 0
        if contents.os_exit_in_thread:  # (its step: whichever the main thread was in)
            return f"{caller} called os._exit({code}){at}, after {len(contents.step_times_ns)} measured step(s)", 3
        return f"{f'step {step}' if step else name} called os._exit({code}){at}", 3
    after = ", after its recorded steps" if recorded_steps_done(contents) else ""
    if status == 0:
        return f"{caller} ended its process with os._exit({code}){at}{after}", 0
    return f"{caller} exited with status {code} (os._exit){at}{after}", 3


def refusal_message(args, contents, ended: str) -> str:
    """The error line of a run whose call the device refused before its process ended otherwise (``ended``: how,
    in words): the refusal first, as a run that ends through Python says it (re-probe 14, cases 35-37)."""
    refusal = contents.refusal
    call = _refused_call(contents)
    where = Path(str(getattr(args, "model", "") or "the script")).name
    if _contract_run(contents):
        where = f"step {call.step}" if call is not None and call.step else where
    at = ", ".join(part for part in (refusal.get("op") or (call.op if call else ""), call.source if call else "")
                   if part)
    text = refusal.get("explanation") or f"the device refused the call ({refusal.get('message')})"
    remedy = f" ({refusal['remedy']})" if refusal.get("remedy") else ""
    return f"{where}: {text}; then {ended}, but on DirectML the process ends at this call (at {at}){remedy}"


def _refused_call(contents):
    """The journaled call the device refused, if it is among the calls kept (not a dropped warm-up's)."""
    number = contents.refusal.get("call") if contents.refusal else None
    return next((call for call in contents.calls if call.number == number), None) if number is not None else None


def _header_meta(contents) -> dict:
    """The journal header's run facts (its session's ``meta``), or nothing where it ended before the recording."""
    import json

    try:
        meta = json.loads(contents.header)["meta"]
    except (TypeError, ValueError, KeyError):  # no header: it ended before the recording began
        return {}
    return meta if isinstance(meta, dict) else {}


def _contract_run(contents) -> bool:
    return _header_meta(contents).get("run_mode") == "contract"


def recorded_steps_done(contents) -> bool:
    """Whether a script had taken every step of its recorded window (warm-up and recorded steps) before its process
    ended: its recording is whole, whatever ended the process after."""
    window = _header_meta(contents).get("script_window")
    if not isinstance(window, dict) or not contents.steps_taken:
        return False
    return contents.steps_taken >= (window.get("warmup_steps") or 0) + (window.get("steps_requested") or 0)


def _journal_written(journal: Path) -> bool:
    """Whether the child opened its journal (reserved ahead: never empty once opened)."""
    try:
        return journal.stat().st_size > 0
    except OSError:
        return False



def crash_message(how: str, running, user_line: str, last=None) -> str:
    """``the scanned process died of SIGSEGV in aten::flip (float32 [4, 5]; at model.py:12, in net.body)``;
    ``last``: the last call that returned, named where the death came between calls from nowhere the user wrote
    (a native library's damage showing later: a lost DirectML device's heap)."""
    text = (f"the scanned process died of {how}" if how != ABRUPT else
            "the scanned process ended abruptly (abort(), or an exit nothing journaled: a native library's exit())")
    if running is not None:
        where = ", ".join(part for part in (f"at {user_line}" if user_line else "",
                                            f"in {running.module}" if running.module else "") if part)
        text += f" in {running.op}" + _in_brackets(_call_words(running), where)
    elif user_line:
        text += f" at {user_line}, between op calls (native code the script called)"
    elif last is not None:
        text += (f" between op calls, after its last recorded call {last.op}"
                 + _in_brackets(_call_words(last), f"in {last.module}" if last.module else ""))
    return text


def stop_words(contents) -> str:
    """``after its journal stopped at call 2310 (step 18) ...; last journaled: aten::gelu_backward (...)``: the
    journal's folder filled (:attr:`~dmlprof.record.journal.JournalContents.stopped`), so the last call written is
    not where the process ended, and the steps counted are those up to the stop."""
    stop = contents.stopped
    taken = f", {stop.steps_taken} optimizer step(s) journaled" if stop.steps_taken else ""
    text = (f"after its journal stopped at call {stop.calls} (step {stop.step}{taken}): its folder was full, and "
            "nothing after that was journaled")
    last = max((*contents.calls, *contents.running), key=lambda call: call.number, default=None)
    if last is not None:
        text += f"; last journaled: {last.op}" + _in_brackets(_call_words(last), f"in {last.module}" if last.module
                                                               else "")
    return text


def _in_brackets(*parts: str) -> str:
    """`` (float32 [4]; in fc)`` of the parts that say something: a call of no tensor inputs (``aten::empty_strided``)
    has no dtypes nor shapes, and read "(; in OptimizedModule)"."""
    said = "; ".join(part for part in parts if part)
    return f" ({said})" if said else ""


def _call_words(call) -> str:
    """``float32 [4, 5], [5]``: a journaled call's input dtypes and first shapes."""
    dtypes = ",".join(sorted({m[1] for m in call.inputs}))
    shapes = ", ".join(str(list(m[2])) for m in call.inputs[:3]) + (", ..." if len(call.inputs) > 3 else "")
    return " ".join(part for part in (dtypes, shapes) if part)


def crash_location(crash_log: Path) -> str:
    """The innermost line of the user's own code in the dead process's Python stack (faulthandler's dump):
    the first frame, innermost first, outside torch, dmlprof and the standard library."""
    try:
        text = crash_log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    import re

    skip = ("site-packages", "dist-packages", f"{os.sep}dmlprof{os.sep}", "/dmlprof/", f"{os.sep}lib{os.sep}python")
    for match in re.finditer(r'File "([^"]+)", line (\d+)', text.split("\n\n")[-1] if "Current thread" not in text
                             else text[text.index("Current thread"):]):
        path, line = match.groups()
        if any(part in path for part in skip) or path.startswith("<"):
            continue
        return f"{shown_path(path)}:{line}"  # as the recorder names a call's line
    return ""


def session_from_journal(contents, message: str, ended: str, user_line: str, partial: bool = True, refusal=None):
    """The partial session of a journal: its header's facts, each call that returned, and the call the process
    died in (its last row, the failed call). ``ended``: how its process ended ("the scanned process died of
    SIGSEGV"); ``partial``: False for a script that ended itself well (``os._exit(0)``); ``refusal``: the journal's
    refused call (:attr:`~dmlprof.record.journal.JournalContents.refusal`), the session's finding."""
    import json

    from dmlprof.meta import DeviceFailure
    from dmlprof.record.frame import rows_to_frame
    from dmlprof.session import Session

    header = Session.from_dict(json.loads(contents.header))
    evidence: list = []
    rows = []
    calls = list(contents.calls)
    refused_call = _refused_call(contents) if refusal is not None else None
    refused_row = calls.index(refused_call) if refused_call is not None else None
    if refused_row is not None and not refusal.get("went_on"):  # refused before it ran: nothing after it ran
        del calls[refused_row + 1:]
    for call in calls:
        first = len(evidence)
        evidence.extend(call.fallen)
        rows.append(_row(call, first, len(evidence)))
    # (where the journal stopped, the calls still running there are not where the process ended)
    running = contents.running[-1] if contents.running and refusal is None and contents.stopped is None else None
    if running is not None:
        rows.append(_row(running, len(evidence), len(evidence), source=user_line))
    backend = _JournaledBackend((header.meta.device.device or "cpu").split(":")[0])
    ops = rows_to_frame(rows, evidence, backend, refused=frozenset(() if refused_row is None else (refused_row,)))
    times = tuple(round(ns / 1e6, 3) for ns in contents.step_times_ns)  # a model file's measured steps
    held = f"the calls written down before it and the times of its {len(times)} measured step(s)" if times else \
        "the calls written down before it"
    changes = dict(partial=partial, partial_reason=message if partial else None,
                   notes=tuple(header.meta.notes) + (
                       f"{ended}: this session holds {held} (not torch.profiler's events nor its cross-check of "
                       "the times: they are read only when a run ends)",) + ((
                           f"its journal stopped at call {contents.stopped.calls} (step {contents.stopped.step}): "
                           "its folder was full; the calls and steps after it are not in this session",)
                       if contents.stopped is not None else ()))
    if times:
        changes.update(step_times_ms=times, steps=len(times))
    window = header.meta.script_window
    if window is not None and contents.steps_taken:  # a script's steps, counted as it took them
        window = window.after_steps(contents.steps_taken)
        changes.update(script_window=window, steps=window.steps_recorded())
    if running is not None:
        changes.update(failed_op=running.op, failed_source=user_line or None, failed_module=running.module or None)
        on_device = any(m[0] == backend.device_type for m in running.inputs)
        died = ended.replace("the scanned process", "the process", 1)
        if on_device and backend.is_accelerator():
            changes["device_failure"] = DeviceFailure(
                op=running.op, kind="aborts", message=died,
                dtypes=",".join(sorted({m[1] for m in running.inputs})), source=user_line,
                explanation=f"{died} in this call on the device (a native crash in the backend)",
                remedy="move this call to the CPU (or change its arguments), then scan again", observed=True,
                ended_process=True)
    if refusal is not None:
        changes.update(_refusal_finding(refusal, refused_call, len(calls) - refused_row - 1
                                        if refused_row is not None and refusal.get("went_on") else None))
    return Session(meta=header.meta.updated(**changes), ops=ops)


def _refusal_finding(refusal: dict, call, calls_after: Optional[int]) -> dict:
    """The session facts of the journal's refused call (``call``: its journaled call, where it was kept), as a
    run that ends at it through Python has them (dmlprof.runner.assembly)."""
    from dmlprof.meta import DeviceFailure

    op = refusal.get("op") or (call.op if call is not None else "a call")
    source = call.source if call is not None else ""
    module = call.module if call is not None else ""
    return dict(failed_op=op, failed_source=source or None, failed_module=module or None, device_failure=DeviceFailure(
        op=op, kind=refusal.get("kind") or "aborts", message=refusal.get("message") or "",
        dtypes=",".join(sorted({m[1] for m in call.inputs})) if call is not None else "", source=source,
        explanation=refusal.get("explanation") or "", remedy=refusal.get("remedy") or "",
        observed=not refusal.get("predicted"), calls_after=calls_after))


def _row(call, warn_lo: int, warn_hi: int, source: Optional[str] = None) -> tuple:
    """A journaled call as the recorder's raw row (record.frame.rows_to_frame reads it)."""
    return (call.step, call.phase, call.op, call.inputs, call.outputs, call.start_ns, call.elapsed_ns,
            warn_lo, warn_hi, call.module, source if source is not None else call.source, call.thread, call.arguments)


class _JournaledBackend:
    """What judging a journaled call needs of its backend: the device's type and how a fallback is named
    (the child named each fallback already, so evidence items are op names)."""

    fallback_evidence = "fallback warning"

    def __init__(self, device_type: str):
        self.device_type = device_type
        self._accelerator = device_type != "cpu"

    def is_accelerator(self) -> bool:
        return self._accelerator

    @staticmethod
    def fallback_ops_in(item):
        return item


def _note(text: str) -> None:
    try:
        print(f"dmlprof: note: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
