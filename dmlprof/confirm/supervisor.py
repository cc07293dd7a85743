"""Runs samples on real torch-directml in workers and decides what each result is worth (torch-free).

Two users: the truth table's generator (tools/realdml: truth_worker.py samples, forked by measure_truth.py)
and ``scan --confirm`` (:mod:`dmlprof.confirm.worker`: a user's own call signatures, one subprocess per
worker); a fake worker in tests/unit/test_truth_supervisor.py. A worker
yields events: ``{"probe": bool, "after": "start"|"clean"|"recorded"}`` (a device health probe: a tiny
known computation, checked), ``{"adapter": name}``, ``{"start": key}``, ``{"phase": ...}``, ``{"call": op,
"dtypes": [...]}``, ``{"done": key, ...result}``; then it ends, and ``exit_status()`` says how.

Rules (each one is there because a shared process lied before):
- a worker is discarded after any abort or failed probe; the next sample starts in a fresh one, on a
  healthy device (its start probe passed);
- a sample after which the probe failed ("unhealthy") is re-run alone in a fresh worker; if the probe fails
  after it again, the sample is recorded as ``device_lost`` at the call it was making: the finding is that
  this sample removes the device, not that its op fails; its calls are not kept (a lost device fails
  every call, each under its own op's name);
- a sample that ended its worker after other samples had run there is re-run alone in a fresh worker
  (heap corruption from earlier work ends a process at a later, innocent call), recorded-first so the
  call is named; only an abort of a sample running alone is the sample's, and only if it also ends a
  fresh worker that runs it without the recorder first (else ``aborts_under_recorder``: dmlprof's
  recorder or verifier ended it, not DirectML);
- every result says how it was measured: ``measured = {"generator", "adapter", "probe_after",
  "alone", "attempts"}``; ``probe_after`` is True only where a passing probe followed both device runs.
"""
from __future__ import annotations

import json

#: the generator's version, kept with every sample and table entry it measured (1: the first table,
#: recorded under dmlprof's recorder in one shared process, with all-ones incoming gradients)
GENERATOR = 2
#: a fresh worker whose device fails its first probe is tried this many times before measuring stops
START_ATTEMPTS = 2


def last_error_line(text: str) -> str:
    """The line torch-directml's fatal check printed (glog ``F...] message``), else the last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("[F") and "] " in line:
            return line.split("] ", 1)[1][:400]
    return lines[-1][:400] if lines else ""


class _Journaled(dict):
    """Results, each also appended to a JSON-lines journal as it is decided (a long measurement that is
    stopped keeps what it measured)."""

    def __init__(self, journal):
        super().__init__()
        self.journal = journal

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        if self.journal is not None:
            with open(self.journal, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"key": key, "result": value}, sort_keys=True) + "\n")


class Supervisor:
    def __init__(self, spawn, env: dict, log=print, journal=None):
        self.spawn, self.env, self.log, self.journal = spawn, env, log, journal
        self.adapter = ""
        self.workers_started = 0
        #: key -> its abort under the recorder, alone: confirmed by a run nothing intercepts first (the
        #: recorder's verifier runs CPU kernels on the device's outputs, and those can end a process too)
        self.confirming: dict = {}

    def measure(self, keys: list, alone_from_start=()) -> dict:
        """``alone_from_start``: keys known to end their process, run alone at once (saves a worker)."""
        results: dict = _Journaled(self.journal)
        queue = list(dict.fromkeys(keys))
        alone: set = set(alone_from_start)  # keys to run alone in a fresh worker
        attempts: dict = {}
        failed_starts = 0
        while queue:
            if queue[0] in self.confirming:
                batch, order = [queue[0]], "clean-first"
            elif queue[0] in alone:
                batch, order = [queue[0]], "recorded-first"
            else:
                batch, order = [k for k in queue if k not in alone], "clean-first"
            before = len(results)
            ran = self._run_worker(batch, order, results, alone, attempts)
            if ran is None:  # the device failed its probe before any sample
                failed_starts += 1
                if failed_starts >= START_ATTEMPTS:
                    for key in queue:
                        results[key] = {"outcome": "not_measured", "message": "the device failed its health probe "
                                        "in a fresh worker, before any sample"}
                    self.log("stopped: the device is unhealthy in fresh workers")
                    break
                continue
            failed_starts = 0
            queue = [key for key in queue if key not in results]
            if len(results) // 25 != before // 25:
                self.log(f"{len(results)}/{len(keys)} samples")
        return dict(results)

    def _run_worker(self, batch: list, order: str, results: dict, alone: set, attempts: dict):
        """Runs one worker over ``batch``; None when its device failed the start probe."""
        worker = self.spawn(batch, self.env, order)
        self.workers_started += 1
        current, last_call, phase, position, started = None, None, None, 0, False
        recorded_outcome: dict = {}
        for event in worker.events():
            if "adapter" in event:
                self.adapter = event["adapter"] or self.adapter
            elif "probe" in event and event.get("after") == "start":
                started = bool(event["probe"])
            elif "start" in event:
                current, last_call, phase, recorded_outcome = event["start"], None, None, {}
                position += 1
                attempts[current] = attempts.get(current, 0) + 1
            elif "phase" in event:
                phase = event["phase"]
            elif "call" in event:
                last_call = event
            elif "recorded" in event:
                recorded_outcome = event["recorded"]
            elif "done" in event:
                key = event.pop("done")
                self._finish(key, event, last_call, batch, position, results, alone, attempts)
                current = None
            elif event.get("silent") and current is not None:
                results[current] = {"outcome": "hangs", **self._failed_at(last_call),
                                    "measured": self._measured(False, position == 1, attempts[current])}
                current = None
        status = worker.exit_status()
        if not started and position == 0:
            return None
        if current is not None and current not in results:  # the worker ended inside this sample
            self._ended(current, order, phase, position, status, worker, last_call, recorded_outcome, results,
                        alone, attempts)
        elif current is None and position == 0 and batch and batch[0] not in results and started:
            results[batch[0]] = {"outcome": "harness_error", "message": f"worker ended before a sample: {status}"}
        return position

    def _ended(self, key, order, phase, position, status, worker, last_call, recorded_outcome, results, alone,
               attempts) -> None:
        """A worker ended inside sample ``key``: run it again alone, or decide."""
        if key not in alone:  # after earlier work: heap corruption from another sample ends innocent ones
            alone.add(key)
            self.log(f"{key}: worker ended ({status}) at sample {position} of the worker; again, alone")
            return
        abort = {"outcome": "aborts", "signal": status, "message": last_error_line(getattr(worker, "stderr_tail", "")),
                 **self._failed_at(last_call), "measured": self._measured(False, True, attempts[key])}
        if key in self.confirming:  # the confirming run: the run nothing intercepts went first
            named = self.confirming.pop(key)
            if phase == "clean":
                results[key] = {**named, "measured": abort["measured"],
                                "note": "ended the process alone, under the recorder and without it"}
            else:
                results[key] = {**named, "outcome": "aborts_under_recorder", "measured": abort["measured"],
                                "note": "ended the process only in the recorded run (dmlprof's recorder and "
                                        "verifier): the run nothing intercepted completed"}
            return
        if order == "recorded-first" and phase == "recorded":  # named; now confirm it without the recorder
            self.confirming[key] = abort
            return
        if phase == "clean":  # its recorded run had finished: what it said is all that is known
            abort.update(failed_op=recorded_outcome.get("failed_op"),
                         failed_dtypes=recorded_outcome.get("failed_dtypes") or "",
                         note="ended the process in the run nothing intercepted; under the recorder: "
                              f"{recorded_outcome.get('error') or 'ran'}")
        results[key] = abort

    def _finish(self, key, result, last_call, batch, position, results, alone, attempts) -> None:
        if result.get("outcome") == "unhealthy":
            if key in alone:  # removed the device again, alone in a fresh worker: its own doing
                results[key] = {"outcome": "device_lost", "message": result.get("message", ""),
                                "error": result.get("error"),
                                **self._failed_at(last_call, result.get("failed_op")),
                                "measured": self._measured(False, True, attempts[key])}
            else:
                alone.add(key)
                self.log(f"{key}: the device failed its probe after this sample; again, alone in a fresh worker")
            return
        if key in self.confirming:  # ended the process under the recorder alone once, then ran
            self.confirming.pop(key)
            result["note"] = "ended the process once, alone under the recorder; ran when measured again"
        elif key in alone and attempts[key] > 1:
            result["note"] = "re-run alone in a fresh worker (the first run ended its worker or the device)"
        result["measured"] = self._measured(True, position == 1, attempts[key])
        results[key] = result

    def _measured(self, probe_after: bool, alone: bool, attempts: int) -> dict:
        return {"generator": GENERATOR, "adapter": self.adapter, "probe_after": probe_after, "alone": alone,
                "attempts": attempts}

    @staticmethod
    def _failed_at(last_call, failed_op=None) -> dict:
        return {"failed_op": failed_op or (last_call or {}).get("call"),
                "failed_dtypes": ",".join((last_call or {}).get("dtypes", []))}
