"""The values a predicted device tensor holds: real data where the prediction can afford it.

A stand-in device tensor (:mod:`dmlprof.predict.husks`) has no memory. Where
the budget allows, its storage has a CPU copy of its bytes instead: ops whose
device arguments all have values run their CPU kernels on them (as the emulated
device does) and their outputs keep what was computed, so code that reads a
tensor (a guard that raises on bad boxes, ``.tolist()`` of tokens per expert, a
filter's survivors) reads what a run on the device reads.

What is known of a storage is kept in a table keyed by the storage's address
(``torch._C._storage_address``), so every view and alias of a tensor (a
transpose, ``.data``, ``detach()``, the ``nn.Parameter`` made of it) reaches it.
Not through the storage's Python object: on newer torch that object, once made,
holds the storage for as long as it lives, and the autograd engine adds a
gradient in place only when nothing else holds its storage. An address is
reused once its storage is freed; every device storage is made by the stand-in
(:func:`born`), which forgets what was known at its address.

A storage without values (beyond the budget, made from the meta device, or
computed from a value made up) may still hold one known constant
(``torch.ones`` of any size), and keeps why it has no values, which a
prediction reports where it had to make a value up.
"""
from __future__ import annotations

import time
import weakref
from typing import Optional

import torch

#: Bytes of values alive at once (CPU memory the prediction holds as the device's: a detection model's
#: weights, gradients and activations fit; a 7-billion-parameter model built on meta holds none).
VALUES_BUDGET_BYTES = 2 << 30
#: Seconds of CPU kernels computing values, over the whole prediction (a detection model's three steps take
#: about 40 on a busy 2-core machine; the emulated device would spend as long).
VALUES_BUDGET_S = 120.0
#: Elements of one op's device arguments above which it is not computed (one call would take seconds).
VALUES_MAX_OP_ELEMENTS = 1 << 26

WHY_META = "made from a tensor on the meta device, which has no values"
#: why a storage ``torch.empty`` made has no values yet: any would do, and none are kept until written
WHY_EMPTY = "made by torch.empty and not written (its values are arbitrary)"
_VALUES_OFF = "values are off (a budget of 0 bytes)"
#: storages made between two looks for freed ones, when the budget is short
_PURGE_EVERY = 256
WHY_UNSEEN = "written where the prediction did not compute values"

_address = torch._C._storage_address


class _Known:
    """What the prediction knows of one device storage."""

    __slots__ = ("storage_nbytes", "values", "constant", "why", "holder")

    def __init__(self, holder: torch.Tensor, storage_nbytes: int, values=None, constant=None,
                 why: Optional[str] = None):
        #: the device storage's size (read here, not from its Python object: see the module docstring)
        self.storage_nbytes = storage_nbytes
        self.values = values        # a CPU UntypedStorage of (at least) the storage's bytes
        self.constant = constant    # (dtype, value) all of a storage without values holds
        self.why = why              # why a storage has no values
        #: a tensor on the storage, while one the prediction saw lives (none: maybe freed, maybe held by an alias);
        #: a view's base, which the view keeps alive
        base = holder._base
        self.holder = weakref.ref(holder if base is None else base)

    @property
    def nbytes(self) -> int:
        return self.values.nbytes() if self.values is not None else 0


class ValueStore:
    """What is known of the device storages, and the budget values are kept within.

    The budget: bytes of values alive at once, seconds of CPU kernels over the
    prediction, elements of one op. Once the seconds are spent no further op is
    computed; bytes free up as storages are freed. ``exhausted`` says which limit
    stopped values first (a sentence), or None.
    """

    def __init__(self, max_bytes: int = VALUES_BUDGET_BYTES, max_s: float = VALUES_BUDGET_S,
                 max_op_elements: int = VALUES_MAX_OP_ELEMENTS):
        self.max_bytes = max_bytes
        self.max_s = max_s
        self.max_op_elements = max_op_elements
        self.live_bytes = 0
        self.spent_s = 0.0
        self.exhausted: Optional[str] = None
        self._known: dict = {}  # storage address -> _Known
        self._purged_at = 0  # the table's size at the last look for freed storages

    # -- the table ---------------------------------------------------------------------------
    def born(self, tensor: torch.Tensor, storage_nbytes: int) -> None:
        """A new storage: whatever was known at its address was a freed storage's."""
        self._set(tensor, _Known(tensor, storage_nbytes, why=WHY_UNSEEN))

    def _drop(self, address: int) -> None:
        known = self._known.pop(address, None)
        if known is not None:
            self.live_bytes -= known.nbytes

    def entry(self, tensor: torch.Tensor) -> Optional[_Known]:
        try:
            known = self._known.get(_address(tensor))
        except RuntimeError:  # a layout without storage (sparse)
            return None
        if known is not None and known.holder() is None:  # an alias the prediction had not seen holds it
            base = tensor._base
            known.holder = weakref.ref(tensor if base is None else base)  # a view keeps its base alive
        return known

    def _set(self, tensor: torch.Tensor, known: _Known) -> None:
        address = _address(tensor)
        self._drop(address)
        self._known[address] = known
        self.live_bytes += known.nbytes

    # -- values ------------------------------------------------------------------------------
    def values_of(self, tensor: torch.Tensor):
        known = self.entry(tensor)
        return known.values if known is not None else None

    def keep(self, device: torch.Tensor, cpu: torch.Tensor, budgeted: bool = True) -> Optional[str]:
        """``cpu``'s storage holds ``device``'s values from now on; why not (a sentence) where it cannot.

        ``budgeted=False``: kept whatever the budget says (a filter's indices, which follow from the
        prediction's own rule for values it has not, are small and are not computed values)."""
        values = cpu.untyped_storage()
        known = self.entry(device)
        if known is not None and known.values is values:
            return None
        why = self.refuses_bytes(values.nbytes() - (known.nbytes if known is not None else 0)) if budgeted else None
        if why is not None:
            self.forget(device, why)
            return why
        self._set(device, _Known(device, self._storage_nbytes(device, known), values=values))
        return None

    @staticmethod
    def _storage_nbytes(tensor: torch.Tensor, known: Optional[_Known]) -> int:
        if known is not None:
            return known.storage_nbytes
        return (tensor.storage_offset() + extent(tensor)) * tensor.element_size()  # at least this

    def materialize(self, tensor: torch.Tensor) -> Optional[str]:
        """Give a device tensor without values some, where what it holds is known without them: storage
        ``torch.empty`` made and nothing wrote yet (any bytes do: the device's are as arbitrary), or one
        constant. None when it has values now, else why not (a sentence)."""
        known = self.entry(tensor)
        if known is None or known.values is not None:
            return None if known is not None else WHY_UNSEEN
        if known.why != WHY_EMPTY and known.constant is None:
            return known.why or WHY_UNSEEN
        with torch._C._DisableTorchDispatch():
            fresh = torch.empty(known.storage_nbytes, dtype=torch.uint8)
            if known.constant is not None:
                dtype, value = known.constant
                fresh.view(dtype).fill_(value)
        constant = known.constant
        why = self.keep(tensor, fresh)
        if why is not None and constant is not None:  # refused: still the constant it was
            self.set_constant(tensor, constant[1], why)
        return why

    def covers_storage(self, tensor: torch.Tensor) -> bool:
        """Whether a device tensor is all of its storage (writing it leaves nothing unknown there)."""
        known = self.entry(tensor)
        return (known is not None and tensor.is_contiguous() and tensor.storage_offset() == 0
                and tensor.numel() * tensor.element_size() == known.storage_nbytes)

    def forget(self, tensor: torch.Tensor, why: str) -> None:
        """``tensor`` was written with values the prediction does not have."""
        try:
            self._set(tensor, _Known(tensor, self._storage_nbytes(tensor, self.entry(tensor)), why=why))
        except RuntimeError:  # a layout without storage (sparse)
            pass

    def set_constant(self, tensor: torch.Tensor, value, why: str) -> None:
        """``tensor`` (without values) was written with ``value`` everywhere; None: with something unknown."""
        value = _as_dtype(value, tensor.dtype) if value is not None and self.covers_storage(tensor) else None
        self._set(tensor, _Known(tensor, self._storage_nbytes(tensor, self.entry(tensor)),
                                 constant=(tensor.dtype, value) if value is not None else None, why=why))

    # -- the budget --------------------------------------------------------------------------
    def refuses_op(self, elements: int) -> Optional[str]:
        """Why an op on ``elements`` device elements is not computed, or None where it may be."""
        if self.max_bytes <= 0:
            return self._spent(_VALUES_OFF)
        if self.spent_s > self.max_s:
            return self._spent(f"beyond the prediction's budget of {self.max_s:g} s of CPU kernels for values")
        if elements > self.max_op_elements:
            return self._spent(f"an op on {elements:,} elements, beyond the {self.max_op_elements:,} the prediction "
                               "computes in one call")
        return None

    def refuses_bytes(self, nbytes: int) -> Optional[str]:
        """Why ``nbytes`` more of values cannot be kept, or None where they can."""
        if self.live_bytes + nbytes > self.max_bytes:
            self._drop_orphans()
        if self.live_bytes + nbytes > self.max_bytes:
            if self.max_bytes <= 0:
                return self._spent(_VALUES_OFF)
            return self._spent(f"beyond the prediction's budget of {self.max_bytes / 2**20:,.0f} MiB of values")
        return None

    def _drop_orphans(self) -> None:
        """Forget storages no tensor the prediction saw still holds: most were freed (an alias it never saw
        may still hold one: its values are then unknown, never wrong). Not again before the table grew."""
        if len(self._known) < self._purged_at + _PURGE_EVERY:
            return
        for address in [a for a, known in self._known.items() if known.values is not None and known.holder() is None]:
            self._drop(address)
        self._purged_at = len(self._known)

    def _spent(self, why: str) -> str:
        self.exhausted = self.exhausted or why
        return why

    def timed(self, started_s: float) -> None:
        self.spent_s += time.perf_counter() - started_s


def _as_dtype(value, dtype: torch.dtype):
    """``value`` as a tensor of ``dtype`` holds it, or None where it cannot be said (NaN as an integer)."""
    if isinstance(value, complex) and not dtype.is_complex:
        value = value.real  # what copying a complex value into a real tensor keeps
    try:
        if dtype == torch.bool:
            return bool(value)
        if dtype.is_complex:
            return complex(value)
        return float(value) if dtype.is_floating_point else int(value)
    except (TypeError, ValueError, OverflowError):
        return None


# -- the store of the stand-in installed now -------------------------------------------------------
_store: Optional[ValueStore] = None


def install(store: Optional[ValueStore]) -> None:
    global _store
    _store = store


def born(tensor: torch.Tensor, storage_nbytes: int) -> None:
    if _store is not None:
        _store.born(tensor, storage_nbytes)


def extent(tensor: torch.Tensor) -> int:
    """How many elements of its storage, from its offset on, a tensor's geometry reaches."""
    return 0 if 0 in tensor.shape else 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))


def has_values(tensor: torch.Tensor) -> bool:
    return _store is not None and _store.values_of(tensor) is not None


def cpu_view(tensor: torch.Tensor) -> torch.Tensor:
    """A CPU tensor on the device tensor's values, in its geometry: what a kernel writes into it is kept."""
    values = _store.values_of(tensor)
    with torch._C._DisableTorchDispatch():
        view = torch.empty((0,), dtype=tensor.dtype)
        view.set_(values, tensor.storage_offset(), tuple(tensor.shape), tuple(tensor.stride()))
        if tensor.is_conj():
            torch._C._set_conj(view, True)
        if tensor.is_neg():
            torch._C._set_neg(view, True)
    return view


def unknown_why(tensor: torch.Tensor) -> str:
    """Why a device tensor has no values (a sentence)."""
    known = _store.entry(tensor) if _store is not None else None
    return (known.why if known is not None else None) or WHY_UNSEEN


def forget(tensor: torch.Tensor, why: str) -> None:
    if _store is not None:
        _store.forget(tensor, why)


def set_constant(tensor: torch.Tensor, value, why: str) -> None:
    if _store is not None:
        _store.set_constant(tensor, value, why)


def constant_of(tensor) -> Optional[object]:
    """The value every element of a device tensor without values holds, where the prediction knows it."""
    if _store is None or not isinstance(tensor, torch.Tensor) or tensor.device.type in ("cpu", "meta"):
        return None
    known = _store.entry(tensor)
    constant = known.constant if known is not None else None
    if constant is None or constant[0] != tensor.dtype:
        return None
    value = constant[1]
    # a conjugate or negative view of the storage reads its constant so (the storage holds the plain one)
    if tensor.is_conj() and isinstance(value, complex):
        value = value.conjugate()
    return -value if tensor.is_neg() else value
