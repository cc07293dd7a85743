"""The predicted DirectML device (``scan --target dml``): no device, torch-directml's dispatcher paths.

A stand-in ``privateuseone`` device (:mod:`dmlprof.predict.standin`) whose
kernels are registered exactly where torch-directml registers its own, and
whose "fallback" kernel logs each op it would send to the CPU: that log is the
evidence for the predicted session's fallback verdicts. Everything else (the
recorder, the model contract, scripts, attribution) is the live scan's, so a
prediction describes the same calls a scan on the device records.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from typing import Optional

import torch

from dmlprof.backends.base import Backend, MemoryReading
from dmlprof.facts import BackendFacts
from dmlprof.meta import Prediction
from dmlprof.directml.failures import DirectMLSemantics


class PredictedDmlBackend(DirectMLSemantics, Backend):
    name = "dml"
    device_type = "privateuseone"
    has_cpu_fallback = True
    stands_in_for_directml = True
    fallback_evidence = "table"
    #: a predicted session has calls, not times, memory or values
    predicted = True
    #: its stand-in raises "torch-directml ends the process here" where the real one dies; a model's ``except
    #: RuntimeError`` can catch that, so the run keeps it and ends with it (R29)
    raises_for_aborts = True

    def __init__(self, index: int = 0, table=None, float64_support: bool = False, values=None):
        super().__init__(index)
        #: whether the predicted adapter runs float64 (most DirectML adapters do not)
        self.float64_support = float64_support
        #: what the stand-in knows of values, within its budget (a ``dmlprof.predict.values.ValueStore``; None: the default)
        if values is None:
            from dmlprof.predict.values import ValueStore

            values = ValueStore()
        self.values = values
        from dmlprof.tables import load_table

        self.table = table or load_table("dml")
        self.fallback_log: list = []
        self.how = ""
        self._standin = None

    def take_abort_note(self):
        from dmlprof.predict.abort_note import take_abort_note

        return take_abort_note()

    def read_values(self, tensor):
        """Only the values the prediction holds: a tensor without them reads as unknown, never as a guess."""
        from dmlprof.predict import values as held

        if isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu":
            return tensor
        return held.cpu_view(tensor) if isinstance(tensor, torch.Tensor) and held.has_values(tensor) else None

    def prepare(self) -> None:
        from dmlprof.predict.device import device_name, ensure_device

        self.how = ensure_device()["how"]  # raises PredictDeviceError (one line) where it cannot be done
        self.device_type = device_name()

    @contextmanager
    def run_context(self):
        """The stand-in's kernels exist for the length of a run, and backward runs on the calling thread."""
        from dmlprof.directml.device_module import backward_on_calling_thread
        from dmlprof.directml.generators import device_generators_made

        self._standin = self._new_standin()
        self._standin.install()
        try:
            # torch.Generator(device=<the device>): torch-directml's is a CPU generator, which the stand-in can't register
            with backward_on_calling_thread(), device_generators_made(self.device_type):
                yield
        finally:
            self._standin.remove()

    def _new_standin(self):
        """torch-directml's registrations, on tensors without memory (a target's backend makes its own)."""
        from dmlprof.predict.standin import StandIn

        return StandIn(self.table, self.fallback_log, self.device_type, self.float64_support, self.values)

    def refresh(self) -> None:
        if self._standin is not None:
            self._standin.refresh()

    def device(self) -> torch.device:
        return torch.device(self.device_type, self.index)

    def device_name(self) -> str:
        return f"{self.table.package} (predicted, no device)"

    def fallback_ops_in(self, message: str) -> Optional[str]:
        return message  # the log holds op names

    def memory(self) -> MemoryReading:
        return MemoryReading(source="none: predicted tensors have no memory")

    def versions(self) -> dict:
        return {self.table.package.replace("-", "_"): self.table.package_version}

    def placeholder_ops(self) -> dict:
        return dict(sorted(self._standin.placeholder_ops.items())) if self._standin is not None else {}

    def first_guess(self):
        """The first value the stand-in made up (a ``dmlprof.predict.standin.Guess``), or None."""
        return self._standin.first_guess if self._standin is not None else None

    def run_meta(self) -> BackendFacts:
        """A predicted session's device, and the prediction (which makes the session's kind ``predicted``)."""
        facts = super().run_meta()
        prediction = Prediction(target=self.table.backend, table_version=self.table.version_label(),
                                table_torch_version=self.table.torch_version, stand_in_device=self.how)
        return replace(facts, device=replace(facts.device, float64=self.float64_support), prediction=prediction,
                       timing="none: a predicted session has no times (time columns are 0)")
