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
        if row is not None:
            rows.append(row)
    return rows


def exit_code(rows: Sequence[Check], strict: bool = False) -> int:
    """1 when a blocking check failed (or, with ``strict``, any check failed); else 0."""
    failed = [r for r in rows if r.status == "fail"]
    if any(r.blocking for r in failed) or (strict and failed):
        return 1
    return 0


def render_table(rows: Sequence[Check]) -> str:
    """The checks as a text table plus a one-line tally."""
    from tabulate import tabulate

    table = tabulate(
        [(r.status.upper(), r.name, r.detail, r.remedy) for r in rows],
        headers=["status", "check", "detail", "remedy"],
        maxcolwidths=[None, 22, 56, 48],
    )
    return f"{table}\n\n{tally(rows)}"


def tally(rows: Sequence[Check]) -> str:
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES}
    return ", ".join(f"{counts[s]} {s}" for s in STATUSES)


def to_json(rows: Sequence[Check], snap: Snapshot, strict: bool = False) -> str:
    """The checks, the exit status they give, and the snapshot they were made from."""
    from dmlprof import __version__

    return json.dumps({
        "dmlprof_version": __version__,
        "exit_code": exit_code(rows, strict),
        "checks": [dataclasses.asdict(r) for r in rows],
        "snapshot": snap.to_dict(),
    }, indent=2)
