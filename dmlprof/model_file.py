"""Reading a model file: is it the model contract, or a script to run?

The decision is made from the file's syntax tree, without executing it, so a
script that trains at import time is not run twice.
"""
from __future__ import annotations

import ast
import importlib.util
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from dmlprof.errors import ModelFileError, ModelRaisedError

REQUIRED = ("build_model", "make_batch")  # optional: loss_fn, make_optimizer, BATCH_SIZE (docs/model_contract.md)


@dataclass
class ModelFile:
    path: Path
    mode: str  # "contract" or "script"
    defines: frozenset


def inspect_model_file(path) -> ModelFile:
    """Classify ``path``; raises ModelFileError for anything unusable."""
    path = Path(path)
    if not path.exists():
        raise ModelFileError(f"no such file: {path}")
    if not path.is_file():
        raise ModelFileError(f"not a file: {path}")
    try:
        source = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ModelFileError(f"{path} is not a Python file (not UTF-8 text)") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ModelFileError(f"{path} is not a Python file: syntax error at line {exc.lineno}: {exc.msg}") from None
    defines = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defines.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defines.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defines.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
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
    return ModelFile(path, "script", frozenset(defines))


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
        raise ModelRaisedError(f"importing {path} raised {describe_exception(exc)}") from exc
    finally:
        if added and directory in sys.path:
            sys.path.remove(directory)
    return module


def describe_exception(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
