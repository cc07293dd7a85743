"""What the doctor's two halves pass between them: the :class:`Snapshot` of a machine and the :class:`Check` row.

Plain data, so that :mod:`dmlprof.doctor.gather` can read a real machine into
it and the tests can build a simulated one by hand, and every check in
:mod:`~dmlprof.doctor.packages`, :mod:`~dmlprof.doctor.devices` and
:mod:`~dmlprof.doctor.settings` reads only it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

STATUSES = ("ok", "warn", "fail", "info")


@dataclass(frozen=True)
class Check:
    """One row of the doctor's table."""

    name: str
    status: str  # one of STATUSES
    detail: str
    remedy: str = ""
    #: a failure here means dmlprof cannot be used as asked
    blocking: bool = False

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")


@dataclass
class TorchFacts:
    """What the imported torch says about itself and its devices (no device is touched to learn it)."""

    version: str
    cuda_version: Optional[str] = None
    hip_version: Optional[str] = None
    cuda_available: bool = False
    cuda_devices: List[str] = field(default_factory=list)
    mps_built: bool = False
    mps_available: bool = False
    xpu_present: bool = False  # torch.xpu exists (torch >= 2.4)
    xpu_available: bool = False
    xpu_devices: List[str] = field(default_factory=list)


@dataclass
class DirectMLProbe:
    """torch-directml's answer from a child process (it may crash, so never in ours)."""

    available: bool
    reason: str = ""
    adapters: List[dict] = field(default_factory=list)  # {"index", "name", "float64", "memory_used_mb"}


@dataclass
class Snapshot:
    """Everything the checks look at, gathered once. Build one by hand in tests."""

    platform: str = "linux"  # sys.platform
    platform_release: str = ""  # platform.release(): "microsoft" in it means WSL
    python_version: Tuple[int, int, int] = (3, 11, 0)
    packages: Dict[str, Optional[str]] = field(default_factory=dict)  # distribution -> version, None if absent
    requires: Dict[str, List[str]] = field(default_factory=dict)  # distribution -> its Requires-Dist
    env: Dict[str, str] = field(default_factory=dict)  # gather.WATCHED_ENV variables that are set
    paths: Dict[str, bool] = field(default_factory=dict)  # gather.WSL_PATHS -> exists
    torch: Optional[TorchFacts] = None
    torch_error: str = ""  # why torch did not import, when it did not
    directml_adapter_possible: bool = False
    directml_adapter_reason: str = ""
    directml_probe: Optional[DirectMLProbe] = None  # None: not asked (see gather_snapshot)
    device: str = "auto"  # what the user will pass to scan --device
    files: Tuple[str, ...] = ()  # source files the user asked us to read
    source_findings: Dict[str, List[str]] = field(default_factory=dict)  # setting -> ["file:line", ...]
    predictor_available: bool = False  # `dmlprof scan --target dml` works in this version
    measured_table_problem: str = ""  # why the shipped table of DirectML's measured results cannot be read

    @property
    def directml_installed(self) -> bool:
        return bool(self.packages.get("torch-directml"))

    @property
    def directml_os(self) -> bool:
        """Windows or Linux: where torch-directml installs at all (on Linux it needs WSL2 to find an adapter)."""
        return self.platform == "win32" or self.platform.startswith("linux")

    @property
    def wsl(self) -> bool:
        return self.platform.startswith("linux") and "microsoft" in self.platform_release.lower()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def listing(items: Sequence[str], limit: int = 4) -> str:
    """A row's list of names, cut to ``limit`` (``"a, b, c, d and 3 more"``): a row stays one line in the table."""
    shown = list(items[:limit])
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")
