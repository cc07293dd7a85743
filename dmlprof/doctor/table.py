"""The doctor's table: which checks run and in what order (:data:`CHECKS`), the exit status they give,
and the table as text or JSON.

Running the checks turns one that raises into a failed row, so a bug in one check never hides
the others: the point of the command is to keep going on a broken set-up.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Callable, List, Optional, Sequence, Tuple

from dmlprof.doctor.devices import (check_cuda, check_directml_adapter_possible, check_directml_adapters,
                                    check_directml_float64, check_mps, check_scan_device, check_xpu)
from dmlprof.doctor.packages import (check_dependencies, check_directml_package, check_directml_torch_pin,
                                     check_exact_predictions, check_measured_table, check_python, check_torch,
                                     check_torchvision)
from dmlprof.doctor.settings import (check_autocast, check_bf16, check_dml_visible_devices, check_float64,
                                     check_inference_mode, check_placebo_env, check_with_stack)
from dmlprof.doctor.snapshot import STATUSES, Check, Snapshot
from dmlprof.doctor.source_calls import check_source_calls

CHECKS: Tuple[Callable[[Snapshot], Optional[Check]], ...] = (
    check_python,
    check_torch,
    check_dependencies,
    check_directml_package,
    check_directml_torch_pin,
    check_torchvision,
    check_exact_predictions,
    check_measured_table,
    check_directml_adapter_possible,
    check_directml_adapters,
    check_directml_float64,
    check_cuda,
    check_mps,
    check_xpu,
    check_scan_device,
    check_with_stack,
    check_inference_mode,
    check_bf16,
    check_autocast,
    check_float64,
    check_source_calls,
    check_placebo_env,
    check_dml_visible_devices,
)


def run_checks(snap: Snapshot, checks: Sequence[Callable] = CHECKS) -> List[Check]:
    """Every check that has something to say about ``snap``, in table order.

    A check that raises is reported as a failed row rather than ending the
    doctor: the point of the command is to keep going on a broken set-up.
    """
    rows = []
    for check in checks:
        try:
            row = check(snap)
        except Exception as exc:  # a bug in one check must not hide the others
            row = Check(check.__name__.replace("check_", ""), "fail", f"the check itself failed: {exc!r}")
        # a check may give several rows (one per kind of call found in the user's files)
        rows.extend(row if isinstance(row, list) else [row] if row is not None else [])
    return rows


def exit_code(rows: Sequence[Check], strict: bool = False) -> int:
    """1 when a blocking check failed (or, with ``strict``, any check failed); else 0."""
    failed = [r for r in rows if r.status == "fail"]
    if any(r.blocking for r in failed) or (strict and failed):
        return 1
    return 0


#: from this width on, the remedy has room for a column of its own
WIDE = 160


def render_table(rows: Sequence[Check], width: Optional[int] = None) -> str:
    """The checks as a text table plus a one-line tally, at most ``width`` columns wide (default: the
    terminal's, as a scan's report): where the whole table does not fit, each remedy moves to a line
    under its row, and the details wrap."""
    from dmlprof.render.format import WRAP, TableSpec, terminal_width, wrap_line

    width = terminal_width(width)
    # a remedy squeezed into a fourth column beside the detail wraps into fragments: below its row it reads whole
    spec = TableSpec([(r.status.upper(), r.name, r.detail, r.remedy or "-") for r in rows],
                     ["status", "check", "detail", "remedy"], {"check": WRAP, "detail": WRAP, "remedy": WRAP},
                     {}, details=("remedy",), details_below=width < WIDE)
    table = spec.render(width)
    return f"{table}\n\n" + "\n".join(wrap_line(tally(rows), width))


def tally(rows: Sequence[Check]) -> str:
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES}
    return ", ".join(f"{counts[s]} {s}" for s in STATUSES)


def to_json(rows: Sequence[Check], snap: Snapshot, strict: bool = False) -> str:
    """The checks, the exit status they give, and the snapshot they were made from."""
    from dmlprof.version import __version__

    return json.dumps({
        "dmlprof_version": __version__,
        "exit_code": exit_code(rows, strict),
        "checks": [dataclasses.asdict(r) for r in rows],
        "snapshot": snap.to_dict(),
    }, indent=2)
