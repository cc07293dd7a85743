"""The emulated DirectML device (``--device emulated-dml``): see :mod:`dmlprof.testing`.

It behaves as torch-directml does at the dispatcher: same op set, same boxed
CPU fallback, same warning, tensors on ``privateuseone``; only the memory is
the host's. dmlprof reads its fallbacks from the warnings, exactly as on real
DirectML; the backend's own counters are there to check that reading.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import torch

from dmlprof.backends.base import Availability, Backend, MemoryReading
from dmlprof.directml.failures import DirectMLSemantics
from dmlprof.facts import BackendFacts


class EmulatedDmlBackend(DirectMLSemantics, Backend):
    name = "emulated-dml"
    device_type = "privateuseone"
    fallback_warning_name = "DML"
    has_cpu_fallback = True
    stands_in_for_directml = True
    #: its allocator is malloc: the host's total and free memory are the device's (its own allocator counts the bytes
    #: its storages hold: ``memory()``)
    memory_is_host = True
    #: its kernels raise "torch-directml ends the process here" where the real one dies; a script's
    #: ``except RuntimeError`` can catch that, so the run keeps it and ends with it (R29)
    raises_for_aborts = True
    #: the ``torch_directml`` a process the scanned script spawns imports: it loads this device there
    spawned_stand_in = str(Path(__file__).resolve().parent / "spawned_emulated")

    @classmethod
    def availability(cls) -> Availability:
        from dmlprof import testing

        problem = testing.build_problem()
        if problem:
            return Availability(False, problem)
        return Availability(True, details={"build_directory": str(testing.build_directory()),
                                           "built": testing.is_loaded()})

    def prepare(self) -> None:
        from dmlprof import testing
        from dmlprof.errors import DeviceError

        try:
            testing.load()
        except testing.EmulatedDeviceError as exc:
            # the remedy goes in the message itself: the Python API (a notebook) shows str(), not the CLI's one_line()
            remedy = getattr(exc, "remedy", "")
            raise DeviceError(str(exc).splitlines()[0] + (f"; {remedy}" if remedy else "")) from None

    @property
    def float64_support(self) -> bool:
        from dmlprof import testing

        return testing.float64_support()

    @contextmanager
    def run_context(self):
        """Backward on the calling thread, and the device's tensors as torch-directml's to the user's code: they
        have no storage (an OpaqueTensorImpl), so ``data_ptr()``/``untyped_storage()`` raise its errors,
        ``torch._C._has_storage`` answers False, and ``torch.save``/``torch.load`` pickle them by a host copy and
        rebuild them by ``.to(device)``, never ``set_`` on the device (re-probe 20, cases 3, 5 and 16;
        :mod:`dmlprof.directml.no_storage`, the prediction's stand-in's mechanism). dmlprof's own code still reads
        the emulated tensors' host storage. A compiled module of torch.nn's classes runs eagerly, as torch 2.4.1's
        Dynamo leaves it (:func:`~dmlprof.directml.compiled_on_directml.torch_nn_modules_skipped_as_on_directml`).
        ``torch.Generator(device=<the device>)`` makes a CPU generator, as torch-directml's
        (:mod:`dmlprof.directml.generators`)."""
        from dmlprof.directml import no_storage
        from dmlprof.directml.device_module import backward_on_calling_thread
        from dmlprof.directml.compiled_on_directml import torch_nn_modules_skipped_as_on_directml
        from dmlprof.directml.generators import device_generators_made

        with backward_on_calling_thread(), no_storage.installed(self.device_type), \
                torch_nn_modules_skipped_as_on_directml(self.device_type), device_generators_made(self.device_type):
            yield

    def device(self) -> torch.device:
        return torch.device(self.device_type, self.index)

    def device_name(self) -> str:
        return "emulated DirectML device (host memory)"

    #: what an emulated scan's times are: its kernels are the host CPU's, so its ranking by time is the CPU's
    TIMING = ("wall time per call of the host CPU's kernels (the emulated device): its verdicts and errors are "
              "DirectML's, its times are this CPU's, never a GPU's")

    def run_meta(self) -> BackendFacts:
        return replace(super().run_meta(), timing=self.TIMING)

    MEMORY_SOURCE = "the emulated device's allocator (bytes its tensors hold)"

    def memory(self) -> MemoryReading:
        """The bytes the device's storages hold and their peak since the last reset, as its allocator counts them:
        what a CUDA script's ``torch.cuda.memory_allocated()`` reads (CUDA's arithmetic: a steady loop grows by 0,
        ``del`` frees the tensor's bytes), where the process's resident memory only grows."""
        from dmlprof import testing

        return MemoryReading(allocated_bytes=testing.memory_allocated(), peak_bytes=testing.max_memory_allocated(),
                             source=self.MEMORY_SOURCE)

    def reset_peak_memory(self) -> None:
        from dmlprof import testing

        testing.reset_peak_memory()

    def synchronize(self, outputs=None) -> None:
        """Nothing to wait for: kernels run synchronously in host memory."""

    def versions(self) -> dict:
        from dmlprof.tables import load_table

        return {"emulates": load_table("dml").version_label()}

    def take_abort_note(self):
        from dmlprof import testing

        return testing.take_abort_note()  # kept in the device's C++, shared with forked workers

    # Counters (the oracle for tests; scans never read them).
    def fallback_counts(self) -> dict:
        from dmlprof import testing

        return testing.fallback_counts()

    def reset_fallback_counts(self) -> None:
        from dmlprof import testing

        testing.reset_fallback_counts()

