"""The report as a value: frozen dataclasses, computed once, formatted by every renderer.

Units live in names (``_ms``, ``_bytes``, ``share`` 0..1). Nothing here is
formatted for a reader; :mod:`dmlprof.render` does that. :meth:`Report.to_dict`
is the JSON report (docs/report_schema.md), or, for a sweep, the sweep
document (docs/sweep_schema.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Optional, Tuple

from dmlprof.meta import BLOCK, SCRIPT, SWEEP, RunMeta, WarningRecord
from dmlprof.plain import plain
from dmlprof.report.replace import ReplaceComparison
from dmlprof.report.sweep import SweepReport
from dmlprof.report.targets import title
from dmlprof.report.verdict import Verdict, coverage_tone
from dmlprof.report.verification import Verification
from dmlprof.schema import HOST
from dmlprof.units import fmt_ms

#: backends whose "device" times are host-CPU times: they say nothing of a real GPU's speed
HOST_TIMED_BACKENDS = ("emulated-dml",)
#: the JSON report's version (docs/report_schema.md)
SCHEMA_VERSION = 1
#: the sweep document's format and version (docs/sweep_schema.md)
SWEEP_FORMAT = "dmlprof-sweep"
SWEEP_SCHEMA_VERSION = 1
#: What made a session, as every report names it (``Report.session_kind``), and the title's words for it
SCAN, PREDICTION, SCRIPT_SCAN, BLOCK_SCAN, SWEEP_RUN, REPLACE, VERIFY = (
    "scan", "prediction", "script", "block", "sweep", "replace", "verify")
SESSION_KINDS = (SCAN, PREDICTION, SCRIPT_SCAN, BLOCK_SCAN, SWEEP_RUN, REPLACE, VERIFY)
_TITLE_WORDS = {SCAN: "live scan", PREDICTION: "predicted scan", SCRIPT_SCAN: "script scan",
                BLOCK_SCAN: "profile() block scan", SWEEP_RUN: "batch-size sweep", REPLACE: "live scan",
                VERIFY: "verified scan"}
#: what a title adds after the name, for the kinds whose name alone does not say what was compared
_TITLE_TAILS = {REPLACE: ", before and after dmlprof's replacements", VERIFY: ", results checked against the CPU"}
#: run facts the JSON report's ``meta`` carries, in this order
#: a report's sections, in the one reading order every renderer follows (:attr:`Report.sections` leaves out
#: those with nothing to show and puts what the session is about first); a renderer is a table of formatters
#: by these names, and shows those it has. A new section: its field on the Report (filled in build.py), its
#: name here and its page title below, its formatter in render/terminal.py and its macro in
#: render/templates/sections.html.j2 (the page's data for it is the field itself unless html.py says more).
SECTION_ORDER = ("device_failure", "replace", "charts", "verify", "hotspots", "timeline", "transfers", "host_calls",
                 "ops", "phases", "modules", "host_bookkeeping", "recording", "warnings", "sweep", "run")
#: each section as the page's contents bar names it (a merged run's too: report/run.py's RUN_SECTIONS)
SECTION_TITLES = {"ranks": "Ranks", "straggler": "Straggler", "verdict_differences": "Verdicts by rank",
                  "collectives": "Collectives", "facts": "Run details", "verify": "Verification",
                  "replace": "With replacements", "charts": "Where the time went", "hotspots": "Fallback hotspots",
                  "timeline": "Timeline", "transfers": "Copies & syncs", "phases": "Phases", "modules": "Modules",
                  "ops": "All ops", "sweep": "Batch-size sweep", "run": "Run details"}
#: the session extras the JSON report shows as a section of their own, so not again under ``extras``
_EXTRAS_WITH_A_SECTION = ("verify",)
REPORT_META_KEYS = (
    "dmlprof_version", "torch_version", "python_version", "platform", "backend", "device", "device_name",
    "backend_versions", "mode", "run_mode", "model", "model_name", "batch_size", "warmup_steps", "steps",
    "steps_requested", "optimizer", "sync", "timing", "target", "table_version", "table_torch_version", "partial", "partial_reason",
    "started_at", "duration_s", "step_times_ms", "memory", "profiler_check", "unknown_ops",
    "recording", "steady_state", "structure_step_ms", "notes", "device_time_check", "verify", "failed_op",
    "failed_source", "failed_module", "device_unused", "remapped_from", "device_failure", "device_float64", "device_emulation",
)
#: run facts the sweep document's ``meta`` carries
SWEEP_META_KEYS = ("dmlprof_version", "torch_version", "python_version", "platform", "backend", "device",
                   "device_name", "model", "model_name", "started_at", "duration_s", "partial", "memory_budget",
                   "memory_total_bytes", "sweep_settings", "sweep_notes")


@dataclass(frozen=True)
class Summary:
    """Headline numbers (the JSON report's ``summary``)."""

    op_calls: int
    device_calls: int
    fallback_calls: int
    cpu_calls: int  # calls on CPU tensors that are findings (host bookkeeping left out)
    host_bookkeeping_calls: int  # calls on CPU scalars only: the host keeping its books, not findings
    inner_fallback_calls: int  # calls the backend sent to the CPU, each inner call of a composite counted
    # shares leave host bookkeeping out of both sides
    device_call_share: float
    fallback_call_share: float
    time_ms: float
    device_time_ms_on_device: Optional[float]  # kernel time the profiler joined to calls (CUDA)
    device_op_time_ms: float
    device_time_share: float
    fallback_time_ms: float
    fallback_time_share: float
    cpu_time_ms: float
    host_bookkeeping_time_ms: float
    bytes_moved: int
    distinct_ops: int
    distinct_fallback_ops: int
    #: calls sent to the device that it refused (raised, or would end the process; the code caught it): no device call
    refused_calls: int = 0


@dataclass(frozen=True)
class Fix:
    """A known replacement for an op that fell back."""

    op: str
    advice: str


@dataclass(frozen=True)
class Hotspot:
    """Calls of one op that fell back, with where they came from (most time first) and the fix."""

    NOT_IN_JSON: ClassVar[tuple] = ("fixes",)

    op: str
    inner_ops: Tuple[str, ...]  # what the backend sent to the CPU, for a composite
    calls: int
    inner_calls: int
    time_ms: float
    share: float
    bytes_moved: int
    phases: Tuple[str, ...]
    modules: Tuple[str, ...]
    sources: Tuple[str, ...]
    replacement: Optional[str]  # the first fix, or None
    fixes: Tuple[Fix, ...]  # one per inner op with a known replacement
    #: a prediction's calls of this op that came after a value it made up (:attr:`Report.guess` says which)
    guessed: bool = False
    #: where only the torch this ran on reaches the op, and DirectML users' torch 2.4.1 does not: why (one line)
    torch_flag: Optional[str] = None
    #: a DirectML stand-in's session (predicted, emulated): the calls' round trip on a real adapter, ms per step,
    #: modelled (:attr:`Report.fallback_costs` says on which adapter class's constants)
    round_trip_ms: Optional[float] = None
    #: device calls per step its replacement runs in place of it (None: its replacement's calls are not counted)
    added_calls: Optional[float] = None
    #: what fixing it saves a step, ms, modelled: the round trip less the added calls' cost (None: not counted)
    saving_ms: Optional[float] = None

    @property
    def priced(self) -> Optional[str]:
        """Its modelled round trip and what fixing it saves, in words (None: not priced); every format says this."""
        if self.round_trip_ms is None:
            return None
        fixed = ("its replacement's device calls not counted" if self.saving_ms is None
                 else fixing_text("it", self.saving_ms, self.added_calls))
        return f"round trip ~{fmt_ms(self.round_trip_ms)}/step; {fixed}"


@dataclass(frozen=True)
class FallbackCosts:
    """How a DirectML stand-in's fallbacks were priced (dmlprof.analysis.fallback_cost): on which adapter class's
    measured constants, and the step's totals."""

    adapter: str  # the adapter class, in words
    measured: str  # where and when its constants were measured
    cpu_kernel: str  # where the CPU kernel's time came from, in words
    round_trip_ms: float  # every fallback's round trip, per step
    #: what fixing the hotspots with a counted replacement saves a step, and those hotspots' round trip
    saving_ms: Optional[float]
    priced_round_trip_ms: float
    unpriced_ops: Tuple[str, ...]  # hotspots whose replacement's calls are not counted (or that have none)

    @property
    def headline(self) -> str:
        saving = "" if self.saving_ms is None else f"; {fixing_text('them', self.saving_ms)}"
        return f"modelled on a real adapter: fallbacks cost ~{fmt_ms(self.round_trip_ms)}/step{saving}"


def fixing_text(what: str, saving_ms: float, added_calls: Optional[float] = None) -> str:
    """``fixing it saves ~9.3 ms/step (328 device calls added)``; a replacement of many small calls can cost
    more than the round trip it removes, said as a cost rather than as a negative saving."""
    calls = "" if added_calls is None else f"{added_calls:,.0f} "
    if saving_ms < 0:
        whose = "its replacement's" if what == "it" else "their replacements'"
        return f"fixing {what} costs ~{fmt_ms(-saving_ms)}/step more ({whose} {calls}device calls)"
    return f"fixing {what} saves ~{fmt_ms(saving_ms)}/step" + (f" ({calls}device calls added)" if calls else "")


@dataclass(frozen=True)
class OpRow:
    """One (op, verdict, phase) group; ``module``/``source``: where it spent most time."""

    op: str
    verdict: str
    phase: str
    calls: int
    time_ms: float
    device_time_ms: Optional[float]
    share: float
    bytes_moved: int
    fallback_ops: Tuple[str, ...]
    module: str
    source: str
    guessed: bool = False  # some of its calls came after a value the prediction made up


@dataclass(frozen=True)
class PhaseRow:
    phase: str
    calls: int
    time_ms: float
    share: float
    fallback_calls: int
    fallback_time_ms: float
    cpu_calls: int


@dataclass(frozen=True)
class RangeRow:
    """A ``record_function`` range of the scanned code: the calls inside it (nested ranges' included)."""

    range: str
    occurrences: int  # how many times the run entered it
    calls: int
    time_ms: float
    fallback_calls: int
    fallback_time_ms: float
    fallback_ops: Tuple[str, ...]  # the inner ops that fell back inside it, most calls first


@dataclass(frozen=True)
class ModuleRow:
    """A module path; a parent's row includes its children's calls."""

    module: str
    depth: int
    calls: int
    time_ms: float
    device_share: float  # of this module's work time (its time less host bookkeeping)
    fallback_calls: int
    fallback_time_ms: float
    host_bookkeeping_time_ms: float = 0.0  # calls on CPU scalars only: left out of the shares
    class_name: Optional[str] = None  # what the module is (``BasicBlock``), where the recorder kept it

    @property
    def work_time_ms(self) -> float:
        """The module's time less the host's bookkeeping: what its shares are of."""
        return max(0.0, self.time_ms - self.host_bookkeeping_time_ms)

    @property
    def fallback_share(self) -> float:
        return self.fallback_time_ms / self.work_time_ms if self.work_time_ms else 0.0

    @property
    def cpu_share(self) -> float:
        return max(0.0, 1.0 - self.device_share - self.fallback_share) if self.work_time_ms else 0.0

    @property
    def parent(self) -> str:
        return self.module.rsplit(".", 1)[0] if "." in self.module else ""

    @property
    def label(self) -> str:
        """The path's last part, with the module's class where it says more: ``0 (BasicBlock)``."""
        name = self.module.rsplit(".", 1)[-1]
        return f"{name} ({self.class_name})" if self.class_name and self.class_name != name else name


@dataclass(frozen=True)
class TransferRow:
    """Host<->device copies and syncs that are not fallbacks, per op, direction and source line."""

    op: str
    transfer: str  # h2d, d2h, sync
    calls: int
    bytes_moved: int
    time_ms: float
    phases: Tuple[str, ...]
    modules: Tuple[str, ...]
    sources: Tuple[str, ...]


@dataclass(frozen=True)
class HostCallRow:
    """Calls on CPU tensors inside an accelerator step, per op and source line (the JSON's ``cpu_calls``,
    or, for the host's bookkeeping on CPU scalars, ``host_bookkeeping``)."""

    op: str
    calls: int
    time_ms: float
    phases: Tuple[str, ...]
    modules: Tuple[str, ...]
    sources: Tuple[str, ...]


@dataclass(frozen=True)
class OpTime:
    """One op's time split by verdict (the time-by-op chart)."""

    op: str
    device_ms: float
    fallback_ms: float
    cpu_ms: float
    time_ms: float
    host_ms: float = 0.0  # host bookkeeping


# -- the timeline ----------------------------------------------------------------------------
@dataclass(frozen=True)
class StepSpan:
    """Where one step lies on the timeline (ns from the first call)."""

    step: int
    start_ns: int
    end_ns: int
    calls: int


@dataclass(frozen=True)
class Timeline:
    """Every timed call on one axis (ns from the first recorded call), as columns: call ``i`` starts at
    ``start_ns[i]``, lasts ``time_ns[i]`` and runs in ``lanes[lane[i]]`` (device, fallback, host)."""

    lanes: Tuple[str, ...]
    start_ns: Tuple[int, ...]
    time_ns: Tuple[int, ...]
    lane: Tuple[int, ...]
    op: Tuple[str, ...]
    module: Tuple[str, ...]
    source: Tuple[str, ...]
    phase: Tuple[str, ...]
    step: Tuple[int, ...]
    steps: Tuple[StepSpan, ...]

    @property
    def calls(self) -> int:
        return len(self.start_ns)

    @property
    def end_ns(self) -> int:
        """Where the last call ends: the axis's length."""
        return max((s + t for s, t in zip(self.start_ns, self.time_ns)), default=0)


# -- the report ----------------------------------------------------------------------------
@dataclass(frozen=True)
class VerdictShare:
    """One verdict's share of the calls or of the time that are findings (host bookkeeping left out)."""

    verdict: str
    share: float  # 0..1


@dataclass(frozen=True)
class VerdictSplit:
    """Device / fallback / CPU shares of calls and of time; each sums to 1, or is empty when there is no whole."""

    calls: Tuple[VerdictShare, ...]
    time: Tuple[VerdictShare, ...]


@dataclass(frozen=True)
class GuessNote:
    """Where a prediction made a value up, and how many of its calls came after (rows ``guessed``)."""

    op: str  # the call that made it up
    why: str  # why the prediction had no value there
    source: str  # the user's line, where known
    calls_after: int  # recorded calls from it on: their branches and shapes may differ on the device
    calls: int  # recorded calls in all


@dataclass(frozen=True)
class TorchPaths:
    """Whose code paths a DirectML prediction or emulation shows, and the ops where torch 2.4.1's differ."""

    note: str
    differing_ops: Tuple[str, ...] = ()  # one line each: the op, and why it differs


@dataclass(frozen=True)
class KnownWrongResults:
    """Calls of an op whose results were wrong on real DirectML, in the measured truth table."""

    op: str
    calls: int  # this run's calls of it on the device
    dtype: str
    measured_wrong_calls: int  # in the table's samples
    measured_calls: int
    max_abs_error: Optional[float]
    max_rel_error: Optional[float]
    #: where it was confirmed on real hardware; "" when seen only on a software adapter (unconfirmed)
    confirmed_by: str
    sources: Tuple[str, ...]
    modules: Tuple[str, ...]
    fix: Optional[str] = None
    reason: str = ""  # what differed: values beyond tolerance, or the result's dtype or shape
    #: the class of calls the wrong results were measured for, in words (dmlprof.tables.wrong_classes)
    klass: str = ""
    #: what it breaks in this run ("gradients of every parameter below TextCNN are zero on DirectML")
    consequence: str = ""
    #: training is broken by it (gradients lost): the report leads with it
    breaks_training: bool = False
    #: wrong only where an argument the recording could not read says so: may be wrong, not counted by ``check``
    unjudged: bool = False

    @property
    def confirmed(self) -> bool:
        return bool(self.confirmed_by)


@dataclass(frozen=True)
class Report:
    """Everything a report shows, computed once from a Session (:func:`dmlprof.report.build_report`)."""

    run: RunMeta
    summary: Summary
    hotspots: Tuple[Hotspot, ...]  # slowest first
    ops: Tuple[OpRow, ...]  # slowest first
    phases: Tuple[PhaseRow, ...]  # forward, backward, optimizer, other
    modules: Tuple[ModuleRow, ...]  # parents first, children in natural order
    transfers: Tuple[TransferRow, ...]  # empty when the CPU is the device
    host_calls: Tuple[HostCallRow, ...]  # findings: calls on CPU tensors that are not bookkeeping
    host_bookkeeping: Tuple[HostCallRow, ...]  # calls on CPU scalars only (optimizer step counters): no finding
    time_by_op: Tuple[OpTime, ...]  # slowest first
    verification: Optional[Verification]
    replace: Optional[ReplaceComparison]
    sweep: Optional[SweepReport]
    extras: Mapping[str, Any]  # what other commands attached, as saved
    #: a DirectML stand-in's session (predicted or emulated): the torch whose code paths it shows
    torch_paths: Optional[TorchPaths] = None
    #: a DirectML session (live, emulated or predicted): its calls of ops whose results were wrong on real
    #: DirectML, from the measured truth table (dmlprof/tables/measured.py)
    known_wrong_results: Tuple[KnownWrongResults, ...] = ()
    #: a prediction that made a value up: where, why, and how many calls came after it
    guess: Optional[GuessNote] = None
    #: the scanned code's own ``record_function`` ranges, in the order the run entered them (torch.profiler
    #: places calls in them: none with ``--no-profiler``)
    ranges: Tuple[RangeRow, ...] = ()
    #: the timed calls on one axis (None without per-call times: a prediction, a sweep, an empty run);
    #: not in the JSON report, whose rows are per op (a trace file holds every call: ``--trace``)
    timeline: Optional[Timeline] = None
    #: the first thing every format says: the most serious finding, in its tone (report/verdict.py)
    verdict: Optional[Verdict] = None
    #: device / fallback / CPU shares of the calls and of the time that are findings
    verdict_split: Optional[VerdictSplit] = None
    #: what every format leads with after the verdict, each sentence composed once (report/notes.py)
    notes: Tuple[Note, ...] = ()
    #: a DirectML stand-in's session (predicted, emulated): its fallbacks priced on a real adapter class, modelled
    fallback_costs: Optional[FallbackCosts] = None

    @property
    def kind(self) -> str:
        return self.run.kind

    @property
    def is_prediction(self) -> bool:
        """Whether the verdicts came from an op table (:attr:`RunMeta.is_prediction`)."""
        return self.run.is_prediction

    def __repr__(self) -> str:
        """One line: the title and the finding that matters most (a notebook shows the whole report beside it)."""
        title = f"{self.title} (on {self.run.device.backend or 'an unknown device'})"
        if self.kind == SWEEP:
            best = self.sweep.recommended_batch_size if self.sweep else None
            return f"<{title}: " + (f"use batch size {best}>" if best else "no size recommended>")
        head = self.summary
        share = f" ({100 * head.fallback_time_share:.1f}% of op time)" if self.timed and head.time_ms else ""
        found = self.verification
        wrong = f", {found.divergent_calls:,} calls diverged from the CPU" if found and found.divergent_calls else ""
        return f"<{title}: {head.op_calls:,} op calls, {head.fallback_calls:,} fell back to the CPU{share}{wrong}>"

    @property
    def session_kind(self) -> str:
        """What made this session, one of :data:`SESSION_KINDS`: what a check of results (``--verify``) or a
        comparison (``--replace``) found comes before how the code ran (a script, a ``profile()`` block)."""
        if self.kind == SWEEP:
            return SWEEP_RUN
        if self.is_prediction:
            return PREDICTION
        if self.verification is not None:
            return VERIFY
        if self.replace is not None:
            return REPLACE
        return {SCRIPT: SCRIPT_SCAN, BLOCK: BLOCK_SCAN}.get(self.run.run_mode or "", SCAN)

    @property
    def title(self) -> str:
        """``dmlprof live scan of net``: every renderer's first line, naming the kind of session."""
        kind = self.session_kind
        return f"dmlprof {_TITLE_WORDS[kind]} of {self.run.title_name}{_TITLE_TAILS.get(kind, '')}"

    @property
    def has_times(self) -> bool:
        """Whether there are times to show: a timed session that recorded some (else times read "n/a")."""
        return self.timed and self.summary.time_ms > 0

    @property
    def device_call_tone(self) -> str:
        """How the share of calls on the device reads (good, warn, bad; '' without calls)."""
        return coverage_tone(self.summary.device_call_share, self.summary.op_calls)

    @property
    def device_time_tone(self) -> str:
        """How the share of time on the device reads (good, warn, bad; '' without calls)."""
        return coverage_tone(self.summary.device_time_share, self.summary.op_calls)

    @property
    def fallback_tone(self) -> str:
        """Any fallback is bad news; none is good."""
        return "bad" if self.summary.fallback_calls else "good"

    def top_ops_by_time(self, top: int) -> Tuple[Tuple[OpTime, ...], float, int]:
        """The ``top`` ops by time, and the time and the number of the ops after them (what a chart of the top
        ops sums up in one line); nothing when no op took time."""
        if not sum(row.time_ms for row in self.time_by_op):
            return (), 0.0, 0
        rest = self.time_by_op[top:]
        return self.time_by_op[:top], sum(row.time_ms for row in rest), len(rest)

    @property
    def ranked_ops(self) -> Tuple[OpRow, ...]:
        """The op rows that are findings (host bookkeeping has its own line), most time first, or most calls
        first where there are no times (a prediction)."""
        ops = tuple(row for row in self.ops if row.verdict != HOST)
        return ops if self.timed else tuple(sorted(ops, key=lambda row: -row.calls))

    @property
    def host_bookkeeping_ops(self) -> Tuple[str, ...]:
        """The ops of the host's bookkeeping, most calls first."""
        calls: dict = {}
        for row in self.host_bookkeeping:
            calls[row.op] = calls.get(row.op, 0) + row.calls
        return tuple(sorted(calls, key=lambda op: -calls[op]))

    @property
    def host_cpu_times(self) -> bool:
        """Whether the device's times are the host CPU's (the emulated device runs its kernels there)."""
        return self.run.device.backend in HOST_TIMED_BACKENDS

    @property
    def timed(self) -> bool:
        """Whether calls have times (a prediction has calls, not times)."""
        return not self.is_prediction

    @property
    def host_cpu_times_note(self) -> Optional[str]:
        """Where the times are the host CPU's (the emulated device), the caveat every format gives them."""
        if not self.host_cpu_times:
            return None
        return ("times on the emulated device are the host CPU's: they do not predict a GPU's; the fallback counts "
                "and bytes carry over to real DirectML")

    @property
    def cpu_is_device(self) -> bool:
        """Nothing can fall back: the CPU ran the step as the device."""
        return self.run.device.is_cpu and not self.is_prediction

    @property
    def device_failure_note(self) -> Optional[str]:
        """When the step fails on the device (DirectML raises, or would end the process), the sentence
        every report leads with: the call, its dtypes, the user's line, and why."""
        failed = self.run.device_failure
        if failed is None:
            return None
        where = f" at {failed.source}" if failed.source else ""
        dtypes = f" ({failed.dtypes})" if failed.dtypes else ""
        said = (failed.explanation or failed.message).rstrip(".")
        # the device predicted (--target mps fails on MPS), else DirectML: a scan runs it or its emulation
        on = title(self.run.prediction.target) if self.is_prediction and self.run.prediction is not None and \
            self.run.prediction.target else title("dml")
        if failed.calls_after is not None:  # the emulated device raised in its place, and the code went on
            after = f"; the {failed.calls_after:,} calls recorded after it never run on {on}" \
                if failed.calls_after else ""
            device = "the emulated device's" if failed.observed else "the prediction's"
            # "went on": the code caught it, or the thread it killed was not the one the run went on in
            return (f"Fails on {on}: {failed.op}{dtypes}{where}: {said}. The code went on past {device} error in "
                    f"its place, but on {on} the process ends at that call{after}.")
        if failed.ended_process:
            stopped = "The process ended there"
        elif failed.kind == "aborts":
            stopped = ("dmlprof stopped the run just before that call, which would have ended the process"
                       if failed.observed else "The prediction stops there, as the process would")
        else:
            stopped = "The run stopped there" if failed.observed else "The prediction stops there, as the run would"
        return f"Fails on {on}: {failed.op}{dtypes}{where}: {said}. {stopped}; the report covers the calls before it."

    @property
    def device_unused_note(self) -> Optional[str]:
        """When a script never touched the scanned device, the sentence every report leads with."""
        unused = self.run.device_unused
        if unused is None:
            return self._block_device_unused_note()
        used = ", ".join(unused.devices_used) or "no device"
        # without a --from that would help, the script itself chose where its tensors live: say what to change
        change = (f"scan with {unused.hint} to run the script's device requests on it" if unused.hint else
                  "so nothing could fall back: put the script's model and batches on the device to test it "
                  "(for DirectML, torch_directml.device(), which dmlprof answers with the scanned device)")
        return f"The scanned device ({self.run.device.backend}) was never used: the recorded calls ran on {used}; {change}."

    def _block_device_unused_note(self) -> Optional[str]:
        """A ``dmlprof.profile()`` block whose calls all ran on CPU tensors: say so, as a script's report does, rather
        than 'every call ran on the device' of none."""
        s = self.summary
        if self.run.run_mode != BLOCK or self.cpu_is_device or self.is_prediction or not s.op_calls \
                or s.device_calls or s.fallback_calls:
            return None
        return (f"The device ({self.run.device.backend}) was never used in the block: its {s.op_calls:,} calls ran on "
                "CPU tensors, so nothing could fall back; move the model and tensors to it in the block: "
                "model.to(run.device), x.to(run.device).")

    @property
    def sections(self) -> Tuple[str, ...]:
        """This report's sections in reading order (:data:`SECTION_ORDER`): what the session is about first (a
        sweep's sizes; results that differ from the CPU's), sections with nothing to show left out."""
        swept = self.sweep is not None and bool(self.sweep.rows)
        if self.kind == SWEEP:
            return (("sweep",) if swept else ()) + ("run",)  # a sweep file without sizes still has run details
        found = self.verification
        wrong = found is not None and not found.clean
        shown = {"device_failure": self.run.device_failure is not None, "replace": self.replace is not None,
                 "verify": found is not None and not wrong, "timeline": self.timeline is not None,
                 "transfers": bool(self.transfers), "host_calls": bool(self.host_calls),
                 "host_bookkeeping": bool(self.host_bookkeeping), "recording": self.run.recording.structure_step,
                 "warnings": bool(self.warnings), "sweep": swept}
        return ("verify",) * wrong + tuple(name for name in SECTION_ORDER if shown.get(name, True))

    @property
    def fixes(self) -> Tuple[Fix, ...]:
        """Every hotspot's fixes, once each, in hotspot order."""
        seen, out = set(), []
        for hotspot in self.hotspots:
            for fix in hotspot.fixes:
                if fix not in seen:
                    seen.add(fix)
                    out.append(fix)
        return tuple(out)

    @property
    def warnings(self) -> Tuple[WarningRecord, ...]:
        return self.run.warnings

    def to_dict(self) -> dict:
        """The JSON report (docs/report_schema.md), or for a sweep the sweep document (docs/sweep_schema.md)."""
        if self.kind == SWEEP:
            return self._sweep_document()
        document = {
            "schema_version": SCHEMA_VERSION,
            "meta": {**_flat_view(self.run, REPORT_META_KEYS), **self._step_medians()},
            "verdict": plain(self.verdict),
            "notes": plain(self.notes),
            "summary": plain(self.summary),
            "phases": plain(self.phases),
            "ops": plain(self.ops),
            "fallbacks": plain(self.hotspots),
            "fallback_costs": plain(self.fallback_costs),
            "modules": plain(self.modules),
            "ranges": plain(self.ranges),
            "transfers": plain(self.transfers),
            "cpu_calls": plain(self.host_calls),
            "host_bookkeeping": plain(self.host_bookkeeping),
            "warnings": plain(self.warnings),
            "verification": plain(self.verification),
            "torch_paths": plain(self.torch_paths),
            "known_wrong_results": plain(self.known_wrong_results),
            "guess": plain(self.guess),
            # what other commands attached, but not twice: --verify's result is the "verification" section
            "extras": plain({key: value for key, value in self.extras.items() if key not in _EXTRAS_WITH_A_SECTION}),
        }
        return document if self.has_times else _without_time_shares(document)

    def _step_medians(self) -> dict:
        """The step-time medians every other format prints, so that a script reads the same figure (null: none)."""
        return {"step_time_ms_p50": self.run.step_time_ms_p50,
                "recorded_step_time_ms_p50": self.run.recorded_step_time_ms_p50}

    def _sweep_document(self) -> dict:
        sweep = self.run.sweep
        return {
            "format": SWEEP_FORMAT,
            "schema_version": SWEEP_SCHEMA_VERSION,
            "meta": _flat_view(self.run, SWEEP_META_KEYS),
            "notes": plain(self.notes),
            "sweep": plain(self.sweep) if self.sweep is not None else {},
            "stop_reason": (sweep.stop_reason if sweep else None) or "",
            "details": plain(sweep.details) if sweep else [],
        }


def _flat_view(run: RunMeta, keys) -> dict:
    """The JSON report's ``meta``: the run's flat view (format 1's names, :meth:`RunMeta.to_dict`), these keys."""
    flat = run.to_dict()
    return {key: flat[key] for key in keys if key in flat}  # in the order of ``keys``, as the schema lists them


#: the JSON report's shares of time, by section: a prediction (or a run that recorded no time) has calls, not
#: times, so they are null there
#: (no time, not 0 % of it)
_TIME_SHARES = {"summary": ("device_time_share", "fallback_time_share"), "phases": ("share",), "ops": ("share",),
                "fallbacks": ("share",), "modules": ("device_share",)}


def _without_time_shares(document: dict) -> dict:
    """``document`` with every share of time null (an untimed report's)."""
    for section, keys in _TIME_SHARES.items():
        rows = document[section] if isinstance(document[section], list) else [document[section]]
        for row in rows:
            row.update(dict.fromkeys(keys))
    return document
