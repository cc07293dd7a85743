"""Reading a model file: is it the model contract, or a script to run?

The decision is made from the file's syntax tree, without executing it, so a
script that trains at import time is not run twice.
"""
from __future__ import annotations

import ast
import importlib.util
import io
import sys
import tokenize
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from dmlprof.errors import ModelFileError, ModelRaisedError

REQUIRED = ("build_model", "make_batch")  # optional: loss_fn, make_optimizer, BATCH_SIZE (docs/model_contract.md)
#: how deep ``from a import *`` chains are followed (a imports * from b, which imports * from c...)
STAR_DEPTH = 4


@dataclass
class ModelFile:
    path: Path
    mode: str  # "contract" or "script"
    defines: frozenset
    #: what the reader should know about how the mode was decided
    notes: tuple = ()


def inspect_model_file(path) -> ModelFile:
    """Classify ``path``; raises ModelFileError for anything unusable."""
    path = Path(path)
    if not path.exists():
        raise ModelFileError(f"no such file: {path}")
    if not path.is_file():
        raise ModelFileError(f"not a file: {path}")
    tree = parse_python(path)
    defines, unread = _top_level_names(tree, [path.parent], 0)
    present = [name for name in REQUIRED if name in defines]
    if len(present) == len(REQUIRED):
        return ModelFile(path, "contract", frozenset(defines))
    if present:
        missing = ", ".join(name for name in REQUIRED if name not in defines)
        raise ModelFileError(
            f"{path} defines {', '.join(present)} but not {missing}: "
            "a model file needs both build_model() and make_batch(batch_size)"
        )
    if not any(not isinstance(node, (ast.Expr, ast.Pass)) for node in tree.body):
        raise ModelFileError(f"{path} is neither a model file (build_model, make_batch) nor a script: it has no code")
    notes = ()
    if unread:
        notes = (f"{path.name} imports * from {', '.join(unread)}, which dmlprof cannot read without running it, "
                 "so it ran as a script; import build_model and make_batch by name to scan it as a model file",)
    return ModelFile(path, "script", frozenset(defines), notes)


def parse_python(path: Path) -> ast.Module:
    """The syntax tree of the Python file ``path``, read, never run; a :class:`ModelFileError` (one line)
    for a file that is not UTF-8 text or has a syntax error, naming where, as Python would."""
    try:
        source = path.read_bytes()
        # as python reads it: a UTF-8 byte-order mark, or a `# -*- coding: latin-1 -*-` line, is the file's own
        # (decoding it as bare UTF-8 refused both, the mark as a "syntax error" python does not show)
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        source.decode(encoding)
    except (UnicodeDecodeError, SyntaxError, LookupError):
        raise ModelFileError(f"{path} is not a Python file (not text in its declared encoding, UTF-8 where it "
                             "declares none)") from None
    except OSError as exc:
        raise ModelFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ModelFileError(f"syntax error in {path} at line {exc.lineno}: {exc.msg}",
                             remedy=f"python {path} shows the same; fix that line") from None
    except ValueError as exc:  # a NUL byte in the source
        raise ModelFileError(f"{path} is not a Python file ({exc})") from None


def _top_level_names(tree: ast.Module, search: list, depth: int) -> tuple:
    """(names a module's top level binds, modules it imports * from that could not be read)."""
    names, unread = set(), []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            found = _star_names(node, search, depth)
            if found is None:
                unread.append("." * node.level + (node.module or ""))
            else:
                names.update(found)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names, unread


def _star_names(node: ast.ImportFrom, search: list, depth: int):
    """What ``from X import *`` binds, read from X's source without importing it; None if unreadable.

    A model file is often split in two (``from mymodel import *``); deciding
    from the syntax tree alone, as for the file itself, means nothing runs twice.
    """
    if node.level or not node.module or depth >= STAR_DEPTH:
        return None
    source = _module_source(node.module, search)
    if source is None:
        return None
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    exported = _literal_all(tree)
    if exported is not None:
        return exported
    names, unread = _top_level_names(tree, [source.parent] + search, depth + 1)
    return None if unread else {name for name in names if not name.startswith("_")}


def module_file(name: str) -> Path:
    """The file ``python -m name`` runs (``name.py``, or a package's ``__main__.py``), looked up as Python
    does, from the current folder first and then sys.path, without importing anything; ModelFileError
    when there is none."""
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        raise ModelFileError(f"-m {name}: not a module name (dotted Python names, such as package.train)")
    for folder in ["", *sys.path]:
        base = Path(folder or ".").joinpath(*parts)
        for candidate in (base / "__main__.py", base.with_suffix(".py")):
            if candidate.is_file():
                return candidate
    raise ModelFileError(f"no module named {name} (looked in the current folder and on sys.path)",
                         remedy="run from the folder that holds the package, or give the file's path")


def _module_source(module: str, search: list):
    """The .py file ``import module`` would load, looked up on the model's folder and sys.path (not imported)."""
    parts = module.split(".")
    for folder in [*search, *sys.path]:
        base = Path(folder or ".").joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _literal_all(tree: ast.Module):
    """``__all__`` when the module spells it as a literal list of names, else None."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                return set(value)
    return None


def import_model_module(path: Path) -> ModuleType:
    """Import a contract file as a fresh module (its ``__main__`` block does not run)."""
    name = f"dmlprof_model_{path.stem}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    directory = str(path.resolve().parent)
    added = directory not in sys.path
    if added:
        sys.path.insert(0, directory)
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        sys.modules.pop(name, None)
        from dmlprof.record.attribution import raised_at  # torch is imported by now: the model file imported it

        at = raised_at(exc)
        raise ModelRaisedError(f"importing {path} raised {describe_exception(exc)}" + (f" (at {at})" if at else "")) from exc
    finally:
        if added and directory in sys.path:
            sys.path.remove(directory)
    return module


def describe_exception(exc: BaseException) -> str:
    text = str(printable(exc)).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def printable(exc: BaseException) -> BaseException:
    """``exc``, or, where its ``str()`` fails (the user's exception class whose ``__str__`` raises), a stand-in of the
    same class name that reads as Python prints it, ``<exception str() failed>``, with its traceback (the user's
    line is found from it): every message dmlprof makes of the error reads it, and none ends in a traceback."""
    try:
        str(exc)
        return exc
    except Exception:
        stand_in = type(type(exc).__name__, (Exception,), {"__str__": lambda self: "<exception str() failed>",
                                                            "__module__": type(exc).__module__})()
        stand_in.__cause__, stand_in.__context__ = exc.__cause__, exc.__context__  # what it was raised from
        return stand_in.with_traceback(exc.__traceback__)
