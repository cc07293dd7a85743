"""Checks that a measured table holds no entry measured after a device loss (torch-free; CI runs it).

A removed DirectML device (DXGI_ERROR_DEVICE_REMOVED, "Unknown error -2005270523") fails every later call,
each under its own op's name: an entry built from such calls blames its op for an earlier call's doing.
The generator (truth_supervisor.py) never keeps such a call; this check holds the shipped file to it:

- no entry's messages carry the device-removed error;
- an entry measured by the clean generator (``measured.generator >= 2``) has every completed sample it
  counts followed by a passing health probe (``probed == samples``) and none measured after a device loss.
"""
from __future__ import annotations

#: how a removed device shows in torch-directml's errors (HRESULT 0x887A0005 as a signed int, and its names)
DEVICE_REMOVED_WORDS = ("-2005270523", "0x887a0005", "dxgi_error_device_removed", "device removed", "device_removed")


def device_removed(text: str) -> bool:
    lowered = (text or "").lower()
    return any(word in lowered for word in DEVICE_REMOVED_WORDS)


def problems(document: dict) -> list:
    """One line per entry the check refuses; empty when the table is clean."""
    found = []
    for section in ("ops", "float64_adapter_ops"):
        for op, by_dtype in (document.get(section) or {}).items():
            for dtypes, entry in by_dtype.items():
                where = f"{section} {op} ({dtypes})"
                if any(device_removed(message) for message in entry.get("messages") or ()):
                    found.append(f"{where}: a message says the device was removed (DXGI_ERROR_DEVICE_REMOVED): "
                                 "measured on a lost device")
                measured = entry.get("measured") or {}
                if measured.get("generator", 1) < 2:
                    continue
                if measured.get("probed", 0) < measured.get("samples", 0):
                    found.append(f"{where}: {measured.get('samples', 0) - measured.get('probed', 0)} of its samples "
                                 "were measured without a passing device health probe after them")
                if measured.get("after_device_loss", 0):
                    found.append(f"{where}: {measured['after_device_loss']} of its samples were measured after a "
                                 "device loss")
    return found
