"""Number types for argparse: a bad value is a one-line usage error (exit 2), never a traceback later.

``type=at_least(1)`` and friends check the value where it is parsed, so NaN,
infinities, negative counts and values past what the machine can represent
(int64) never reach the code that would choke on them.
"""
from __future__ import annotations

import argparse
import math

#: the largest count anything in dmlprof passes on (torch sizes are int64)
INT64_MAX = 2**63 - 1


def at_least(low: int, high: int = INT64_MAX):
    """A whole number from ``low`` to ``high``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is too small (at least {low})")
        if value > high:
            raise argparse.ArgumentTypeError(f"{text} is too large (at most {high})")
        return value

    parse.__name__ = f"whole number >= {low}"
    return parse


def seconds(allow_zero: bool):
    """A finite number of seconds, positive (or also 0 when ``allow_zero``: 'no limit')."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text} is not a finite number of seconds"
                                             + (" (0 means no limit)" if allow_zero else ""))
        if value < 0 or (value == 0 and not allow_zero):
            raise argparse.ArgumentTypeError(f"{text} must be {'0 or more' if allow_zero else 'more than 0'} seconds")
        return value

    parse.__name__ = "seconds"
    return parse


def port_number(text: str) -> int:
    """A TCP port: 0 (pick a free one) to 65535."""
    return at_least(0, 65535)(text)
