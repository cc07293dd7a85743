"""The Session: what a scan found, as a value that saves, loads and renders.

A Session is typed run metadata (:class:`~dmlprof.meta.RunMeta`, whose
``kind`` says live, predicted or sweep) plus one row per op call (a pandas
DataFrame, :mod:`dmlprof.schema`). It is written as plain JSON, never pickled,
so a file someone sends you cannot run code when you open it. It renders
nothing itself: :func:`dmlprof.report.build_report` and the renderers do.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pandas as pd

from dmlprof.errors import SessionFileError
from dmlprof.meta import RunMeta, run_meta
from dmlprof.plain import plain
from dmlprof.schema import empty_ops_frame, typed_ops_frame

FORMAT = "dmlprof-session"
FORMAT_VERSION = 1
SUFFIX = ".session.json"


@dataclass
class Session:
    """``meta``: the run's facts (a RunMeta; a dict of its flat keys is typed on the way in);
    ``ops``: one row per op call; ``profiler_ops``: torch.profiler's own per-op totals for the
    same steps; ``extras``: results other commands attach (a sweep, a verification, a replace
    comparison)."""

    meta: RunMeta
    ops: pd.DataFrame = field(default_factory=empty_ops_frame)
    profiler_ops: pd.DataFrame = field(default_factory=pd.DataFrame)
    extras: dict = field(default_factory=dict)

    def __post_init__(self):
        # The one place run metadata gets its types, for live, predicted and sweep runs alike.
        self.meta = run_meta(self.meta)

    # -- persistence ---------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "meta": self.meta.to_dict(),
            "ops": _frame_to_columns(self.ops),
            "profiler_ops": _frame_to_columns(self.profiler_ops),
            "extras": self.extras,
        }

    def save(self, path) -> Path:
        """Write the session as UTF-8 JSON; returns the path written."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(plain(self.to_dict()), separators=(",", ":"), allow_nan=False), encoding="utf-8")
        tmp.replace(path)
        return path

    @classmethod
    def from_dict(cls, data: dict) -> "Session":
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise SessionFileError("not a dmlprof session file")
        if data.get("format_version", 0) > FORMAT_VERSION:
            raise SessionFileError(
                f"session format {data.get('format_version')} is newer than this dmlprof understands",
                remedy="upgrade dmlprof",
            )
        ops = typed_ops_frame(pd.DataFrame(data.get("ops") or {}))
        profiler_ops = pd.DataFrame(data.get("profiler_ops") or {})
        return cls(meta=data.get("meta") or {}, ops=ops, profiler_ops=profiler_ops, extras=data.get("extras") or {})

    @classmethod
    def load(cls, path) -> "Session":
        """Read a session file written by :meth:`save`."""
        path = Path(path)
        if not path.is_file():
            raise SessionFileError(f"no session file at {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SessionFileError(f"{path} is not a dmlprof session file ({type(exc).__name__})") from None
        return cls.from_dict(data)

    # -- conveniences --------------------------------------------------------
    @property
    def partial(self) -> bool:
        return self.meta.partial

    @property
    def kind(self) -> str:
        """``live``, ``predicted`` or ``sweep``: what made this session."""
        return self.meta.kind

    def default_filename(self) -> str:
        """``<model>-<backend>[-sweep]-<yyyymmddThhmmss>.session.json``."""
        return self.meta.file_stem() + SUFFIX


def _frame_to_columns(frame: Optional[pd.DataFrame]) -> dict:
    if frame is None or frame.empty and not len(frame.columns):
        return {}
    return {column: frame[column].astype(object).where(frame[column].notna(), None).tolist() for column in frame.columns}
