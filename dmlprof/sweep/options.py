"""Parsing what a sweep is asked to do: batch sizes, memory budgets, the --auto start."""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from dmlprof.errors import UsageError

#: the largest batch size or byte count accepted (torch sizes and RLIMIT_AS are 64-bit)
INT64_MAX = 2**63 - 1

# Defaults of ``dmlprof sweep`` (here, torch- and pandas-free, so that ``--help`` can show them).
DEFAULT_STEPS = 6
DEFAULT_WARMUP = 1
DEFAULT_MAX_BATCH_SIZE = 4096
#: --auto stops before a size that would likely end past this many seconds in all
DEFAULT_TIME_BUDGET_S = 150.0
DEFAULT_CHILD_TIMEOUT_S = 600.0
#: default memory budget as a share of the device's (or the machine's) memory
DEFAULT_BUDGET_FRACTION = 0.70

_UNITS = {
    "": 1, "b": 1,
    "k": 1024, "kib": 1024, "kb": 1000,
    "m": 1024**2, "mib": 1024**2, "mb": 1000**2,
    "g": 1024**3, "gib": 1024**3, "gb": 1000**3,
    "t": 1024**4, "tib": 1024**4, "tb": 1000**4,
}
_SIZE = re.compile(r"^\s*(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[a-zA-Z]*)\s*$")


def parse_batch_sizes(text: str) -> List[int]:
    """``"8,16,32"`` -> ``[8, 16, 32]`` (sorted, duplicates dropped); UsageError otherwise."""
    sizes = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            size = int(part)
        except ValueError:
            raise UsageError(f"--batch-sizes: {part!r} is not a whole number (example: --batch-sizes 8,16,32)") from None
        if size < 1:
            raise UsageError(f"--batch-sizes: {size} is not a batch size (each must be at least 1)")
        if size > INT64_MAX:
            raise UsageError(f"--batch-sizes: {part[:30]} is beyond any batch size (at most {INT64_MAX})")
        sizes.add(size)
    if not sizes:
        raise UsageError("--batch-sizes is empty (example: --batch-sizes 8,16,32)")
    return sorted(sizes)


def parse_bytes(text: str, option: str = "size") -> int:
    """``"8GiB"``, ``"512MB"``, ``"1.5g"``, ``"1048576"`` -> bytes (binary K/M/G, decimal KB/MB/GB)."""
    match = _SIZE.match(str(text))
    unit = match.group("unit").lower() if match else None
    if not match or unit not in _UNITS:
        raise UsageError(f"{option}: {text!r} is not a size (examples: 8GiB, 512MB, 1073741824)")
    number = float(match.group("number"))
    if not math.isfinite(number) or number * _UNITS[unit] > INT64_MAX:
        raise UsageError(f"{option}: {text!r} is larger than any memory (at most {INT64_MAX} bytes)")
    value = int(number * _UNITS[unit])
    if value < 1:
        raise UsageError(f"{option}: {text!r} is not a positive size")
    return value


@dataclass(frozen=True)
class MemoryBudget:
    """A budget in bytes, or a share of the device's total memory (known only once a child reports it)."""

    bytes: Optional[int] = None
    fraction: Optional[float] = None

    def resolve(self, total_bytes: Optional[int]) -> Optional[int]:
        """The budget in bytes, or ``None`` when it is a share of an unknown total."""
        if self.bytes is not None:
            return self.bytes
        if self.fraction is not None and total_bytes:
            return int(self.fraction * total_bytes)
        return None

    def describe(self, total_bytes: Optional[int], what: str = "device memory") -> str:
        from dmlprof.units import fmt_bytes

        if self.bytes is not None:
            return f"{fmt_bytes(self.bytes)} (--memory-budget)"
        if total_bytes:
            return f"{fmt_bytes(self.resolve(total_bytes))} = {100 * self.fraction:.0f}% of {fmt_bytes(total_bytes)} {what}"
        return f"none: {100 * self.fraction:.0f}% of {what}, but the backend does not report its total (use --memory-budget BYTES)"


def parse_memory_budget(text: Optional[str]) -> MemoryBudget:
    """``None`` -> 70 % of device memory; ``"0.5"`` or ``"50%"`` -> a share; ``"8GiB"``/bytes -> bytes.

    Plain numbers up to 1 are shares; larger plain numbers are bytes.
    """
    if text is None:
        return MemoryBudget(fraction=DEFAULT_BUDGET_FRACTION)
    raw = str(text).strip()
    if raw.endswith("%"):
        try:
            share = float(raw[:-1]) / 100.0
        except ValueError:
            raise UsageError(f"--memory-budget: {text!r} is not a percentage") from None
        return _fraction(share, text)
    try:
        number = float(raw)
    except ValueError:
        return MemoryBudget(bytes=parse_bytes(raw, "--memory-budget"))
    if not math.isfinite(number) or number > INT64_MAX:
        raise UsageError(f"--memory-budget: {text!r} is not a finite size (a share like 0.5, or bytes like 8GiB)")
    if number <= 1.0:
        return _fraction(number, text)
    if number != int(number):
        raise UsageError(f"--memory-budget: {text!r} is neither a share (0..1) nor a whole number of bytes")
    return MemoryBudget(bytes=int(number))


def _fraction(share: float, text) -> MemoryBudget:
    if not 0.0 < share <= 1.0:
        raise UsageError(f"--memory-budget: {text!r} is not a share between 0 and 1 (or 0% and 100%)")
    return MemoryBudget(fraction=share)


def file_batch_size(path) -> Optional[int]:
    """The model file's ``BATCH_SIZE`` when it is a plain integer literal (read, not run)."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    found = None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "BATCH_SIZE" for t in targets) and node.value is not None:
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            found = value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None
    return found


def auto_start_size(path, start: Optional[int] = None) -> int:
    """Where ``--auto`` starts: ``start`` if given, else the file's BATCH_SIZE // 4, else 1."""
    if start is not None:
        if start < 1:
            raise UsageError("--start-batch-size must be at least 1")
        return start
    declared = file_batch_size(path)
    return max(1, declared // 4) if declared else 1


def auto_sizes(start: int, max_size: int) -> List[int]:
    """The sizes ``--auto`` may try: start, 2*start, ... up to max_size."""
    if max_size < start:
        raise UsageError(f"--max-batch-size {max_size} is below the starting size {start}")
    sizes = []
    size = start
    while size <= max_size:
        sizes.append(size)
        size *= 2
    return sizes
