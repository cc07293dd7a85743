"""The truth generator's supervisor lives in the package now (``dmlprof.confirm.supervisor``), where
``scan --confirm`` replays a user's calls under the same rules; this name stays for the tools and tests."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's dmlprof

from dmlprof.confirm.supervisor import GENERATOR, START_ATTEMPTS, Supervisor, last_error_line  # noqa: E402,F401
