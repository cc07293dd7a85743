"""A launched job's merged report as one value, :class:`RunReport` (schema: docs/distributed.md).

All ranks of a run are one value, as pyinstrument's ``Session.combine`` or
HTA's one ``Trace`` of all ranks: :func:`merged_report` reads a loaded
:class:`~dmlprof.distributed.run_dir.Run` once, through
:mod:`dmlprof.analysis.distributed`, and returns frozen data. The same
renderers that format a :class:`~dmlprof.report.model.Report` format it (the
terminal, JSON, HTML); they only format. Every figure and every sentence they
show (a rank's status, where its step went, the straggler and why) is decided
here. :meth:`RunReport.to_dict` is the JSON report, ``dmlprof-distributed-report``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Mapping, Optional, Tuple

from dmlprof.analysis import distributed as merge
from dmlprof.meta import RunMeta
from dmlprof.plain import plain
from dmlprof.report.notes import Note, run_notes
from dmlprof.report.verdict import Verdict
from dmlprof.units import fmt_ms, fmt_ranks

SCHEMA = "dmlprof-distributed-report"
SCHEMA_VERSION = 1
#: what a merged run is, as every report names it (``session_kind``, beside a Report's SESSION_KINDS)
DISTRIBUTED = "distributed"
#: a rank's status, as every format shows it
OK, PARTIAL, FAILED = "ok", "partial", "failed"
_RANK_FIELDS = ("steps", "step_ms", "compute_ms", "fallback_ms", "cpu_ms", "host_ms", "comm_call_ms", "comm_ms", "other_ms",
                "busy_ms", "comm_calls", "comm_bytes", "fallback_calls", "comm_share", "fallback_share")
#: the parts of a rank's median step its bar shows, in order: (name, the rank's field); cpu and host as the verdicts
#: name them (calls on CPU tensors, the host's bookkeeping)
STEP_PARTS = (("compute", "compute_ms"), ("fallback", "fallback_ms"), ("cpu", "cpu_ms"), ("host", "host_ms"),
              ("comm call", "comm_call_ms"), ("other", "other_ms"))
#: a part of the straggler's extra time is named when it is at least this share of it
_NAMED_EXCESS_SHARE = 0.05


@dataclass(frozen=True)
class RunAbout:
    """The run's facts, as the first rank that saved a session recorded them (the JSON's ``meta``)."""

    model: Optional[str]
    model_name: Optional[str]
    run_mode: Optional[str]
    backend: Optional[str]
    dist_backend: Optional[str]
    torch_version: Optional[str]
    dmlprof_version: Optional[str]
    batch_size: Optional[int]
    timing: Optional[str]
    step_times: str  # what a step time is, in words


@dataclass(frozen=True)
class StepPart:
    """One part of a rank's median step (compute, fallback, cpu, host, comm call, other) and its share of the step."""

    part: str
    share: float  # 0..1 of the median step, capped at 1


@dataclass(frozen=True)
class RankRow:
    """One rank: medians over its steps (None where it has no measured step), and each step."""

    NOT_IN_JSON: ClassVar[tuple] = ("status", "step_parts")

    rank: int
    device: Optional[str]
    partial: bool
    partial_reason: str
    error: str
    steps: Optional[float]
    step_ms: Optional[float]
    compute_ms: Optional[float]
    fallback_ms: Optional[float]
    cpu_ms: Optional[float]  # calls on CPU tensors: the host's work the report points at
    host_ms: Optional[float]  # the host's bookkeeping (scalar calls): not a finding
    comm_call_ms: Optional[float]
    comm_ms: Optional[float]
    other_ms: Optional[float]
    busy_ms: Optional[float]
    comm_calls: Optional[float]
    comm_bytes: Optional[float]
    fallback_calls: Optional[float]
    comm_share: Optional[float]
    fallback_share: Optional[float]
    step_times_ms: Tuple[float, ...]
    comm_times_ms: Tuple[float, ...]
    status: str  # ok, partial, failed
    step_parts: Tuple[StepPart, ...]  # where the median step went (empty without one)


@dataclass(frozen=True)
class StragglerOp:
    """An op (and verdict) the straggler spends longer in per step than the others."""

    op: str
    verdict: str
    rank_ms_per_step: float
    others_ms_per_step: float
    excess_ms_per_step: float


@dataclass(frozen=True)
class Straggler:
    """The rank the others wait for (``rank`` None: none), how much longer it is busy, and why."""

    NOT_IN_JSON: ClassVar[tuple] = ("sentence",)

    rank: Optional[int]
    busy_excess_ms: float
    fallback_excess_ms: float
    cpu_excess_ms: float
    compute_excess_ms: float
    others_comm_excess_ms: float
    threshold_ms: Optional[float]
    ops: Tuple[StragglerOp, ...]
    sentence: str  # the straggler and why, in one sentence (or why none is named), as every format says it


@dataclass(frozen=True)
class VerdictDifference:
    """An op whose verdicts differ between ranks: rank -> {verdict: calls per step} (empty: never called)."""

    op: str
    by_rank: Mapping[int, Mapping[str, float]]


@dataclass(frozen=True)
class CollectiveRow:
    """One rank's calls of one collective op, over all steps."""

    rank: int
    collective: str
    op: str
    calls: int
    bytes: Optional[float]
    call_time_ms: Optional[float]
    comm_time_ms: Optional[float]


@dataclass(frozen=True)
class RunError:
    """A line the run left: a failed rank's, an unreadable session, a file left out (``rank`` None: no rank)."""

    NOT_IN_JSON: ClassVar[tuple] = ("text",)

    rank: Optional[int]
    line: str
    text: str  # ``rank N: what happened``, as every format shows it


#: a merged run's sections, in reading order (their page titles: report/model.py's SECTION_TITLES)
RUN_SECTIONS = ("ranks", "straggler", "verdict_differences", "collectives", "facts")


@dataclass(frozen=True)
class RunReport:
    """Every rank of a launched job as one report (``dmlprof report RUN_DIR``), computed once."""

    NOT_IN_JSON: ClassVar[tuple] = ("verdict",)

    schema: str
    schema_version: int
    title: str
    facts: Tuple[Tuple[str, str], ...]  # the run in a few (label, value) lines, as every format shows them first
    run_dir: str
    world_size: int
    ranks_found: Tuple[int, ...]
    missing_ranks: Tuple[int, ...]
    meta: RunAbout
    ranks: Tuple[RankRow, ...]
    straggler: Straggler
    verdict_differences: Tuple[VerdictDifference, ...]
    collectives: Tuple[CollectiveRow, ...]
    errors: Tuple[RunError, ...]
    verdict: Verdict  # what the first screen says, and its tone

    #: every renderer asks a report what it is; a merged run is one kind, whatever its ranks ran
    kind: ClassVar[str] = DISTRIBUTED
    session_kind: ClassVar[str] = DISTRIBUTED

    @property
    def sections(self) -> Tuple[str, ...]:
        """The merged run's sections, in reading order (every renderer shows those it has)."""
        return RUN_SECTIONS

    @property
    def notes(self) -> Tuple[Note, ...]:
        """What every format leads with: each rank that failed, each rank file left out (the JSON report holds
        the same sentences under ``errors``)."""
        return run_notes(self.errors)

    def to_dict(self) -> dict:
        """The JSON report (docs/distributed.md, ``dmlprof-distributed-report``)."""
        return plain(self)


# -- building it -------------------------------------------------------------------------------
def merged_report(run) -> RunReport:
    """Every rank of ``run`` (a loaded run folder) as one :class:`RunReport`, each figure computed once."""
    ops, collectives, steps, ranks = run.frames()
    split = merge.step_split(ops, collectives, steps)
    summary = merge.rank_summary(split)
    about = _about(run.first_meta(), measured=bool(len(steps)))
    by_rank = {int(r["rank"]): r for r in summary.to_dict(orient="records")}
    straggler = _straggler(merge.straggler(summary, ops))
    errors = _errors(run)
    return RunReport(
        schema=SCHEMA, schema_version=SCHEMA_VERSION,
        title=f"dmlprof distributed run of {about.model_name or about.model}",
        facts=_facts(run, about), run_dir=str(run.folder), world_size=run.world_size,
        ranks_found=tuple(sorted(run.sessions)), missing_ranks=tuple(run.missing_ranks), meta=about,
        ranks=tuple(_rank_row(r, by_rank.get(int(r["rank"])), split) for r in ranks.to_dict(orient="records")),
        straggler=straggler,
        verdict_differences=tuple(VerdictDifference(str(r["op"]), {int(k): dict(v) for k, v in r["by_rank"].items()})
                                  for r in merge.verdict_differences(ops).to_dict(orient="records")),
        collectives=tuple(_collective(r) for r in merge.collective_summary(collectives).to_dict(orient="records")),
        errors=errors, verdict=_verdict(straggler, run))


def _about(meta: RunMeta, measured: bool) -> RunAbout:
    return RunAbout(
        model=meta.model, model_name=meta.model_name, run_mode=meta.run_mode,
        backend=meta.device.backend, dist_backend=meta.distributed.backend if meta.distributed else None,
        torch_version=meta.environment.torch_version, dmlprof_version=meta.environment.dmlprof_version,
        batch_size=meta.batch_size, timing=meta.recording.timing,
        step_times="measured per step (wall, device synchronised)" if measured
        else "script: from the end of one optimizer step to the end of the next (the first recorded step has none)")


def _facts(run, about: RunAbout) -> tuple:
    """The run in a few (label, value) lines, as every renderer shows them first."""
    missing = f"; missing: {fmt_ranks(run.missing_ranks)}" if run.missing_ranks else ""
    facts = [("ranks", f"{len(run.sessions)} of {run.world_size} saved a session{missing}"),
             ("device", f"{about.backend}, process group {about.dist_backend or 'unknown'}"),
             ("torch", about.torch_version), ("run", about.run_mode), ("steps", about.step_times),
             ("folder", str(run.folder))]
    return tuple(fact for fact in facts if fact[1] is not None)


def _rank_row(info: dict, medians, split) -> RankRow:
    figures = {key: None if medians is None else _number(medians.get(key)) for key in _RANK_FIELDS}
    mine = split[split["rank"] == info["rank"]]
    error, partial = str(info.get("error") or ""), bool(info.get("partial"))
    return RankRow(
        rank=int(info["rank"]), device=info.get("device"), partial=partial,
        partial_reason=str(info.get("partial_reason") or ""), error=error, **figures,
        step_times_ms=_rounded(mine["step_ms"]),
        comm_times_ms=_rounded(mine["comm_ms"].fillna(0)) if "comm_ms" in mine else (),
        status=FAILED if error else PARTIAL if partial else OK, step_parts=_step_parts(figures))


def _rounded(times) -> tuple:
    return tuple(round(float(t), 3) for t in times)


def _step_parts(figures: dict) -> tuple:
    """Each part of the median step as a share of it (what the rank's stacked bar shows)."""
    step = figures["step_ms"] or 0
    if not step:
        return ()
    return tuple(StepPart(name, min(1.0, (figures[key] or 0) / step)) for name, key in STEP_PARTS if figures[key])


def _straggler(found: dict) -> Straggler:
    ops = tuple(StragglerOp(str(o["op"]), str(o["verdict"]), *(float(o[key]) for key in (
        "rank_ms_per_step", "others_ms_per_step", "excess_ms_per_step"))) for o in found["ops"])
    figures = {key: found[key] for key in ("rank", "busy_excess_ms", "fallback_excess_ms", "cpu_excess_ms",
                                           "compute_excess_ms", "others_comm_excess_ms", "threshold_ms")}
    return Straggler(**plain(figures), ops=ops, sentence=_straggler_sentence(found))


def _straggler_sentence(found: dict) -> str:
    """The straggler and why, in one sentence (or why none is named)."""
    if found["rank"] is None:
        if found["threshold_ms"] is None:
            return "Straggler: none (fewer than two ranks with measured steps)."
        return (f"Straggler: none. No rank is busy {fmt_ms(found['threshold_ms'])} (10% of a step) longer than "
                f"the others (largest difference {fmt_ms(found['busy_excess_ms'])}).")
    parts = [f"{fmt_ms(found[key])} {what}" for key, what in (
        ("fallback_excess_ms", "in calls that fell back to the CPU"),
        ("cpu_excess_ms", "in calls on CPU tensors (host work)"),
        ("compute_excess_ms", "in device compute"))
        if found[key] >= _NAMED_EXCESS_SHARE * found["busy_excess_ms"] and found[key] > 0]
    why = "; ".join(parts) or "spread over many calls"
    waited = found["others_comm_excess_ms"]
    if waited > 0:
        waits = (f"the others, who wait for it in their collectives ({fmt_ms(waited)} more comm per step than "
                 "it has)")
    else:  # the others spent no more time in collectives than it did: they are not seen waiting for it
        waits = ("the others; their collectives took no longer than its own"
                 + (f" ({fmt_ms(-waited)} less per step)" if waited < 0 else "")
                 + ", so they are not seen waiting for it")
    return (f"Straggler: rank {found['rank']}, busy {fmt_ms(found['busy_excess_ms'])} longer per step than "
            f"{waits}. Its extra time per step: {why}.")


def _collective(r: dict) -> CollectiveRow:
    return CollectiveRow(int(r["rank"]), str(r["collective"]), str(r["op"]), *plain(
        [r["calls"], r["bytes"], r["call_time_ms"], r["comm_time_ms"]]))


def _errors(run) -> tuple:
    lines = ([(r, line) for r, line in sorted(run.errors.items())]
             + [(r, f"session unreadable: {why}") for r, why in sorted(run.unreadable.items())]
             + [(None, line) for line in run.ignored])
    return tuple(RunError(rank, str(line), _error_text(rank, str(line))) for rank, line in lines)


def _error_text(rank, line: str) -> str:
    """``rank N: what happened`` (the line as the rank wrote it, with its rank)."""
    return line if line.startswith("rank ") else f"rank {rank}: {line}"


def _verdict(straggler: Straggler, run) -> Verdict:
    """The first thing every format says of the run: a rank that failed or is missing, else the straggler."""
    if run.errors or run.unreadable or run.missing_ranks:
        saved = f"{len(run.sessions)} of {run.world_size} ranks saved a session"
        lost = f"; missing: {fmt_ranks(run.missing_ranks)}" if run.missing_ranks else ""
        return Verdict("bad", f"{saved}{lost}.", straggler.sentence)
    return Verdict("warn" if straggler.rank is not None else "good", straggler.sentence)


def _number(value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if value != value else value
