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
from types import MappingProxyType
from typing import Mapping, Optional

import pandas as pd

from dmlprof.errors import SessionFileError
from dmlprof.files import write_atomic, write_new
from dmlprof.meta import RunMeta, meta_from_flat, run_meta
from dmlprof.plain import plain
from dmlprof.schema import FALLBACK, empty_ops_frame, typed_ops_frame
from dmlprof.session_check import MAX_NAME_CHARS, MAX_TEXT_CHARS, NAME_COLUMNS, check_session_dict

FORMAT = "dmlprof-session"
#: 2: the op frame's verdicts are final (``host`` for the host's bookkeeping, where format 1 held ``cpu``),
#: and ``meta`` holds RunMeta's fields under their own names, each sub-document an object of its fields
#: (:meth:`RunMeta.to_file`; format 1 spread them out under other names).
#: A format 1 file loads upgraded: its frame goes through the function every recording does
#: (:func:`dmlprof.schema.typed_ops_frame`) and its meta through :func:`dmlprof.meta.meta_from_flat`,
#: so old and new files read the same.
FORMAT_VERSION = 2
SUFFIX = ".session.json"
#: what other commands attach to a session: each a member of the Session, under ``extras`` in the file
EXTRAS_MEMBERS = ("verify", "replace", "sweep", "collectives")


@dataclass
class Session:
    """``meta``: the run's facts (a RunMeta; a dict of its flat keys is typed on the way in);
    ``ops``: one row per op call; ``profiler_ops``: torch.profiler's own per-op totals for the
    same steps; then what other commands attach, each a member of its own, checked against its schema
    once, where a file is loaded (:data:`dmlprof.session_check.EXTRAS`): ``verify`` (docs/verify.md),
    ``replace`` (docs/replacements.md), ``sweep`` (docs/sweep_schema.md) and a rank's ``collectives``
    (docs/distributed.md). The file holds them under ``extras`` (:attr:`extras`, read-only); documents
    there that this dmlprof does not know survive a load and a save in ``other_extras``."""

    meta: RunMeta
    ops: pd.DataFrame = field(default_factory=empty_ops_frame)
    profiler_ops: pd.DataFrame = field(default_factory=pd.DataFrame)
    verify: Optional[dict] = None
    replace: Optional[dict] = None
    sweep: Optional[dict] = None
    collectives: Optional[dict] = None
    other_extras: Mapping = field(default_factory=dict)

    @property
    def extras(self) -> Mapping:
        """What other commands attached, as the session file's ``extras`` holds it (a read-only view)."""
        attached = {name: getattr(self, name) for name in EXTRAS_MEMBERS if getattr(self, name) is not None}
        return MappingProxyType({**self.other_extras, **attached})

    def __post_init__(self):
        # The one place run metadata gets its types, for live, predicted and sweep runs alike.
        self.meta = run_meta(self.meta)

    def __repr__(self) -> str:
        """One line: what ran where, and how many calls fell back (a notebook shows the report beside it)."""
        run = self.meta
        where = f"{run.kind} session of {run.title_name} on {run.device.backend or 'an unknown device'}"
        if run.sweep is not None or not len(self.ops):
            rows = self.sweep.get("rows") if isinstance(self.sweep, dict) else None
            return f"<dmlprof {where}: " + (f"{len(rows)} batch sizes>" if isinstance(rows, list) else "no op calls>")
        fell_back = int((self.ops["verdict"] == FALLBACK).sum())
        return f"<dmlprof {where}: {len(self.ops):,} op calls, {fell_back:,} fell back to the CPU>"

    # -- persistence ---------------------------------------------------------
    def to_dict(self) -> dict:
        """The session file's content; strings longer than a session may hold are cut (see ``clip``)."""
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "meta": clip(self.meta.to_file()),
            "ops": _frame_to_columns(self.ops, names=NAME_COLUMNS),
            "profiler_ops": _frame_to_columns(self.profiler_ops, names=("op",)),
            "extras": clip(dict(self.extras)),
        }

    def save(self, path, *, new: bool = False) -> Path:
        """Write the session as UTF-8 JSON, whole or not at all; returns the path written.

        ``new=True`` never replaces a file: when ``path`` exists the session
        goes to ``<name>-2.session.json`` (then -3, ...), so scans started in
        the same second keep one file each. Raises ``OSError``.
        """
        text = self.to_json()
        return write_new(path, text, suffix=SUFFIX) if new else write_atomic(path, text)

    def to_json(self) -> str:
        """The session file's text (compact JSON; no NaN or infinity, which JSON lacks)."""
        data = self.to_dict()
        data["meta"], data["extras"] = plain(data["meta"]), plain(data["extras"])
        try:  # the frames' columns are plain Python values already: no per-value walk (millions of calls)
            return json.dumps(data, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            return json.dumps(plain(data), separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict) -> "Session":
        """A Session from the parsed JSON of a session file; :class:`SessionFileError` if it is not one.

        Everything the reports read is checked first (types, column lengths,
        finite numbers), so a damaged or hostile file fails here, in one line,
        and never inside a renderer.
        """
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise SessionFileError("not a dmlprof session file")
        if data.get("format_version") == 1:  # its meta upgrades here, before the check of format 2's structure
            data = {**data, "meta": meta_from_flat(data.get("meta"))}
        check_session_dict(data, FORMAT_VERSION)
        ops = typed_ops_frame(pd.DataFrame(data.get("ops") or {}))  # verdicts final: a format 1 file upgrades here
        profiler_ops = pd.DataFrame(data.get("profiler_ops") or {})
        extras = data.get("extras") or {}
        return cls(meta=RunMeta.from_file(data.get("meta") or {}), ops=ops, profiler_ops=profiler_ops,
                   **{name: extras.get(name) for name in EXTRAS_MEMBERS},
                   other_extras={key: value for key, value in extras.items() if key not in EXTRAS_MEMBERS})

    @classmethod
    def load(cls, path) -> "Session":
        """Read a session file written by :meth:`save`; :class:`SessionFileError` for anything else."""
        path = Path(path)
        if not path.is_file():
            raise SessionFileError(f"no session file at {path}")
        try:
            data = json.loads(path.read_bytes().decode("utf-8"), parse_constant=_reject_constant)
        except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
            raise SessionFileError(f"{path} is not a dmlprof session file ({_why(exc)})") from None
        except RecursionError:
            raise SessionFileError(f"{path} is not a dmlprof session file (JSON nested too deeply)") from None
        except OSError as exc:
            raise SessionFileError(f"cannot read {path}: {exc.strerror or exc}") from None
        try:
            return cls.from_dict(data)
        except SessionFileError as exc:
            if str(exc).startswith(str(path)):
                raise
            raise SessionFileError(f"{path}: {exc}", remedy=exc.remedy) from None

    # -- conveniences --------------------------------------------------------
    @property
    def partial(self) -> bool:
        return self.meta.partial

    @property
    def kind(self) -> str:
        """``live``, ``predicted`` or ``sweep``: what made this session."""
        return self.meta.kind

    def default_filename(self) -> str:
        """``<model>-<backend>[-sweep]-<yyyymmddThhmmss>.session.json``, short enough for any file system."""
        return self.meta.file_stem() + SUFFIX


def _reject_constant(name: str):
    # json accepts NaN and Infinity by default; a session never holds them (save writes null).
    raise ValueError(f"{name} is not a number a session can hold")


def _why(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _frame_to_columns(frame: Optional[pd.DataFrame], names=()) -> dict:
    if frame is None or frame.empty and not len(frame.columns):
        return {}
    return {column: _clip_column(frame[column].astype(object).where(frame[column].notna(), None).tolist(),
                                 MAX_NAME_CHARS if column in names else MAX_TEXT_CHARS)
            for column in frame.columns}


def clip(value, limit: int = MAX_TEXT_CHARS):
    """``value`` with every string cut to ``limit`` characters (the most a loaded session may hold, see
    :mod:`dmlprof.session_check`: what dmlprof saves always loads again). A cut string ends with ``...``."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit - 3] + "..."
    if isinstance(value, dict):
        return {key: clip(item, limit) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [clip(item, limit) for item in value]
    return value


def _clip_column(values: list, limit: int) -> list:
    # a million short strings are measured in one pass and left as they are
    if max((len(v) for v in values if isinstance(v, str)), default=0) <= limit:
        return values
    return [clip(v, limit) for v in values]
