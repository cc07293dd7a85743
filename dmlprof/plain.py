"""``plain(value)``: any value dmlprof writes, as data JSON can hold (one helper for every writer).

Records (dataclasses) become dicts, tuples lists, numpy scalars Python's, and
non-finite floats ``None`` (NaN and infinities are not JSON). A record's
``NOT_IN_JSON`` fields are left out; ``None`` fields are kept.
"""
from __future__ import annotations

import math
from dataclasses import fields
from typing import Mapping


def plain(value):
    """``value`` as plain JSON data (see the module docstring)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        skip = getattr(value, "NOT_IN_JSON", ())
        return {f.name: plain(getattr(value, f.name)) for f in fields(value) if f.name not in skip}
    if hasattr(value, "item") and not isinstance(value, bytes):  # numpy and torch scalars
        try:
            return plain(value.item())
        except (TypeError, ValueError):
            return str(value)
    return value
