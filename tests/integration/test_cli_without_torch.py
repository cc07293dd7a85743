"""``dmlprof --help`` and ``dmlprof report`` start without importing torch; ``dmlprof ops`` works without it.

Re-rendering a saved session needs no device; torch costs seconds to import, so these commands must not pay
for it. ``dmlprof ops`` applies the scan's own rules to the op (predicates on tensors: issue 32), so it imports
torch where it is installed, and answers from the shipped table alone where it is not.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from session_kinds import KINDS

# Runs the CLI's own entry point, then says whether torch (or pandas) was imported.
PROBE = textwrap.dedent("""
    import sys
    from dmlprof.cli import main
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:  # argparse exits after --help
        code = exc.code
    print("DMLPROF-PROBE", code, "torch" in sys.modules, "pandas" in sys.modules, file=sys.stderr)
""")
# The same, on a machine where torch cannot be imported.
PROBE_NO_TORCH = "import sys\nsys.modules['torch'] = None\n" + PROBE


def probe(*args, cwd, code=PROBE):
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          encoding="utf-8", cwd=cwd, timeout=300)
    line = [ln for ln in done.stderr.splitlines() if ln.startswith("DMLPROF-PROBE")]
    assert line, done.stderr
    _, code, torch, pandas = line[-1].split()
    return done, int(code), torch == "True", pandas == "True"


@pytest.mark.quick
def test_help_imports_neither_torch_nor_pandas(tmp_path):
    done, code, torch, pandas = probe("--help", cwd=tmp_path)
    assert code == 0 and "scan" in done.stdout and "report" in done.stdout
    assert not torch and not pandas


@pytest.mark.parametrize("kind", ["live_dml", "verified", "replaced", "predicted", "sweep"])
def test_report_rerenders_every_format_without_torch(tmp_path, kind):
    path = KINDS[kind]().save(tmp_path / f"{kind}.session.json")
    done, code, torch, _ = probe("report", path, "--json", tmp_path / "r.json", "--html", tmp_path / "r.html",
                                 cwd=tmp_path)
    assert code == 0, done.stderr
    assert not torch
    assert done.stdout.startswith("dmlprof ") and (tmp_path / "r.html").is_file()
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))


def test_ops_looks_up_the_shipped_table_without_torch(tmp_path):
    done, code, _, _ = probe("ops", "aten::lerp.Scalar_out", cwd=tmp_path, code=PROBE_NO_TORCH)
    assert code == 0, done.stderr
    assert "aten::lerp.Scalar_out: fallback" in done.stdout and "Traceback" not in done.stderr
