"""What the zoo holds: every ``*.py`` file of a folder, read (never run) to know how to run it.

The harness knows nothing about any particular file. From a file's syntax tree
alone it decides:

* the **kind**: ``contract`` when the top level defines both ``build_model`` and
  ``make_batch`` (the rule of docs/model_contract.md), else ``script``;
* what it **requires**: the top-level packages it imports, outside a
  ``try``/``except ImportError`` (an optional import), minus the standard
  library, sibling modules of its folder (followed for their own imports) and
  ``torch_directml`` (dmlprof provides a stand-in for scripts);
* which device it was **written for**: a script that imports
  ``torch_directml`` picks the DirectML device itself; one that names
  ``cuda`` (a ``"cuda"`` or ``"cuda:N"`` string, ``.cuda()``, ``torch.cuda``) is scanned with
  ``--from cuda``, the question "what would this CUDA script do on DirectML?";
  anything else runs as written.
"""
from __future__ import annotations

import ast
import importlib.util
import io
import os
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

#: Folders the zoo tests run over; ``DMLPROF_ZOO_DIRS`` (``os.pathsep``-separated) replaces them.
ZOO = Path(__file__).resolve().parent.parent
DEFAULT_DIRS = (ZOO / "models", ZOO / "scripts")
DIRS_ENV = "DMLPROF_ZOO_DIRS"
#: Set to 1 (CI does) and a missing package fails the entry's tests instead of skipping them.
STRICT_ENV = "DMLPROF_ZOO_STRICT"
#: A comma-separated list of packages: only the entries that require one of them run (CI's newest-torch
#: lane runs the torchvision and timm entries; the rest already run on a current torch in lane 1).
REQUIRING_ENV = "DMLPROF_ZOO_REQUIRING"
#: A comma-separated list of entry names this run leaves out (CI's newest-torch lane leaves out faster_rcnn, whose
#: calls mask_rcnn makes too: Mask R-CNN is Faster R-CNN with a mask head; the torch 2.4.1 lane runs both).
EXCEPT_ENV = "DMLPROF_ZOO_EXCEPT"
#: Provided by dmlprof for scripts, never a requirement.
PROVIDED = frozenset({"torch_directml"})
_OPTIONAL_HANDLERS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})

#: (warm-up, measured) optimizer steps, for model files and scripts alike (``--warmup 1 --steps 2``):
#: a script written for thousands of steps stops after three.
WINDOW = (1, 2)


@dataclass(frozen=True)
class Entry:
    path: Path
    kind: str                 # "contract" or "script"
    requires: tuple           # top-level package names
    from_device: Optional[str]  # "cuda" for scripts written for CUDA, else None

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def window(self) -> tuple:
        """(warm-up optimizer steps, measured optimizer steps)."""
        return WINDOW

    def missing(self) -> list:
        """Required packages this interpreter cannot import."""
        return [name for name in self.requires if importlib.util.find_spec(name) is None]


def zoo_dirs() -> list:
    configured = os.environ.get(DIRS_ENV, "").strip()
    if configured:
        return [Path(p) for p in configured.split(os.pathsep) if p]
    return list(DEFAULT_DIRS)


def discover(dirs=None) -> list:
    """Every ``*.py`` not starting with ``_`` in ``dirs``, sorted by folder then name."""
    found = []
    for folder in dirs or zoo_dirs():
        for path in sorted(Path(folder).glob("*.py")):
            if not path.name.startswith("_"):
                found.append(read_entry(path))
    return found


def _names(variable: str) -> set:
    return {name.strip() for name in os.environ.get(variable, "").split(",") if name.strip()}


def selected(entries: list) -> list:
    """``entries``, or only those requiring one of the packages named in ``DMLPROF_ZOO_REQUIRING``, less the ones
    named in ``DMLPROF_ZOO_EXCEPT``."""
    wanted, left_out = _names(REQUIRING_ENV), _names(EXCEPT_ENV)
    return [entry for entry in entries
            if (not wanted or wanted & set(entry.requires)) and entry.name not in left_out]


def read_entry(path: Path) -> Entry:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    kind = "contract" if {"build_model", "make_batch"} <= _top_level_names(tree) else "script"
    requires = tuple(sorted(_requirements(path, seen=set())))
    from_device = None
    if kind == "script" and "torch_directml" not in _imports(tree, optional_too=True):
        from_device = "cuda" if _names_cuda(path) else None
    return Entry(path.resolve(), kind, requires, from_device)


def strict(missing: list) -> bool:
    """Whether an entry missing these packages fails rather than skips.

    ``DMLPROF_ZOO_STRICT=1``: every entry must run. A comma-separated list of packages: entries
    missing one of them fail, others skip (CI's torch 2.13 lane installs transformers, while no
    torchvision imports beside that CPU build).
    """
    value = os.environ.get(STRICT_ENV, "").strip()
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    required = {name.strip() for name in value.split(",") if name.strip()}
    return any(name in required for name in missing)


# -- reading the syntax tree ---------------------------------------------------------------------
def _top_level_names(tree: ast.Module) -> set:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _optional_blocks(tree: ast.AST) -> set:
    """ids of import nodes guarded by ``except ImportError`` (or broader)."""
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            for inner in node.body:
                guarded.update(id(n) for n in ast.walk(inner) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return guarded


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(t, ast.Name) and t.id in _OPTIONAL_HANDLERS for t in types)


def _imports(tree: ast.AST, optional_too: bool = False) -> set:
    guarded = set() if optional_too else _optional_blocks(tree)
    names = set()
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _requirements(path: Path, seen: set) -> set:
    if path in seen:
        return set()
    seen.add(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    needed = set()
    for name in _imports(tree):
        sibling = path.parent / f"{name}.py"
        if sibling.is_file():
            needed |= _requirements(sibling, seen)
        elif (path.parent / name / "__init__.py").is_file() or name in PROVIDED or _is_stdlib(name):
            continue
        else:
            needed.add(name)
    return needed


def _is_stdlib(name: str) -> bool:
    stdlib = getattr(sys, "stdlib_module_names", None)
    if stdlib is not None:
        return name in stdlib
    spec = importlib.util.find_spec(name)  # Python < 3.10: anything outside site-packages
    return spec is not None and "site-packages" not in str(spec.origin or "")


_CUDA_STRING = re.compile(r"^cuda(:\d+)?$")


def _string_value(literal: str) -> str:
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError):  # an f-string
        return ""
    return value if isinstance(value, str) else ""


def _names_cuda(path: Path) -> bool:
    """The source names CUDA: a ``cuda`` identifier or attribute, or a ``"cuda..."`` string."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NAME and token.string == "cuda":
            return True
        if token.type == tokenize.STRING and _CUDA_STRING.match(_string_value(token.string)):
            return True
    return False
