"""Runs truth-table samples on real torch-directml, one JSON line per event on stdout.

    python truth_worker.py KEYS_FILE    (one key per line, from truth_samples.keys(); run by measure_truth.py)

Each sample first runs on the CPU (a sample the CPU refuses is not DirectML's to fail), then on the
DirectML device under dmlprof's own recorder and verifier: every aten call below autograd, its
verdict (device, or fallback from torch-directml's own warning), and each device call recomputed on
the CPU from the device's inputs (the largest error per call). Before every call the worker prints
which call it is about to make: torch-directml ends the process on some calls (a fatal check,
SIGABRT; SIGSEGV), and the parent then knows the call that did it.

Events: ``{"start": key}``, ``{"call": op, "dtypes": [...]}``, ``{"done": key, ...}``.
"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))  # this checkout's dmlprof

import torch  # noqa: E402

import truth_samples  # noqa: E402
from dmlprof.backends.dml import DmlBackend  # noqa: E402
from dmlprof.record.frame import op_name, rows_to_frame  # noqa: E402
from dmlprof.record.recorder import Recorder  # noqa: E402
from dmlprof.verify import Verifier  # noqa: E402

_out = sys.stdout


def emit(event: dict) -> None:
    _out.write(json.dumps(event) + "\n")
    _out.flush()


def _dtypes(inputs, device_type: str) -> list:
    return sorted({str(m[1]).replace("torch.", "") for m in inputs if m[0] == device_type})


def _describe(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:400] if lines else ''}"


def run_one(key: str, backend) -> dict:
    sample = truth_samples.sample(key)
    try:
        sample.run("cpu")
    except Exception as exc:
        return {"outcome": "cpu_raises", "message": _describe(exc)}
    device_type = backend.device_type
    recorder = Recorder(backend, sync=False, verifier=Verifier(backend))
    recorder.refuse = None  # measure what the device does, unguarded
    recorder.before_call = lambda func, inputs: emit({"call": op_name(func), "dtypes": _dtypes(inputs, device_type)})
    recorder.phase = "forward"
    error = None
    with recorder:
        try:
            sample.run(backend.device())
        except Exception as exc:
            error = exc
    frame = rows_to_frame(recorder.rows, recorder.evidence, backend)
    calls = [[op, verdict, fallback, dtypes] for op, verdict, fallback, dtypes in
             zip(frame["op"], frame["verdict"], frame["fallback_ops"], frame["dtypes"])]
    result = {"outcome": "ok", "calls": calls,
              # each with its call's dtypes as the frame names them (the key wrong results are kept under)
              "divergent": [{**{k: d[k] for k in ("op", "max_abs_error", "max_rel_error", "mismatched", "numel",
                                                  "input_dtypes", "input_shapes", "reason")},
                             "dtypes": calls[d["seq"]][3] if d["seq"] < len(calls) else ""}
                            for d in recorder.verifier.divergent]}
    if error is not None:
        failed = frame["op"].iloc[recorder.failed_row] if recorder.failed_row is not None else None
        result.update(outcome="raises", message=_describe(error), failed_op=failed,
                      failed_dtypes=calls[recorder.failed_row][3] if recorder.failed_row is not None else "")
    return result


def main(keys: list) -> int:
    torch.set_warn_always(True)
    warnings.simplefilter("always")
    backend = DmlBackend(0)
    backend.prepare()
    for key in keys:
        emit({"start": key})
        try:
            result = run_one(key, backend)
        except Exception as exc:  # the harness's own trouble with this sample: said, not hidden
            result = {"outcome": "harness_error", "message": _describe(exc)}
        emit({"done": key, **result})
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).read_text(encoding="utf-8").split()))
