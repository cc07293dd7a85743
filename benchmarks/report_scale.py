"""How the HTML report scales: a synthetic session of 100,000 op calls.

Renders the report and measures its size and the time to DOMContentLoaded in
headless Chromium (Navigation Timing API), notes the size and write time of the
TensorBoard trace of the same session, then writes
benchmarks/results/report_scale.json. Targets (issue 5): <= 5 MB and
DOMContentLoaded <= 2 s.

    python benchmarks/report_scale.py [--calls 100000] [--runs 3] [--keep FILE]

The synthetic session is realistic in variety, not in meaning: ~300 distinct
ops, a few hundred nested module paths, forward/backward/optimizer phases,
two threads, a few percent of calls falling back (some composites with inner
ops), host<->device copies, and a batch-size sweep.
"""
from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "report_scale.json"


def synthetic_session(calls: int = 100_000, distinct_ops: int = 300, seed: int = 0, wide: bool = False):
    """A Session with ``calls`` op calls, built directly (no model runs).

    ``wide``: ~2,000 leaf modules and 3,000 source lines instead of a
    ViT-sized tree (a stress case for the module tree).
    """
    from dmlprof.schema import typed_ops_frame
    from dmlprof.session import Session

    rng = random.Random(seed)
    bases = ["convolution", "addmm", "mm", "bmm", "relu", "gelu", "add", "mul", "div", "sub", "native_layer_norm",
             "native_batch_norm", "softmax", "_log_softmax", "nll_loss_forward", "embedding", "index_select", "cat",
             "view", "permute", "transpose", "clone", "copy_", "_to_copy", "sum", "mean", "max_pool2d_with_indices",
             "avg_pool2d", "sigmoid", "tanh", "lerp", "sqrt", "addcdiv_", "addcmul_", "_foreach_add_", "_foreach_mul_",
             "_foreach_lerp_", "threshold_backward", "gelu_backward", "convolution_backward", "masked_fill", "where",
             "scatter_add", "gather", "cumsum", "sort", "topk", "nonzero", "_local_scalar_dense", "zeros_like"]
    overloads = ["", ".Tensor", ".Scalar", ".out", ".default", ".self", ".dim_IntList"]
    ops = []
    while len(ops) < distinct_ops:
        name = f"aten::{rng.choice(bases)}{rng.choice(overloads)}"
        if len(ops) > len(bases) * 3:
            name = f"aten::{rng.choice(bases)}_v{len(ops)}"
        if name not in ops:
            ops.append(name)
    falls = set(rng.sample(ops, 12))
    modules = ["Net"]
    for block in range(12):
        modules.append(f"Net.blocks.{block}")
        for part in ("attn", "attn.qkv", "attn.proj", "norm1", "mlp", "mlp.fc1", "mlp.act", "mlp.fc2", "norm2"):
            modules.append(f"Net.blocks.{block}.{part}")
    modules += ["Net.embed", "Net.head", ""]
    if wide:
        modules = [f"Net.stage{a}.block{b}.layer{c}.sub{d}" for a in range(4) for b in range(10) for c in range(10)
                   for d in range(5)] + [""]
    weights = [rng.paretovariate(1.2) for _ in ops]
    columns = {c: [] for c in ("seq", "step", "phase", "op", "verdict", "evidence", "fallback_ops", "fallback_calls",
                               "module", "source", "input_devices", "output_devices", "dtypes", "shapes",
                               "start_ns", "time_ns", "bytes_moved", "transfer", "thread")}
    steps = 5
    per_step = calls // steps
    clock = 0
    seq = 0
    for step in range(steps):
        for i in range(per_step if step < steps - 1 else calls - per_step * (steps - 1)):
            position = i / per_step
            phase = "forward" if position < 0.35 else "backward" if position < 0.85 else "optimizer"
            op = rng.choices(ops, weights)[0]
            fallback = op in falls and rng.random() < 0.6
            time_ns = int(rng.lognormvariate(9.5, 1.1)) * (8 if fallback else 1)
            inner = ""
            if fallback:
                inner = f"{op}=1" if "_foreach" not in op else f"aten::lerp.Scalar_out={rng.randint(2, 40)}"
            module = rng.choice(modules) if phase != "optimizer" else ""
            moved = rng.randint(1 << 12, 1 << 22) if fallback or "copy" in op else 0
            columns["seq"].append(seq)
            columns["step"].append(step)
            columns["phase"].append(phase)
            columns["op"].append(op)
            columns["verdict"].append("fallback" if fallback else "cpu" if "nonzero" in op and rng.random() < 0.3 else "device")
            columns["evidence"].append("fallback warning" if fallback else "tensors")
            columns["fallback_ops"].append(inner)
            columns["fallback_calls"].append(sum(int(x.rpartition("=")[2]) for x in inner.split(";") if x))
            columns["module"].append(module)
            line = rng.randint(1, 3000) if wide else 40 + modules.index(module) % 90
            columns["source"].append(f"models/synthetic.py:{line}" if module else "train.py:12")
            columns["input_devices"].append("dml")
            columns["output_devices"].append("dml")
            columns["dtypes"].append("float32")
            columns["shapes"].append("[[64, 197, 192], [192]]")
            columns["start_ns"].append(clock)
            columns["time_ns"].append(time_ns)
            columns["bytes_moved"].append(moved)
            columns["transfer"].append("both" if fallback else "h2d" if moved else "")
            columns["thread"].append(1 if phase == "backward" and rng.random() < 0.5 else 0)
            clock += time_ns + rng.randint(200, 3000)
            seq += 1
    frame = typed_ops_frame(pd.DataFrame(columns))
    meta = {
        "dmlprof_version": "0.1.0", "torch_version": "2.4.1", "python_version": "3.11.7", "platform": "synthetic",
        "backend": "dml", "device": "privateuseone:0", "device_name": "Synthetic GPU",
        "backend_versions": {"torch-directml": "0.2.5.dev240914"}, "mode": "live", "run_mode": "contract",
        "model": "models/synthetic.py", "model_name": "synthetic", "batch_size": 64, "warmup_steps": 1,
        "steps": steps, "optimizer": "AdamW", "timing": "synthetic", "started_at": "2026-11-30T00:00:00",
        "partial": False, "step_times_ms": [clock / steps / 1e6] * steps,
        "memory": {"peak_bytes": 3 << 30, "source": "synthetic"},
    }
    sweep = {
        "rows": [
            {"batch_size": bs, "status": "ok" if bs <= 256 else "oom", "samples_per_s": rate, "step_ms_p50": 1000 * bs / rate if rate else 0.0,
             "step_ms_p95": 1100 * bs / rate if rate else 0.0, "peak_memory_bytes": (bs * 24 << 20) if bs <= 256 else None,
             "memory_source": "synthetic", "fallback_time_share": 0.04, "error": None if bs <= 256 else "out of memory"}
            for bs, rate in ((16, 900.0), (32, 1500.0), (64, 2100.0), (128, 2250.0), (256, 2290.0), (512, 0.0))
        ],
        "recommended_batch_size": 128, "knee_batch_size": 128, "memory_budget_bytes": 4 << 30,
    }
    return Session(meta=meta, ops=frame, **{"sweep": sweep})


def chromium_options(user_data_dir: str):
    """Headless Chromium as root, offline, with a fresh profile."""
    from selenium.webdriver.chrome.options import Options

    options = Options()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--window-size=1400,1000",
                 f"--user-data-dir={user_data_dir}"):
        options.add_argument(flag)
    binary = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if binary:
        options.binary_location = binary
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return options


def chromium_driver(user_data_dir: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    driver_path = shutil.which("chromedriver")
    service = Service(executable_path=driver_path) if driver_path else Service()
    return webdriver.Chrome(service=service, options=chromium_options(user_data_dir))


def measure_load(path: Path, runs: int) -> dict:
    """DOMContentLoaded and load times (ms, from navigation start) over ``runs`` fresh loads."""
    profile = tempfile.mkdtemp(prefix="dmlprof-chromium-")
    driver = chromium_driver(profile)
    try:
        dcl, load, severe = [], [], []
        for _ in range(runs):
            driver.get("about:blank")
            driver.get(path.resolve().as_uri())
            for _ in range(200):
                timing = driver.execute_script(
                    "var n = performance.getEntriesByType('navigation')[0];"
                    "return n ? [n.domContentLoadedEventEnd, n.loadEventEnd] : null;")
                if timing and timing[1] > 0:
                    break
                time.sleep(0.05)
            dcl.append(round(float(timing[0]), 1))
            load.append(round(float(timing[1]), 1))
            severe += [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        rows = driver.execute_script("return document.querySelectorAll('#ops-table tbody tr').length")
        return {"dom_content_loaded_ms": dcl, "load_ms": load, "console_errors": severe, "op_table_rows_in_dom": rows}
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3, help="page loads to time")
    parser.add_argument("--keep", help="also keep the HTML at this path")
    parser.add_argument("--no-write", action="store_true", help="print, do not write results/")
    args = parser.parse_args(argv)

    from dmlprof.render.html import render_html

    session = synthetic_session(args.calls)
    started = time.perf_counter()
    html = render_html(session)
    render_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.html"
        path.write_text(html, encoding="utf-8")
        if args.keep:
            Path(args.keep).write_text(html, encoding="utf-8")
        size = path.stat().st_size
        browser = measure_load(path, args.runs)
        from dmlprof.render.trace import write_tensorboard_run

        started = time.perf_counter()
        trace_path = write_tensorboard_run(session, Path(tmp) / "tb")
        trace_s = time.perf_counter() - started
        trace_bytes = trace_path.stat().st_size
    # the stress case: a wide module tree (only the page figures)
    wide = synthetic_session(args.calls, wide=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "wide.html"
        path.write_text(render_html(wide), encoding="utf-8")
        wide_result = {"modules": int(wide.ops["module"].nunique()), "html_bytes": path.stat().st_size,
                       **measure_load(path, args.runs)}
    dcl_max = max(browser["dom_content_loaded_ms"] + wide_result["dom_content_loaded_ms"])
    result = {
        "benchmark": "report_scale",
        "op_calls": len(session.ops),
        "distinct_ops": int(session.ops["op"].nunique()),
        "modules": int(session.ops["module"].nunique()),
        "html_bytes": size,
        "html_mib": round(size / 2**20, 3),
        "render_s": round(render_s, 3),
        **browser,
        "tensorboard_trace_bytes": trace_bytes,
        "tensorboard_trace_write_s": round(trace_s, 3),
        "stress_wide_module_tree": wide_result,
        "targets": {"html_bytes_max": 5 * 10**6, "dom_content_loaded_ms_max": 2000},
        "meets_targets": (max(size, wide_result["html_bytes"]) <= 5 * 10**6 and dcl_max <= 2000
                          and not browser["console_errors"] and not wide_result["console_errors"]),
        "host": {"python": platform.python_version(), "platform": platform.platform(), "note": "2 shared CPU cores"},
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text + "\n", encoding="utf-8")
    return 0 if result["meets_targets"] else 1


if __name__ == "__main__":
    sys.exit(main())
