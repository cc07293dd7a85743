"""Known replacements for ops that fall back (grown by the replacements issue).

``advice_for(op)`` returns a one-line tip for an op, or ``None``.
"""
from __future__ import annotations

from typing import Optional

# op (dispatcher spelling) -> how to avoid it. Only advice that is true today.
_ADVICE = {
    "aten::lerp.Scalar_out": "Adam/AdamW's lerp falls back once per parameter; keep your optimizer "
    "(do not recreate it each epoch: that resets its state) and see dmlprof.replacements when available",
}


def advice_for(op: str) -> Optional[str]:
    return _ADVICE.get(op)


def advice_for_hotspot(ops) -> Optional[str]:
    for op in ops:
        tip = advice_for(op)
        if tip:
            return tip
    return None
