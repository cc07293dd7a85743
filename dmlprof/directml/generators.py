"""``torch.Generator(device=<the device>)`` on dmlprof's own devices, as the real device answers it.

torch makes a generator for a PrivateUse1 device by asking the backend's C++ hooks (``getNewGenerator``, or before
torch 2.6 the function ``REGISTER_GENERATOR_PRIVATEUSE1`` registered). torch-directml registers one; the prediction's
stand-in device has no C++ to register it with (torch's Python hooks, ``torch._C._acc.PrivateUse1Hooks``, offer no
generator slot on 2.13, and torch 2.4 has none at all), so torch refused the call with its internal "register
``PrivateUse1HooksInterface`` ... ``getNewGenerator``" message (re-probe 22, case 19). For the block, ``torch.Generator``
makes what the real device makes:

* DirectML (measured on torch-directml 0.2.5, torch 2.4.1): a CPU generator of initial seed 0 (unseeded, it draws
  what a CPU generator seeded with 0 draws). ``g.device`` is ``cpu``,
  ``manual_seed``/``seed``/``get_state``/``set_state`` are the CPU generator's (a 5056-byte state), and draws on the
  device with it equal the CPU's for the same seed (``randn``, ``uniform_``). So the stand-in's and the emulated
  device's draws (the CPU's kernels) are DirectML's.
* XPU, MPS (read, not measured: ``torch/csrc/Generator.cpp``): the device's own generator, whose ``g.device`` is
  the device; its draws are the device's Philox, not the CPU's. The stand-in gives a CPU generator reading as the
  device, so a random call accepts it as torch's kernels there do; its values are the CPU's, which the
  prediction never claims as the device's.

Every generator made still passes ``isinstance(g, torch.Generator)``, and any other device argument reaches torch.
"""
from __future__ import annotations

import weakref
from contextlib import contextmanager

import torch

#: torch's own class (``torch.Generator`` is it, until the block replaces the name)
_TORCH_GENERATOR = torch._C.Generator

#: the generators made reading as a target's device (XPU, MPS), while they live, and that device: torch hands a
#: random kernel a fresh ``torch.Generator`` wrapping the same C++ generator, so a kernel knows one only by its state
_reads_as: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class _Weakly(_TORCH_GENERATOR):
    """A generator a weak reference can name (torch 2.4's own class takes none; a Python subclass's instances do)."""


def _reading_as(generator):
    """The device ``generator`` was made reading as, else None (torch's own generators are not in the registry)."""
    try:
        return _reads_as.get(generator)
    except TypeError:  # torch 2.4's own class: no weak reference, so never registered
        return None


def generator_device_type(generator) -> str:
    """The device type ``generator`` reads as to the program: a CPU one handed to a kernel, whose state is that of a
    generator made reading as a target's device, is that device's (its C++ generator is the same)."""
    reads_as = _reading_as(generator)
    if reads_as is not None:
        return reads_as.type
    if generator.device.type != "cpu":
        return generator.device.type
    state = generator.get_state()
    for made, device in list(_reads_as.items()):
        if torch.equal(made.get_state(), state):
            return device.type
    return "cpu"


def _device_type_of(device) -> str:
    """The device type a ``device`` argument names ("" where it names none torch can parse)."""
    if isinstance(device, torch.device):
        return device.type
    if isinstance(device, str):
        try:
            return torch.device(device).type
        except RuntimeError:
            return ""
    return ""


def generator_class(make_for) -> type:
    """A ``torch.Generator`` stand-in: ``make_for(device)`` makes the generator for a ``device`` argument it answers
    (``None`` where torch should make it). What it makes is an instance of the class called (``type(g) is
    torch.Generator`` holds in the block, a subclass of the model's keeps its methods and ``__init__``);
    ``isinstance``/``issubclass`` answer as with torch's class, and a generator pickles as torch's (re-probe 23, 5-7:
    a subclass lost its methods, a pickle named a local class, ``type(g)`` was torch's own class)."""

    class _AnyGenerator(type(_TORCH_GENERATOR)):
        def __instancecheck__(cls, instance):
            return isinstance(instance, _TORCH_GENERATOR)

        def __subclasscheck__(cls, subclass):
            return issubclass(subclass, _TORCH_GENERATOR)

    class Generator(_TORCH_GENERATOR, metaclass=_AnyGenerator):
        def __new__(cls, device="cpu"):
            made = make_for(device)
            if made is None:
                return _TORCH_GENERATOR.__new__(cls, device)
            if type(made) is cls:
                return made
            reads_as = _reading_as(made)
            generator = _TORCH_GENERATOR.__new__(cls, made.device)
            generator.set_state(made.get_state())
            if reads_as is not None:
                _reads_as[generator] = reads_as
            return generator

        @property
        def device(self) -> torch.device:
            return _reading_as(self) or _TORCH_GENERATOR.device.__get__(self)

        def __reduce__(self):
            _, arguments, state = _TORCH_GENERATOR.__reduce__(self)
            return torch.Generator, arguments, state  # the name as it is where it is pickled

    Generator.__module__, Generator.__qualname__, Generator.__name__ = "torch", "Generator", "Generator"
    return Generator


def device_generators(device_type: str, reads_as: str = ""):
    """``make_for`` of :func:`generator_class` for a device of ``device_type`` whose generator is a CPU one:
    reading as the CPU (DirectML, ``reads_as`` empty) or as the device ``reads_as`` names (a target's)."""
    names = {device_type, reads_as} - {""}

    def make_for(device):
        if _device_type_of(device) not in names:
            return None
        made = _Weakly(device="cpu")
        if reads_as:
            _reads_as[made] = torch.device(reads_as)
        else:
            made.manual_seed(0)  # torch-directml's starts at seed 0 (measured), a CPU generator's at 67280421310721
        return made

    return make_for


#: the ``make_for`` of every block now open, innermost last (``--from cuda``'s mapping asks them too)
_open: list = []


def made_by_open_blocks(device):
    """The generator an open :func:`device_generators_made` block makes for ``device`` (``None``: none answers)."""
    for make_for in reversed(_open):
        made = make_for(device)
        if made is not None:
            return made
    return None


@contextmanager
def device_generators_made(device_type: str, reads_as: str = ""):
    """For the block, ``torch.Generator(device=<device_type>)`` (and ``reads_as``'s) makes the CPU generator the
    device's random calls draw from (see the module); other devices' reach torch."""
    saved = torch.Generator
    _open.append(device_generators(device_type, reads_as))
    torch.Generator = generator_class(made_by_open_blocks)
    try:
        yield
    finally:
        torch.Generator = saved
        _open.pop()
