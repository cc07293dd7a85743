"""Run metadata as a typed value: what ran, where, how it was recorded, and what kind of session it is.

A session file (format 2) stores it under its own field names, each sub-document
an object of its record's fields (:meth:`RunMeta.to_file`, :meth:`RunMeta.from_file`):
one vocabulary from the code to the file. Reading keeps keys it does not know in
``extra``, so that they survive a load and a save, and reads a value of the wrong
type as not recorded rather than failing.

Format 1, and the JSON report's ``meta`` (docs/report_schema.md), spread the
sub-documents out as one flat object under other names (:data:`FLAT_KEYS`);
:meth:`RunMeta.from_dict` reads that flat object (by moving it into the file's
structure, :func:`meta_from_flat`) and :meth:`RunMeta.to_dict` writes it: the flat
names live only at the file's edge. A run gathers its facts in a :class:`RunFacts`
(typed as they are set; a backend adds its :class:`BackendFacts`), and the Session
holds the RunMeta it builds.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from statistics import median
from types import MappingProxyType
from typing import Any, Mapping, Optional, Tuple

from dmlprof.plain import plain
from dmlprof.files import name_part  # a file-name part that fits any file system

# The kind of session: what made it, which decides how it reads.
LIVE = "live"            #: ops recorded as they ran on a device
PREDICTED = "predicted"  #: ops run on a stand-in device, verdicts from an op table, no times
SWEEP = "sweep"          #: a batch-size sweep: no op rows, the sweep in extras
KINDS = (LIVE, PREDICTED, SWEEP)

# How the model ran.
CONTRACT, SCRIPT, BLOCK = "contract", "script", "block"
RUN_MODES = (CONTRACT, SCRIPT, BLOCK, SWEEP)

_EMPTY: Mapping = MappingProxyType({})
_SAFE = re.compile(r"[^A-Za-z0-9_-]+")  # what a file name may hold on every system


@dataclass(frozen=True)
class Environment:
    """The software the run used."""

    dmlprof_version: Optional[str] = None
    torch_version: Optional[str] = None
    python_version: Optional[str] = None
    platform: Optional[str] = None


@dataclass(frozen=True)
class Device:
    """The device the run used (``backend``: cpu, cuda, dml, mps, xpu, emulated-dml)."""

    backend: Optional[str] = None
    device: Optional[str] = None  # as torch prints it: privateuseone:0
    name: Optional[str] = None
    versions: Mapping[str, str] = field(default_factory=lambda: _EMPTY)  # e.g. torch-directml -> 0.2.5.dev240914
    #: whether the adapter runs float64 (DirectML: a property of the adapter; what fails depends on it)
    float64: Optional[bool] = None
    #: a software adapter, in words ("lavapipe, Mesa's Vulkan on the CPU"): its times are not a GPU's
    emulation: Optional[str] = None

    @property
    def is_cpu(self) -> bool:
        return self.backend == "cpu"


@dataclass(frozen=True)
class Memory:
    """Device memory in bytes at the end of the run (``None`` where the backend cannot tell)."""

    allocated_bytes: Optional[int] = None
    peak_bytes: Optional[int] = None
    total_bytes: Optional[int] = None
    source: Optional[str] = None


@dataclass(frozen=True)
class ProfilerCheck:
    """Our per-op totals against torch.profiler's, over the ops both timed."""

    matched_ops: Optional[int] = None
    time_ms: Optional[float] = None
    profiler_time_ms: Optional[float] = None
    ratio: Optional[float] = None
    note: Optional[str] = None


@dataclass(frozen=True)
class SteadyState:
    """--no-sync: how the measured steps matched the one recorded structure step (docs/timing.md)."""

    structure_step_calls: Optional[int] = None
    matched_steps: Optional[int] = None
    unmatched_steps: Tuple[int, ...] = ()  # left out: their calls differed from the structure step's
    fallback_mismatch_steps: Tuple[int, ...] = ()  # kept, but their fallbacks differed
    calls_timed_from_structure_step: Optional[int] = None


@dataclass(frozen=True)
class DeviceTimeCheck:
    """Kernel time joined to our calls against all the kernel time torch.profiler saw."""

    calls_device_time_ms: Optional[float] = None
    profiler_kernel_time_ms: Optional[float] = None
    ratio: Optional[float] = None


@dataclass(frozen=True)
class Recording:
    """How the calls were recorded and timed."""

    sync: Optional[bool] = None        # the device synchronised after every call
    profiler: Optional[bool] = None    # torch.profiler ran alongside
    timing: Optional[str] = None       # in words: what the times mean
    description: Optional[str] = None  # in words: what went through the dispatcher ("recording")
    #: --no-sync: one structure step recorded, measured steps timed by torch.profiler (docs/timing.md)
    steady_state: Optional[SteadyState] = None
    structure_step_ms: Optional[float] = None
    profiler_check: Optional[ProfilerCheck] = None
    device_time_check: Optional[DeviceTimeCheck] = None
    verify: Optional[bool] = None      # scan --verify

    @property
    def structure_step(self) -> bool:
        """Whether the measured steps were timed by torch.profiler from one recorded structure step."""
        return self.steady_state is not None


@dataclass(frozen=True)
class Guess:
    """Where a prediction first made a value up: every call from ``first_seq`` on may follow a path a run
    on the device would not (a branch read the value, or a shape came from it)."""

    first_seq: int  # the first call (op frame ``seq``) recorded after or during it; 0 when it came before them
    op: str  # the call that made it up (``aten::_local_scalar_dense``: a value read back to the host)
    why: str  # why the prediction had no value there (a sentence)
    source: str = ""  # the user's line that asked for it, where known


@dataclass(frozen=True)
class Prediction:
    """``--target``: the op table the verdicts came from, and what it could not say."""

    target: Optional[str] = None
    table_version: Optional[str] = None
    table_torch_version: Optional[str] = None
    stand_in_device: Optional[str] = None
    unknown_ops: Optional[Tuple[str, ...]] = None
    unknown_op_calls: Optional[Mapping[str, int]] = None
    placeholder_ops: Optional[Mapping[str, int]] = None
    drift_ops: Optional[Tuple[str, ...]] = None
    failure_op: Optional[str] = None
    guess: Optional[Guess] = None  # the first value made up (None: every value the step read was computed)


@dataclass(frozen=True)
class SweepSettings:
    """How a sweep was asked to run (``dmlprof sweep``'s options)."""

    auto: Optional[bool] = None
    sizes_planned: Optional[Tuple[int, ...]] = None
    steps: Optional[int] = None  # timed steps per size
    warmup_steps: Optional[int] = None
    amp: Optional[str] = None
    device_index: Optional[int] = None  # sweep --devices: which of the devices this sweep ran on
    max_batch_size: Optional[int] = None
    time_budget_s: Optional[float] = None
    child_memory_limit_bytes: Optional[int] = None


@dataclass(frozen=True)
class SweepRun:
    """A batch-size sweep's run facts (the sweep's results are in ``extras["sweep"]``)."""

    stop_reason: Optional[str] = None
    memory_budget: Optional[str] = None  # in words
    memory_total_bytes: Optional[int] = None
    settings: SweepSettings = field(default_factory=SweepSettings)
    notes: Tuple[str, ...] = ()
    details: Tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class DeviceUnused:
    """A script whose recorded steps never touched the scanned device (it chose another one itself)."""

    devices_used: Tuple[str, ...] = ()
    hint: Optional[str] = None  # the --from that would put its work on the scanned device


@dataclass(frozen=True)
class DeviceFailure:
    """The call a run stopped at because the device does not run it (DirectML raises, or ends the process)."""

    op: str
    kind: str  # "raises" | "aborts" (dmlprof.directml.failures.RAISES / ABORTS)
    message: str  # the backend's own words
    dtypes: str = ""
    source: str = ""  # the user's line
    explanation: str = ""  # in words, for the user: what fails and why
    remedy: str = ""
    #: True when the run itself stopped there (live); False for a call a prediction says fails
    observed: bool = True
    #: True when the process did end in that call (a scan's child died there: dmlprof.survival), rather than
    #: dmlprof stopping just before it
    ended_process: bool = False
    #: how many calls the run made after it, where the device raised an error in its place that the code caught
    #: and went on from (the emulated device: on DirectML the process ends at the call, so none of them runs
    #: there); None where the run ended at it
    calls_after: Optional[int] = None


@dataclass(frozen=True)
class ScriptWindow:
    """Script mode: the optimizer steps a script took, and which of them were recorded."""

    warmup_steps: Optional[int] = None
    steps_requested: Optional[int] = None
    optimizer_steps_taken: Optional[int] = None
    window_closed: Optional[bool] = None  # the recorded steps were all taken
    run_to_end: Optional[bool] = None  # after them, the script ran on unrecorded (--run-to-end)

    def after_steps(self, taken: int) -> "ScriptWindow":
        """This window once the script has taken ``taken`` optimizer steps (what a dead script's journal counted:
        :func:`dmlprof.salvage.session_from_journal`)."""
        return replace(self, optimizer_steps_taken=taken,
                       window_closed=taken >= (self.warmup_steps or 0) + (self.steps_requested or 0))

    def steps_recorded(self) -> int:
        """The optimizer steps recorded: those taken after the warm-up, up to the steps asked for."""
        taken, warmup = self.optimizer_steps_taken or 0, self.warmup_steps or 0
        return min(taken, warmup + (self.steps_requested or 0)) - warmup if taken >= warmup else 0


@dataclass(frozen=True)
class NonfiniteLoss:
    """A loss that went NaN or infinite: at which training step (warm-up included), and its value."""

    step: Optional[int] = None
    steps_run: Optional[int] = None
    value: Optional[str] = None


@dataclass(frozen=True)
class Distributed:
    """One rank of a launched job (docs/distributed.md): its place, and the collectives it ran."""

    rank: Optional[int] = None
    local_rank: Optional[int] = None
    world_size: Optional[int] = None
    local_world_size: Optional[int] = None
    node_rank: Optional[int] = None
    #: what every rank of one job shares, and no other job does (sessions of two runs are never merged)
    run_id: Optional[str] = None
    backend: Optional[str] = None  # the process group's: gloo, nccl, ...
    collective_calls: Optional[int] = None
    comm_timing: Optional[str] = None  # in words: what the collectives' times mean


@dataclass(frozen=True)
class WarningRecord:
    """A warning raised while recording that is not fallback evidence, once, with its count."""

    category: str
    message: str
    count: int


@dataclass(frozen=True, eq=False)
class RunMeta:
    """Everything a session says about its run; ``kind`` says what sort of session it is."""

    kind: str = LIVE
    run_mode: Optional[str] = None
    model: Optional[str] = None
    model_name: Optional[str] = None
    environment: Environment = field(default_factory=Environment)
    device: Device = field(default_factory=Device)
    recording: Recording = field(default_factory=Recording)
    batch_size: Optional[int] = None
    warmup_steps: Optional[int] = None
    steps: Optional[int] = None  # measured steps completed (script mode: optimizer steps seen)
    steps_requested: Optional[int] = None
    optimizer: Optional[str] = None
    loss_fn: Optional[str] = None
    parameters: Optional[int] = None
    script_args: Optional[Tuple[str, ...]] = None
    started_at: Optional[str] = None
    duration_s: Optional[float] = None
    step_times_ms: Tuple[float, ...] = ()  # the step time users read: unrecorded steps where they ran
    #: the recorded (or profiled) steps' own times, when unrecorded steps ran beside them
    recorded_step_times_ms: Tuple[float, ...] = ()
    memory: Optional[Memory] = None
    partial: bool = False
    partial_reason: Optional[str] = None
    notes: Tuple[str, ...] = ()
    warnings: Tuple[WarningRecord, ...] = ()
    replacements_applied: Optional[int] = None
    failed_op: Optional[str] = None  # a run that stopped on a failing call: which op, the user's line, the module
    failed_source: Optional[str] = None
    failed_module: Optional[str] = None
    remapped_from: Optional[str] = None  # --from cuda|mps: what the script asked for
    script_window: Optional[ScriptWindow] = None  # script mode: the optimizer steps recorded
    nonfinite_loss: Optional[NonfiniteLoss] = None
    device_unused: Optional[DeviceUnused] = None
    device_failure: Optional[DeviceFailure] = None
    distributed: Optional[Distributed] = None  # one rank of a distributed run
    prediction: Optional[Prediction] = None
    sweep: Optional[SweepRun] = None
    #: module path -> class name, as the recorder named them (``Net.layer1.0`` -> ``BasicBlock``)
    module_classes: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    #: keys this dmlprof does not know (a newer one wrote them): kept as read, written back
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    # -- what the report asks ----------------------------------------------------------
    @property
    def is_prediction(self) -> bool:
        """Whether the verdicts came from an op table, not from a run on the device (``--target``): the one
        question every reader asks of a session's kind (``prediction`` holds what the table said)."""
        return self.kind == PREDICTED

    @property
    def title_name(self) -> str:
        return self.model_name or self.model or "model"

    @property
    def step_time_ms_p50(self) -> Optional[float]:
        """The median measured step (of an even count, the mean of the two middle ones): every renderer's."""
        return float(median(self.step_times_ms)) if self.step_times_ms else None

    @property
    def recorded_step_time_ms_p50(self) -> Optional[float]:
        """The median of the recorded steps, where the step time users read is an unrecorded step's."""
        return float(median(self.recorded_step_times_ms)) if self.recorded_step_times_ms else None

    def file_stem(self) -> str:
        """``<model>-<backend>[-sweep]-<yyyymmddThhmmss>``: how this run's files are named (session, trace run)."""
        # The file scanned names the files (a model name is its stem, unless a command named it otherwise).
        model = name_part(_SAFE.sub("_", Path(self.model or "").stem or self.model_name or "session"))
        index = self.sweep.settings.device_index if self.sweep is not None else None  # sweep --devices: one file each
        backend = name_part(_SAFE.sub("_", (self.device.backend or "device") + ("" if index is None else str(index))), 40)
        stamp = _SAFE.sub("", (self.started_at or "").replace(":", "").replace("-", ""))[:15]
        parts = [model, backend] + (["sweep"] if self.kind == SWEEP else []) + [stamp or time.strftime("%Y%m%dT%H%M%S")]
        return "-".join(parts).strip("-_") or "dmlprof"

    def updated(self, **changes) -> "RunMeta":
        """A copy with ``changes`` (RunMeta is frozen)."""
        return replace(self, **changes)

    def __eq__(self, other) -> bool:
        if isinstance(other, RunMeta):
            return self.to_file() == other.to_file()
        return NotImplemented

    __hash__ = None  # a value compared by its facts, not an identity

    # -- the session file (format 2): each field under its own name -------------------------
    @classmethod
    def from_file(cls, data: Mapping) -> "RunMeta":
        """Read a format-2 session file's ``meta``: the typed fields under their own names, each
        sub-document an object of its fields. Missing keys stay ``None``; keys this dmlprof does not know
        go to ``extra``, so that they survive a load and a save; a value of the wrong type reads as missing."""
        data = data if isinstance(data, Mapping) else {}
        read = _Reader(data)
        meta = cls(
            kind=read.choice("kind", KINDS, LIVE), run_mode=read.choice("run_mode", RUN_MODES, None),
            model=read.text("model"), model_name=read.text("model_name"),
            environment=_environment(data.get("environment")), device=_device(read.mapping("device")),
            recording=_recording(read.mapping("recording")),
            batch_size=read.integer("batch_size"), warmup_steps=read.integer("warmup_steps"),
            steps=read.integer("steps"), steps_requested=read.integer("steps_requested"),
            optimizer=read.text("optimizer"), loss_fn=read.text("loss_fn"), parameters=read.integer("parameters"),
            script_args=read.texts("script_args"), started_at=read.text("started_at"),
            duration_s=read.number("duration_s"), step_times_ms=read.numbers("step_times_ms") or (),
            recorded_step_times_ms=read.numbers("recorded_step_times_ms") or (),
            memory=_memory(data.get("memory")), partial=bool(read.flag("partial")),
            partial_reason=read.text("partial_reason"), notes=_notes(data.get("notes")),
            warnings=_warnings(data.get("warnings")), replacements_applied=read.integer("replacements_applied"),
            failed_op=read.text("failed_op"), failed_source=read.text("failed_source"),
            failed_module=read.text("failed_module"),
            remapped_from=read.text("remapped_from"), script_window=_script_window(data.get("script_window")),
            nonfinite_loss=_nonfinite_loss(data.get("nonfinite_loss")),
            device_unused=_device_unused(data.get("device_unused")), device_failure=_device_failure(data.get("device_failure")), distributed=_distributed(data.get("distributed")),
            prediction=_prediction(read.mapping("prediction")), sweep=_sweep(data.get("sweep")),
            module_classes=read.text_pairs("module_classes"),
        )
        return replace(meta, extra=MappingProxyType({k: v for k, v in data.items() if k not in _FIELD_NAMES}))

    def to_file(self) -> dict:
        """The ``meta`` object of a format-2 session file: what :meth:`from_file` reads (values not
        recorded are left out)."""
        out = {}
        for name in _FIELD_NAMES:
            value = _file_value(getattr(self, name))
            if value is not None:
                out[name] = value
        if self.kind == SWEEP:  # a sweep's steps are per size, in its details
            out.pop("step_times_ms", None)
        out.update(self.extra)
        return out

    # -- the flat view: format 1's keys, and the JSON report's ---------------------------
    @classmethod
    def from_dict(cls, data: Mapping) -> "RunMeta":
        """Read a flat ``meta`` (a format-1 file's, or a run's facts as the runner still gathers them):
        it is upgraded to the file's structure (:func:`meta_from_flat`) and read by :meth:`from_file`."""
        return data if isinstance(data, RunMeta) else cls.from_file(meta_from_flat(data))

    def to_dict(self) -> dict:
        """The flat ``meta`` of format 1, which the JSON report's ``meta`` keeps (docs/report_schema.md):
        one object, sub-documents spread out under their format-1 names (values not recorded are left out)."""
        out = {"mode": self.kind, "run_mode": self.run_mode, "model": self.model, "model_name": self.model_name,
               **{k: getattr(self.environment, k) for k in _ENVIRONMENT_KEYS},
               "backend": self.device.backend, "device": self.device.device, "device_name": self.device.name,
               "backend_versions": dict(self.device.versions) if self.device.backend is not None else None,
               "device_float64": self.device.float64, "device_emulation": self.device.emulation}
        out.update(_recording_dict(self.recording))
        out.update({name: plain(getattr(self, name)) for name in _PLAIN_FIELDS})
        out["memory"] = plain(self.memory)
        out["partial"] = self.partial
        out["notes"] = list(self.notes) if self.notes else None
        if self.kind == SWEEP and not self.step_times_ms:  # a sweep's steps are per size, in its details
            out["step_times_ms"] = None
        if not self.recorded_step_times_ms:
            out["recorded_step_times_ms"] = None
        out["warnings"] = [plain(w) for w in self.warnings] if self.warnings else None
        out["module_classes"] = dict(self.module_classes) if self.module_classes else None
        out["distributed"] = _file_value(self.distributed)  # what the rank knew, as it was gathered
        out.update(_prediction_dict(self.prediction))
        out.update(_sweep_dict(self.sweep))
        out = {key: value for key, value in out.items() if value is not None}
        out.update(self.extra)
        return out


_ENVIRONMENT_KEYS = ("dmlprof_version", "torch_version", "python_version", "platform")
_PLAIN_FIELDS = ("batch_size", "warmup_steps", "steps", "steps_requested", "optimizer", "loss_fn", "parameters",
                 "script_args", "started_at", "duration_s", "step_times_ms", "recorded_step_times_ms", "partial_reason",
                 "replacements_applied",
                 "failed_op", "failed_source", "failed_module", "remapped_from", "script_window", "nonfinite_loss", "device_unused",
                 "device_failure", "distributed")
#: a flat (format 1) key -> where the typed field is: (field,) or (sub-document, its field); other keys keep their place
FLAT_KEYS = {
    "mode": ("kind",),
    **{key: ("environment", key) for key in _ENVIRONMENT_KEYS},
    "backend": ("device", "backend"), "device": ("device", "device"), "device_name": ("device", "name"),
    "backend_versions": ("device", "versions"), "device_float64": ("device", "float64"),
    "device_emulation": ("device", "emulation"),
    **{key: ("recording", key) for key in ("sync", "profiler", "timing", "steady_state", "structure_step_ms",
                                           "profiler_check", "device_time_check", "verify")},
    "recording": ("recording", "description"),
    **{key: ("prediction", key) for key in ("target", "table_version", "table_torch_version", "stand_in_device",
                                            "unknown_ops", "unknown_op_calls", "placeholder_ops", "drift_ops")},
    "predicted_failure_op": ("prediction", "failure_op"), "predicted_guess": ("prediction", "guess"),
    "sweep_stop_reason": ("sweep", "stop_reason"), "memory_budget": ("sweep", "memory_budget"),
    "memory_total_bytes": ("sweep", "memory_total_bytes"), "sweep_settings": ("sweep", "settings"),
    "sweep_notes": ("sweep", "notes"), "sweep_details": ("sweep", "details"),
}
_RECORDING_KEYS = {path[1]: key for key, path in FLAT_KEYS.items() if path[0] == "recording"}
_PREDICTION_KEYS = {path[1]: key for key, path in FLAT_KEYS.items() if path[0] == "prediction"}
_SWEEP_KEYS = {path[1]: key for key, path in FLAT_KEYS.items() if path[0] == "sweep"}


def meta_from_flat(data) -> dict:
    """A flat ``meta`` (format 1) in the file's structure of format 2: each key moved to its typed field
    (:data:`FLAT_KEYS`); keys it does not name stay where they are. Values are moved, not checked."""
    if not isinstance(data, Mapping):
        return data
    out: dict = {}
    for key, value in data.items():
        path = FLAT_KEYS.get(key, (key,))
        if len(path) == 1:
            out[path[0]] = value
        else:
            if not isinstance(out.get(path[0]), dict):
                out[path[0]] = {}
            out[path[0]][path[1]] = value
    return out


def _file_value(value):
    """A field's value as a session file holds it: a record as an object of the fields it recorded (``None``
    fields left out); an empty list or record is kept, as it reads back (an empty list is not "not recorded")."""
    if hasattr(value, "__dataclass_fields__"):
        value = {f.name: _file_value(getattr(value, f.name)) for f in fields(value)}
        return {k: v for k, v in value.items() if v is not None}
    return plain(value)


class _Reader:
    """Typed reads from an untrusted mapping: a value of the wrong type reads as missing."""

    def __init__(self, data: Mapping):
        self.data = data

    def text(self, key: str) -> Optional[str]:
        value = self.data.get(key)
        return value if isinstance(value, str) else None

    def choice(self, key: str, allowed: tuple, default: Optional[str]) -> Optional[str]:
        value = self.data.get(key)
        return value if value in allowed else default

    def flag(self, key: str) -> Optional[bool]:
        value = self.data.get(key)
        return value if isinstance(value, bool) else None

    def integer(self, key: str) -> Optional[int]:
        value = self.data.get(key)
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else None

    def number(self, key: str) -> Optional[float]:
        value = self.data.get(key)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return value if ok else None

    def numbers(self, key: str) -> Optional[Tuple[float, ...]]:
        values = self.data.get(key)
        if not isinstance(values, list):
            return None
        return tuple(v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))

    def integers(self, key: str) -> Tuple[int, ...]:
        values = self.data.get(key)
        return tuple(v for v in values if isinstance(v, int) and not isinstance(v, bool)) if isinstance(values, list) else ()

    def texts(self, key: str) -> Optional[Tuple[str, ...]]:
        values = self.data.get(key)
        return tuple(str(v) for v in values) if isinstance(values, list) else None

    def mapping(self, key: str) -> Optional[Mapping]:
        value = self.data.get(key)
        return MappingProxyType(dict(value)) if isinstance(value, Mapping) else None

    def text_map(self, key: str) -> Mapping[str, str]:
        value = self.data.get(key)
        if isinstance(value, Mapping):
            return MappingProxyType({str(k): str(v) for k, v in value.items()})
        return MappingProxyType({"backend": value}) if isinstance(value, str) and value else _EMPTY

    def text_pairs(self, key: str) -> Mapping[str, str]:
        """A mapping of text to text; pairs of another type are left out."""
        value = self.data.get(key)
        if not isinstance(value, Mapping):
            return _EMPTY
        return MappingProxyType({k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)})

    def count_map(self, key: str) -> Optional[Mapping[str, int]]:
        value = self.data.get(key)
        if not isinstance(value, Mapping):
            return None
        return MappingProxyType({str(k): v for k, v in value.items() if isinstance(v, int)})


def _profiler_check(data) -> Optional[ProfilerCheck]:
    if isinstance(data, ProfilerCheck) or not isinstance(data, Mapping):
        return data if isinstance(data, ProfilerCheck) else None
    read = _Reader(data)
    return ProfilerCheck(read.integer("matched_ops"), read.number("time_ms"), read.number("profiler_time_ms"),
                         read.number("ratio"), read.text("note"))


def _memory(data) -> Optional[Memory]:
    if isinstance(data, Memory) or not isinstance(data, Mapping):
        return data if isinstance(data, Memory) else None
    read = _Reader(data)
    return Memory(read.integer("allocated_bytes"), read.integer("peak_bytes"), read.integer("total_bytes"),
                  read.text("source"))


def _steady_state(data) -> Optional[SteadyState]:
    if isinstance(data, SteadyState) or not isinstance(data, Mapping):
        return data if isinstance(data, SteadyState) else None
    read = _Reader(data)
    return SteadyState(read.integer("structure_step_calls"), read.integer("matched_steps"), read.integers("unmatched_steps"),
                       read.integers("fallback_mismatch_steps"), read.integer("calls_timed_from_structure_step"))


def _device_time_check(data) -> Optional[DeviceTimeCheck]:
    if isinstance(data, DeviceTimeCheck) or not isinstance(data, Mapping):
        return data if isinstance(data, DeviceTimeCheck) else None
    read = _Reader(data)
    return DeviceTimeCheck(read.number("calls_device_time_ms"), read.number("profiler_kernel_time_ms"), read.number("ratio"))


def _distributed(data) -> Optional[Distributed]:
    if isinstance(data, Distributed) or not isinstance(data, Mapping):
        return data if isinstance(data, Distributed) else None
    read = _Reader(data)
    return Distributed(*(read.integer(k) for k in ("rank", "local_rank", "world_size", "local_world_size", "node_rank")),
                       run_id=read.text("run_id"), backend=read.text("backend"),
                       collective_calls=read.integer("collective_calls"), comm_timing=read.text("comm_timing"))


def _script_window(data) -> Optional[ScriptWindow]:
    if isinstance(data, ScriptWindow) or not isinstance(data, Mapping):
        return data if isinstance(data, ScriptWindow) else None
    read = _Reader(data)
    return ScriptWindow(read.integer("warmup_steps"), read.integer("steps_requested"),
                        read.integer("optimizer_steps_taken"), read.flag("window_closed"), read.flag("run_to_end"))


def _nonfinite_loss(data) -> Optional[NonfiniteLoss]:
    if isinstance(data, NonfiniteLoss) or not isinstance(data, Mapping):
        return data if isinstance(data, NonfiniteLoss) else None
    read = _Reader(data)
    return NonfiniteLoss(read.integer("step"), read.integer("steps_run"),
                         str(data["value"]) if data.get("value") is not None else None)


def _notes(value) -> Tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(str(note) for note in value) if isinstance(value, list) else ()


def _device_failure(data) -> Optional[DeviceFailure]:
    if isinstance(data, DeviceFailure) or not isinstance(data, Mapping):
        return data if isinstance(data, DeviceFailure) else None
    read = _Reader(data)
    op, kind = read.text("op"), read.choice("kind", ("raises", "aborts"), None)
    if op is None or kind is None:
        return None
    return DeviceFailure(op, kind, read.text("message") or "", read.text("dtypes") or "", read.text("source") or "",
                         read.text("explanation") or "", read.text("remedy") or "",
                         read.flag("observed") is not False, read.flag("ended_process") is True,
                         read.integer("calls_after"))


def _device_unused(data) -> Optional[DeviceUnused]:
    if isinstance(data, DeviceUnused) or not isinstance(data, Mapping):
        return data if isinstance(data, DeviceUnused) else None
    read = _Reader(data)
    return DeviceUnused(read.texts("devices_used") or (), read.text("hint"))


def _warnings(value) -> Tuple[WarningRecord, ...]:
    if not isinstance(value, list):
        return ()
    records = []
    for item in value:
        if isinstance(item, WarningRecord):  # a producer's record
            records.append(item)
        elif isinstance(item, Mapping):
            count = item.get("count", 1)
            records.append(WarningRecord(str(item.get("category", "")), str(item.get("message", "")),
                                         count if isinstance(count, int) and count > 0 else 1))
    return tuple(records)


def _prediction(data: Optional[Mapping]) -> Optional[Prediction]:
    if data is None:
        return None
    read = _Reader(data)
    return Prediction(
        target=read.text("target"), table_version=read.text("table_version"),
        table_torch_version=read.text("table_torch_version"), stand_in_device=read.text("stand_in_device"),
        unknown_ops=read.texts("unknown_ops"), unknown_op_calls=read.count_map("unknown_op_calls"),
        placeholder_ops=read.count_map("placeholder_ops"), drift_ops=read.texts("drift_ops"),
        failure_op=read.text("failure_op"), guess=_guess(data.get("guess")))


def _environment(data) -> Environment:
    if isinstance(data, Environment):
        return data
    read = _Reader(data if isinstance(data, Mapping) else {})
    return Environment(*(read.text(k) for k in _ENVIRONMENT_KEYS))


def _device(data: Optional[Mapping]) -> Device:
    read = _Reader(data or {})
    return Device(read.text("backend"), read.text("device"), read.text("name"), read.text_map("versions"),
                  read.flag("float64"), read.text("emulation"))


def _recording(data: Optional[Mapping]) -> Recording:
    read = _Reader(data or {})
    return Recording(
        sync=read.flag("sync"), profiler=read.flag("profiler"), timing=read.text("timing"),
        description=read.text("description"), steady_state=_steady_state(read.data.get("steady_state")),
        structure_step_ms=read.number("structure_step_ms"),
        profiler_check=_profiler_check(read.data.get("profiler_check")),
        device_time_check=_device_time_check(read.data.get("device_time_check")), verify=read.flag("verify"))


def _guess(data) -> Optional[Guess]:
    if isinstance(data, Guess) or not isinstance(data, Mapping):
        return data if isinstance(data, Guess) else None
    read = _Reader(data)
    first_seq, op = read.integer("first_seq"), read.text("op")
    if first_seq is None or op is None:
        return None
    return Guess(first_seq, op, read.text("why") or "", read.text("source") or "")


def _sweep(data) -> Optional[SweepRun]:
    if isinstance(data, SweepRun) or not isinstance(data, Mapping):
        return data if isinstance(data, SweepRun) else None
    read = _Reader(data)
    details = data.get("details")
    details = tuple(MappingProxyType(dict(d)) for d in details if isinstance(d, Mapping)) if isinstance(details, list) else ()
    return SweepRun(stop_reason=read.text("stop_reason"), memory_budget=read.text("memory_budget"),
                    memory_total_bytes=read.integer("memory_total_bytes"),
                    settings=_sweep_settings(read.mapping("settings") or {}),
                    notes=read.texts("notes") or (), details=details)


def _sweep_settings(data: Mapping) -> SweepSettings:
    read = _Reader(data)
    sizes = read.numbers("sizes_planned")
    return SweepSettings(auto=read.flag("auto"), sizes_planned=tuple(int(n) for n in sizes) if sizes is not None else None,
                         steps=read.integer("steps"), warmup_steps=read.integer("warmup_steps"), amp=read.text("amp"),
                         device_index=read.integer("device_index"),
                         max_batch_size=read.integer("max_batch_size"), time_budget_s=read.number("time_budget_s"),
                         child_memory_limit_bytes=read.integer("child_memory_limit_bytes"))


def _recording_dict(recording: Recording) -> dict:
    out = {key: plain(getattr(recording, name)) for name, key in _RECORDING_KEYS.items()}
    if out["profiler_check"] is not None:  # a check has either figures, a note, or both
        out["profiler_check"] = {k: v for k, v in out["profiler_check"].items() if v is not None}
    return out


def _prediction_dict(prediction: Optional[Prediction]) -> dict:
    if prediction is None:
        return {}
    return {key: plain(getattr(prediction, name)) for name, key in _PREDICTION_KEYS.items()}


def _sweep_dict(sweep: Optional[SweepRun]) -> dict:
    if sweep is None:
        return {}
    return {key: plain(getattr(sweep, name)) for name, key in _SWEEP_KEYS.items()}


_FIELD_NAMES = tuple(f.name for f in fields(RunMeta) if f.name != "extra")


def run_meta(meta) -> RunMeta:
    """``meta`` as a RunMeta (a session's meta may still be a plain dict)."""
    return meta if isinstance(meta, RunMeta) else RunMeta.from_dict(meta)
