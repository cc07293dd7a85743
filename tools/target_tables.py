"""Write the op tables ``--target xpu`` and ``--target mps`` predict from, read from a torch wheel's own files.

    python tools/target_tables.py --site-packages ~/.cache/dmlprof/venv-torch2.14.1/lib/python3.11/site-packages \\
        --xpu-fallback /path/to/XPUFallback.cpp --xpu-fallback-origin "intel/torch-xpu-ops release/2.14 a4c530f07" \\
        --mps-fallback /path/to/MPSFallback.mm --mps-fallback-origin "pytorch/pytorch aten/src/ATen/mps/MPSFallback.mm@..."

Reads, without importing torch and without any device:

- ``torchgen/packaged/ATen/native/native_functions.yaml``: per aten overload, whether the backend's dense
  dispatch key (``XPU``, ``MPS``) names a kernel, directly or through its ``structured_delegate`` (a
  structured op's functional and in-place forms get a kernel on every key its ``out=`` form has), or whether a
  composite kernel serves every backend;
- ``torch/testing/_internal/common_mps.py`` (parsed, never imported: it imports only on a Mac): the ops
  PyTorch's own MPS tests expect to fail per dtype, the complex-capable set, the macOS-version lists;
- the backend's always-on CPU fallback list, which no CPU wheel holds (it is compiled into the backend's own
  library): a source file given on the command line, its origin recorded in the table.

Writes ``dmlprof/tables/data/targets/<target>-torch<version>.json`` (format ``dmlprof-target-table``); each
file says what it was read from. Adding a target is one more file here and one semantics module in
``dmlprof/targets/`` (docs/targets.md).
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

import yaml

OUT_DIR = Path(__file__).resolve().parents[1] / "dmlprof" / "tables" / "data" / "targets"
COMPOSITE_KEYS = {"CompositeImplicitAutograd": "composite_implicit",
                  "CompositeImplicitAutogradNestedTensor": None,
                  "CompositeExplicitAutograd": "composite_explicit",
                  "CompositeExplicitAutogradNonFunctional": "composite_explicit"}
#: the dense dispatch key of each target (Sparse*/NestedTensor*/Quantized* keys are other tensor kinds)
TARGET_KEYS = {"xpu": "XPU", "mps": "MPS"}
#: the lists of common_mps.py a prediction reads (names of its local variables); the rest compare values with
#: the CPU's (precision, undefined order), which say nothing of whether a call runs
MPS_FAILURE_LISTS = ("UNIMPLEMENTED_XFAILLIST", "MACOS_BEFORE_15_0_XFAILLIST", "MACOS_BEFORE_14_4_XFAILLIST")
MPS_WRONG_RESULT_LISTS = ("UNDEFINED_XFAILLIST", "ON_MPS_XFAILLIST")


def read_yaml(path: Path) -> list:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=loader)


def op_full_name(func: str) -> str:
    """``add.Tensor(Tensor self, ...) -> Tensor`` -> ``aten::add.Tensor``."""
    return "aten::" + func.split("(", 1)[0].strip()


def dispatch_keys(entry: dict) -> dict:
    """``{key: kernel}`` of an entry, each ``"CPU, CUDA: k"`` split into its keys."""
    keys = {}
    for spelled, kernel in (entry.get("dispatch") or {}).items():
        for key in spelled.split(","):
            keys[key.strip()] = kernel
    return keys


def classify(entries: list, key: str) -> dict:
    """``{aten::name.overload: native | composite_explicit | composite_implicit | missing}`` for ``key``."""
    by_name = {op_full_name(e["func"]): e for e in entries}
    kinds = {}
    for name, entry in by_name.items():
        keys = dispatch_keys(entry)
        delegate = entry.get("structured_delegate")
        if key in keys:
            kinds[name] = "native"
        elif delegate and key in dispatch_keys(by_name.get("aten::" + delegate, {})):
            kinds[name] = "native"
        elif not keys and not delegate:
            kinds[name] = "composite_implicit"  # no dispatch section: torchgen makes it CompositeImplicitAutograd
        else:
            composite = [COMPOSITE_KEYS[k] for k in keys if COMPOSITE_KEYS.get(k)]
            kinds[name] = composite[0] if composite else "missing"
    return kinds


def fallback_list(path: Path, block_hint: str) -> list:
    """The ops a backend's source registers to its CPU fallback unconditionally, as ``aten::name.overload``.

    XPU spells them as a ``fallback_list = {...}`` of strings; MPS as ``m.impl("op", ...mps_fallback>())``.
    """
    text = path.read_text(encoding="utf-8")
    found = re.search(r"fallback_list\s*=\s*\{(.*?)\};", text, re.S)
    if found:
        names = re.findall(r'"([^"]+)"', found.group(1))
    else:
        names = re.findall(r'm\.impl\(\s*"([^"]+)"\s*,\s*torch::CppFunction::makeFromBoxedFunction<&'
                           + re.escape(block_hint) + r'>', text)
    return sorted({"aten::" + name for name in names})


def cpp_registrations(path: Path, key: str) -> list:
    """The ops a C++ source registers on ``key`` outside native_functions.yaml, as ``namespace::name.overload``:
    ``m.impl`` inside ``[STABLE_]TORCH_LIBRARY_IMPL(aten|torchvision, KEY, m) { ... }``, and the entries of
    torch-xpu-ops' lazy registration table that run on the device (``{"torchvision::nms", false}``)."""
    text = path.read_text(encoding="utf-8")
    names = []
    block = (r"(?:STABLE_)?TORCH_LIBRARY_IMPL\(\s*(aten|torchvision)\s*,\s*" + re.escape(key)
             + r"\s*,\s*m\s*\)\s*\{(.*?)\n\}")
    for found in re.finditer(block, text, re.S):
        namespace = found.group(1)
        for name in re.findall(r'^\s*m\.impl\(\s*(?:TORCH_SELECTIVE_NAME\(\s*)?"([^"]+)"', found.group(2), re.M):
            names.append(name if "::" in name else f"{namespace}::{name}")
    names += re.findall(r'\{\s*"(torchvision::[^"]+)"\s*,\s*false\s*\}', text)  # lazily registered, on the device
    return sorted(set(names))


def _literal(node):
    """A dict/set literal of common_mps.py: dtypes become their names (``torch.float16`` -> ``float16``)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return node.attr
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values)}
    raise ValueError(f"not a literal: {ast.dump(node)[:80]}")


def read_common_mps(path: Path) -> dict:
    """The assigned literals of ``mps_ops_modifier`` (first definition) and ``mps_ops_grad_modifier``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: dict = {}
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or function.name not in ("mps_ops_modifier",
                                                                             "mps_ops_grad_modifier"):
            continue
        prefix = "" if function.name == "mps_ops_modifier" else "GRAD:"
        for node in ast.walk(function):
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            value = getattr(node, "value", None)
            if not isinstance(target, ast.Name) or not isinstance(value, (ast.Dict, ast.Set)):
                continue
            found.setdefault(prefix + target.id, _literal(value))  # the first definition: the MPS one
    return found


def opinfo_aten_names(opinfo: str) -> list:
    """The aten base names an OpInfo name calls by torch's naming (``nn.functional.avg_pool2d`` -> ``avg_pool2d``,
    ``linalg.eig`` -> ``linalg_eig``); an OpInfo with a variant (``logspacetensor_overload``) keeps its name."""
    if opinfo.startswith("nn.functional."):
        return [opinfo[len("nn.functional."):]]
    return [opinfo.replace(".", "_")]


def mps_dtype_gaps(common: dict, kinds: dict) -> dict:
    """Per aten base name: the dtypes PyTorch's MPS tests expect to fail (None: every dtype), with the list."""
    bases = {name.split("::", 1)[1].split(".", 1)[0] for name in kinds}
    gaps: dict = {}
    for list_name in MPS_FAILURE_LISTS + tuple("GRAD:" + n for n in ("XFAILLIST_GRAD",)):
        for opinfo, dtypes in sorted((common.get(list_name) or {}).items()):
            for base in opinfo_aten_names(opinfo):
                if base in bases:
                    gaps.setdefault(base, []).append({"opinfo": opinfo, "list": list_name, "dtypes": dtypes})
    return gaps


def extra_yaml_natives(path: Path, key: str) -> list:
    """The ops a backend's own yaml gives ``key`` a kernel for: a native_functions.yaml of its own (its
    ``dispatch`` entries, structured delegates followed), or an external backend's ``supported:`` list."""
    doc = read_yaml(path)
    if isinstance(doc, dict):
        return sorted({"aten::" + name for name in doc.get("supported") or () if isinstance(name, str)})
    return sorted(op for op, kind in classify(doc, key).items() if kind == "native")


def target_table(target: str, torch_version: str, wheel: Path, entries: list, fallback: dict,
                 common: dict, extra: list, extra_yaml: list = ()) -> dict:
    key = TARGET_KEYS[target]
    kinds = classify(entries, key)
    extra_ops = {}
    for path, origin in extra_yaml:  # before torch 2.14, XPU's registrations lived in torch-xpu-ops' yaml
        for op in extra_yaml_natives(path, key):
            if op in kinds and kinds[op] != "native":
                kinds[op] = "native"
                extra_ops[op] = origin
    for path, origin in extra:
        for op in cpp_registrations(path, key):
            # an aten op the yaml knows, or another library's (torchvision's) that the wheel's yaml cannot know
            if kinds.get(op, "native" if op.startswith("aten::") else None) != "native":
                kinds[op] = "native"
                extra_ops[op] = origin
    fallback_ops = [op for op in fallback["ops"] if kinds.get(op) != "native"]
    for op in fallback_ops:
        kinds[op] = "fallback"
    counts: dict = {}
    for kind in kinds.values():
        counts[kind] = counts.get(kind, 0) + 1
    doc = {
        "format": "dmlprof-target-table", "format_version": 1,
        "target": target, "dispatch_key": key, "torch_version": torch_version,
        "source": {
            "registrations": f"torch {torch_version} wheel: torchgen/packaged/ATen/native/native_functions.yaml",
            "entries_naming_key": sum(1 for e in entries if key in dispatch_keys(e)),
            "fallback_list": fallback["origin"],
            "read_by": "tools/target_tables.py",
        },
        "counts": dict(sorted(counts.items())),
        "registered_outside_yaml": dict(sorted(extra_ops.items())),
        "cpu_fallback": fallback_ops,
        "cpu_fallback_listed_but_native": sorted(set(fallback["ops"]) - set(fallback_ops)),
        "ops": dict(sorted(kinds.items())),
    }
    if target == "mps":
        doc["source"]["dtype_gaps"] = f"torch {torch_version} wheel: torch/testing/_internal/common_mps.py"
        doc["dtypes"] = {
            "unsupported": ["float64", "complex128"],  # MPS has no double: every test xfails float64/cdouble
            "complex_opinfos": sorted(common.get("SUPPORTED_COMPLEX_OPS") or ()),
            "gaps": mps_dtype_gaps(common, kinds),
            "wrong_results": {name: (common.get(name) or {}) for name in MPS_WRONG_RESULT_LISTS},
        }
    return doc


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site-packages", required=True, type=Path, help="the wheel's site-packages folder")
    parser.add_argument("--torch-version", help="default: read from torch/version.py")
    parser.add_argument("--xpu-fallback", type=Path, required=True, help="torch-xpu-ops' XPUFallback source")
    parser.add_argument("--xpu-fallback-origin", required=True, help="repository, branch and commit it came from")
    parser.add_argument("--mps-fallback", type=Path, required=True, help="pytorch's MPSFallback.mm")
    parser.add_argument("--mps-fallback-origin", required=True, help="repository, path and commit it came from")
    parser.add_argument("--cpp-registrations", nargs=3, action="append", default=[],
                        metavar=("TARGET", "FILE", "ORIGIN"),
                        help="a C++ source registering ops on the target's key outside native_functions.yaml")
    parser.add_argument("--extra-yaml", nargs=3, action="append", default=[], metavar=("TARGET", "FILE", "ORIGIN"),
                        help="a backend's own yaml of registrations (torch-xpu-ops' before torch 2.14)")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    site = args.site_packages
    version = args.torch_version or re.search(r"__version__ = '([^'+]+)",
                                               (site / "torch" / "version.py").read_text()).group(1)
    entries = read_yaml(site / "torchgen" / "packaged" / "ATen" / "native" / "native_functions.yaml")
    common = read_common_mps(site / "torch" / "testing" / "_internal" / "common_mps.py")
    fallbacks = {"xpu": {"ops": fallback_list(args.xpu_fallback, "xpu_fallback_impl"),
                         "origin": args.xpu_fallback_origin},
                 "mps": {"ops": fallback_list(args.mps_fallback, "mps_fallback"), "origin": args.mps_fallback_origin}}
    args.out.mkdir(parents=True, exist_ok=True)
    for target in TARGET_KEYS:
        extra = [(Path(path), origin) for name, path, origin in args.cpp_registrations if name == target]
        extra_yaml = [(Path(path), origin) for name, path, origin in args.extra_yaml if name == target]
        doc = target_table(target, version, site, entries, fallbacks[target], common, extra, extra_yaml)
        path = args.out / f"{target}-torch{version}.json"
        path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
        print(f"{path}: {doc['source']['entries_naming_key']} yaml entries name {doc['dispatch_key']}; "
              f"{doc['counts']}; {len(doc['cpu_fallback'])} always fall back", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
