"""A run's facts as they are gathered: typed where they are produced (issue 35).

:class:`RunFacts` is the builder every producer writes to (the runner, a rank of a job, the sweep's driver
and child): RunMeta's own field names, checked as they are set; a backend's part comes as one record,
:class:`BackendFacts`. Adding a run fact is a field of :class:`~dmlprof.meta.RunMeta` and one producer line.
"""
from __future__ import annotations

import datetime as _dt
import platform as _platform
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from dmlprof.meta import LIVE, PREDICTED, Device, Environment, Prediction, RunMeta
from dmlprof.version import __version__


@dataclass(frozen=True)
class BackendFacts:
    """What a backend says of a run on it (``Backend.run_meta()``): its device, what its times mean where the
    backend knows better than the runner, and, for a stand-in device, the prediction (whose presence makes
    the session's kind ``predicted``: the kind comes from the backend, never from a string it writes)."""

    device: Device
    timing: Optional[str] = None
    prediction: Optional[Prediction] = None

    @property
    def kind(self) -> str:
        return PREDICTED if self.prediction is not None else LIVE


class RunFacts:
    """A run's facts as its producers find them (the runner, a rank, the sweep), typed as they are set.

    Each write names a field of :class:`RunMeta` (``set``) or of its recording (``set_recording``) or
    prediction (``set_prediction``), so a misspelled fact fails where it is written, not as a key nobody
    reads; reads are the typed fields (``facts.partial``, ``facts.recording.sync``). :meth:`build` types
    the whole through the session file's own reader, so a run's RunMeta is the one its saved file loads as.
    """

    def __init__(self, meta: Optional[RunMeta] = None, **fields):
        self._meta = replace(meta if meta is not None else RunMeta(), **_tupled(fields))

    def set(self, **fields) -> None:
        self._meta = replace(self._meta, **_tupled(fields))

    def set_recording(self, **fields) -> None:
        self.set(recording=replace(self._meta.recording, **_tupled(fields)))

    def set_prediction(self, **fields) -> None:
        self.set(prediction=replace(self._meta.prediction or Prediction(), **_tupled(fields)))

    def note(self, *texts: str) -> None:
        self.set(notes=self._meta.notes + tuple(texts))

    def copy(self) -> "RunFacts":
        return RunFacts(self._meta)

    def __getattr__(self, name: str):
        if name.startswith("_"):  # (never the builder's own state: no recursion before __init__ ran)
            raise AttributeError(name)
        return getattr(self._meta, name)

    def build(self) -> RunMeta:
        """The RunMeta a Session holds: as a session file of these facts reads back."""
        return RunMeta.from_file(self._meta.to_file())


def _tupled(fields: dict) -> dict:
    # a producer's lists are a record's tuples (frozen, as the file's reader makes them)
    return {name: tuple(value) if isinstance(value, list) else value for name, value in fields.items()}


def run_facts(model, *, kind: str, run_mode: str, torch_version: str) -> RunFacts:
    """The facts every run starts with (live, predicted or sweep); the runner and the sweep driver add what
    they measure."""
    model = Path(model)
    environment = Environment(dmlprof_version=__version__, torch_version=torch_version,
                              python_version=_platform.python_version(), platform=_platform.platform())
    return RunFacts(environment=environment, kind=kind, run_mode=run_mode, model=str(model), model_name=model.stem,
                    started_at=_dt.datetime.now().isoformat(timespec="seconds"), partial=False)
