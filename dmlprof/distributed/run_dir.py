"""A run folder read back: every rank's session, the ranks that left none, their error lines.

``RUN_DIR/rank<N>.session.json`` per rank (plain JSON sessions), and, when
``dmlprof scan --nproc`` ran the job, ``RUN_DIR/rank<N>.error.json`` for ranks
that failed. :meth:`Run.frames` turns them into the frames the merge
(:mod:`dmlprof.analysis.distributed`) reads.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

import pandas as pd

from dmlprof.distributed.annotate import columns_frame
from dmlprof.record.collectives import COLLECTIVE_COLUMNS
from dmlprof.distributed.env import MAX_WORLD_SIZE
from dmlprof.errors import SessionFileError
from dmlprof.meta import Distributed, RunMeta

_SESSION = re.compile(r"^rank(\d+)\.session\.json$")
_ERROR = re.compile(r"^rank(\d+)\.error\.json$")
#: an error line read from a rank's error file is cut to this many characters
ERROR_LINE_CHARS = 2_000


def is_run_dir(path) -> bool:
    """Whether ``path`` is a folder holding rank sessions (what ``dmlprof report`` merges)."""
    path = Path(path)
    return path.is_dir() and any(_SESSION.match(p.name) for p in path.iterdir())


@dataclass
class Run:
    """The sessions of one distributed run, by rank."""

    folder: Path
    sessions: Dict[int, object] = field(default_factory=dict)
    errors: Dict[int, str] = field(default_factory=dict)
    unreadable: Dict[int, str] = field(default_factory=dict)
    #: files that look like a rank's but are not read, each with why
    ignored: List[str] = field(default_factory=list)

    @property
    def world_size(self) -> int:
        # each value is bounded where it is read: a session's by its check, a file's rank by load_run
        sizes = [_place(s).world_size or 0 for s in self.sessions.values()]
        return max(sizes + [max(self.sessions, default=-1) + 1, max(self.errors, default=-1) + 1])

    @property
    def missing_ranks(self) -> List[int]:
        return [r for r in range(self.world_size) if r not in self.sessions]

    def first_meta(self) -> RunMeta:
        return self.sessions[min(self.sessions)].meta if self.sessions else RunMeta()

    def frames(self) -> tuple:
        """(ops, collectives, steps, ranks): every rank's frames with a ``rank`` column."""
        ops, calls, steps, ranks = [], [], [], []
        for rank, session in sorted(self.sessions.items()):
            ops.append(session.ops.assign(rank=rank))
            table = columns_frame(session.collectives, COLLECTIVE_COLUMNS)
            calls.append(table.assign(rank=rank))
            # the recorded steps: the ones whose calls and collectives the session holds
            meta, place = session.meta, _place(session)
            measured = list(meta.recorded_step_times_ms or meta.step_times_ms)
            steps.append(pd.DataFrame({"rank": rank, "step": range(len(measured)), "step_ms": measured}))
            ranks.append({"rank": rank, "partial": meta.partial, "partial_reason": meta.partial_reason or "",
                          "run_mode": meta.run_mode, "device": meta.device.device,
                          "local_rank": place.local_rank, "dist_backend": place.backend,
                          "error": self.errors.get(rank, "")})
        frame = pd.concat(ops, ignore_index=True) if ops else pd.DataFrame(columns=["rank"])
        table = pd.concat(calls, ignore_index=True) if calls else pd.DataFrame(columns=list(COLLECTIVE_COLUMNS) + ["rank"])
        measured = pd.concat(steps, ignore_index=True) if steps else pd.DataFrame(columns=["rank", "step", "step_ms"])
        return frame, table, measured, pd.DataFrame(ranks)


def load_run(folder) -> Run:
    """Read every rank's session and error line in ``folder``; raises SessionFileError when it holds none.

    A rank file numbered past :data:`MAX_WORLD_SIZE` is unreadable (a forged name must not make the merge
    list billions of ranks), and sessions of another run than most of the folder's are left out, saying so.
    """
    from dmlprof.session import Session

    folder = Path(folder)
    if not folder.is_dir():
        raise SessionFileError(f"no run folder at {folder}")
    run = Run(folder)
    for path in sorted(folder.iterdir()):
        session_match, error_match = _SESSION.match(path.name), _ERROR.match(path.name)
        match = session_match or error_match
        if match and int(match.group(1)) >= MAX_WORLD_SIZE:
            run.ignored.append(f"rank file {path.name[:60]} ignored: a rank past the most dmlprof merges "
                               f"({MAX_WORLD_SIZE - 1:,})")
        elif session_match:
            rank = int(session_match.group(1))
            try:
                run.sessions[rank] = Session.load(path)
            except SessionFileError as exc:
                run.unreadable[rank] = exc.one_line()
        elif error_match:
            try:
                run.errors[int(error_match.group(1))] = str(json.loads(path.read_text(encoding="utf-8"))["line"])[
                    :ERROR_LINE_CHARS]
            except (OSError, ValueError, KeyError, TypeError):
                continue
    if not run.sessions:
        raise SessionFileError(f"{folder} holds no readable rank session (rank<N>.session.json)")
    _leave_out_other_runs(run)
    return run


def _leave_out_other_runs(run: Run) -> None:
    """Keep the sessions of the run most of them belong to (by ``meta.distributed.run_id``; ties: the lowest
    rank's); the others become unreadable ranks, saying which run they came from."""
    ids = {rank: _place(session).run_id or "" for rank, session in run.sessions.items()}
    known = [run_id for run_id in ids.values() if run_id]
    if len(set(known)) < 2:
        return  # one run (sessions written before run ids existed match any)
    counts = {run_id: known.count(run_id) for run_id in known}
    chosen = max(counts, key=lambda run_id: (counts[run_id], -min(r for r, i in ids.items() if i == run_id)))
    for rank, run_id in sorted(ids.items()):
        if run_id and run_id != chosen:
            del run.sessions[rank]
            run.unreadable[rank] = (f"a session of another run (run id {run_id[:36]}, the others' is {chosen[:36]}): "
                                    "left out of the merge")


def _place(session) -> Distributed:
    """A rank session's place in its job (an empty record for a session that has none)."""
    return session.meta.distributed or Distributed()
