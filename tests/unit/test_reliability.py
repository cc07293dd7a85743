"""Reliability and security of what dmlprof writes and shows (issue 16), below the CLI.

Each test names the defect it keeps out (D2, D7, ...); the CLI-level probes are
in tests/integration/test_bad_inputs.py.
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from pathlib import Path

import pytest

from dmlprof.session import Session
from session_factory import SWEEP, make_session

POSIX = sys.platform != "win32"


def _session(**meta):
    return make_session([{"op": "aten::addmm", "time_ns": 5_000}, {"op": "aten::cumsum", "verdict": "fallback",
                                                                  "time_ns": 9_000}],
                        meta={"started_at": "2026-11-30T10:00:00", "model": "models/net.py", **meta})


# -- D2: the same model, backend and second never share a file ----------------------------------------
def test_d2_sessions_of_the_same_second_get_a_file_each(tmp_path):
    from dmlprof.output import write_outputs

    session = _session()
    args = argparse.Namespace(out=str(tmp_path / "reports"), json=None, html=None, tb=str(tmp_path / "tb"))
    first, second = write_outputs(session, args), write_outputs(session, args)
    assert first.session_path != second.session_path and not first.problems and not second.problems
    assert second.session_path.name == "net-dml-20261130T100000-2.session.json"
    assert len(list((tmp_path / "reports").glob("*.session.json"))) == 2
    traces = sorted((tmp_path / "tb").glob("*/*.pt.trace.json"))
    assert [t.parent.name for t in traces] == ["net-dml-20261130T100000", "net-dml-20261130T100000-2"]


def test_d2_a_name_taken_meanwhile_is_never_overwritten(tmp_path):
    from dmlprof.files import write_new

    taken = tmp_path / "a.session.json"
    taken.write_text("someone else's", encoding="utf-8")
    written = write_new(taken, "mine", suffix=".session.json")
    assert written.name == "a-2.session.json" and written.read_text(encoding="utf-8") == "mine"
    assert taken.read_text(encoding="utf-8") == "someone else's"


# -- D7: no guessable temp name, nothing written through a planted symlink ----------------------------
@pytest.mark.skipif(not POSIX, reason="symlinks need privileges on Windows")
def test_d7_a_symlink_at_the_old_temp_name_is_not_written_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious", encoding="utf-8")
    target = tmp_path / "out" / "s.session.json"
    target.parent.mkdir()
    # what a local attacker plants in a shared --out, at the name the old code wrote through
    (target.parent / "s.session.json.tmp").symlink_to(victim)
    _session().save(target)
    assert victim.read_text(encoding="utf-8") == "precious"
    assert Session.load(target).meta.to_dict()["model"] == "models/net.py"


@pytest.mark.skipif(not POSIX, reason="POSIX file modes")
def test_d7_reports_get_ordinary_permissions_not_the_temp_files(tmp_path):
    from dmlprof.files import write_atomic

    path = write_atomic(tmp_path / "r.json", "{}")
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


# -- D22 and D5: a failed write leaves the old file and no temp file ---------------------------------
def test_d22_a_write_that_fails_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    from dmlprof.files import write_atomic

    path = tmp_path / "r.json"
    path.write_text("old report", encoding="utf-8")
    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: FullDisk(real_fdopen(fd, *a, **k)))
    with pytest.raises(OSError):
        write_atomic(path, "new report")
    with pytest.raises(OSError):
        _session().save(tmp_path / "s.session.json")
    assert path.read_text(encoding="utf-8") == "old report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="needs /dev/null")
def test_a_device_target_is_written_not_replaced(tmp_path):
    from dmlprof.files import write_atomic

    write_atomic(Path("/dev/null"), "text")  # --json /dev/stdout must not become a regular file
    assert not Path("/dev/null").is_file()


# -- D10: generated names fit any file system ---------------------------------------------------------
def test_d10_a_very_long_model_name_makes_a_short_distinct_file_name():
    from dmlprof.files import name_part

    long_a, long_b = "m" * 230, "m" * 229 + "n"
    name_a = _session(model=f"{long_a}.py").default_filename()
    name_b = _session(model=f"{long_b}.py").default_filename()
    assert len(name_a.encode()) < 160 and name_a != name_b
    assert len(name_part("é" * 200).encode("utf-8")) <= 96  # bytes, not characters
    assert "/" not in name_part("../../etc") and ":" not in name_part("C:")


# -- D8: names from a session cannot drive the terminal -------------------------------------------------
def test_d8_control_characters_in_names_are_shown_not_sent_to_the_terminal():
    from dmlprof.render.terminal import render_text

    hostile = "aten::x\x1b]2;pwned\x07\nFallbacks: none - forged"
    session = make_session(
        [{"op": hostile, "time_ns": 5, "verdict": "fallback", "fallback_ops": "aten::x=1", "fallback_calls": 1,
          "module": "M\x1b[31mred", "source": "a.py:1\r"}],
        meta={"model_name": "evil\x1b[2J", "notes": ["n\x9bote"],
              "warnings": [{"category": "W\x1b", "message": "m\x07", "count": 1}]})
    text = render_text(session)
    assert not [c for c in text if (ord(c) < 32 and c != "\n") or 0x7f <= ord(c) <= 0x9f]
    assert "Fallbacks: none - forged" not in text.splitlines()  # the newline did not make a line of its own
    assert "\\x1b]2;pwned\\x07\\x0aFallbacks" in text and "evil\\x1b[2J" in text


def test_d8_the_sweep_text_is_cleaned_too():
    from dmlprof.render.terminal import render_sweep_text

    rows = [dict(SWEEP["rows"][2], error="boom\x1b[2J\nforged")] + SWEEP["rows"][:2]
    session = Session(meta={"mode": "sweep", "model_name": "m\x1b", "sweep_notes": ["\x1b[1mnote"]},
                      **{"sweep": dict(SWEEP, rows=rows)})
    text = render_sweep_text(session)
    assert "\x1b" not in text and "\\x1b" in text


# -- D19: the HTML page holds a bounded number of rows, and says so --------------------------------------
def _many_ops(count: int):
    return make_session([{"op": f"aten::op{i}", "time_ns": 1_000 + i, "module": f"Net.block{i}.conv",
                          "verdict": "fallback" if i % 2 else "device", "source": f"m.py:{i}"}
                         for i in range(count)])


def test_d19_the_page_of_a_session_with_thousands_of_distinct_ops_is_bounded_and_says_so():
    from dmlprof.render.html import render_html

    from dmlprof.render.html import page_data, report_data

    session = _many_ops(2_600)
    page = render_html(session)
    assert "leaves out 600 of 2,600 op rows" in page and "(--json) holds every row" in page
    # the op table's 2,000 rows, the hotspots, and the timeline, which names each of its calls' ops once
    assert page.count("aten::op") < 2_600 * 3
    names = page_data(report_data(session))["timeline"]["names"]
    assert len(names) == len(set(names))


def test_d19_page_data_keeps_the_costliest_rows_and_whole_module_paths():
    from dmlprof.render.html import PAGE_ROWS, page_data, render_html, report_data

    session = _many_ops(PAGE_ROWS + 600)
    full = report_data(session)
    page = page_data(full)
    assert len(full["ops"]) == PAGE_ROWS + 600 and len(page["ops"]) == PAGE_ROWS
    assert page["ops"] == full["ops"][:PAGE_ROWS]  # ranked by time: the costliest rows stay
    assert len(page["hotspots"]) <= PAGE_ROWS and len(page["modules"]) <= 2 * PAGE_ROWS
    trimmed = [f for f in page["flags"] if f["label"] == "Trimmed"]
    assert trimmed and "600 of 2,600 op rows" in trimmed[0]["text"] and "--json" in trimmed[0]["text"]
    # the module tree keeps every kept module's parents
    names = {row["module"] for row in page["modules"]}
    assert all(row["parent"] in names or not row["parent"] or row["parent"] not in
               {r["module"] for r in full["modules"]} for row in page["modules"])
    assert len(render_html(session)) < 3_000_000
    assert full["flags"] == report_data(session)["flags"]  # page_data did not mutate what it was given


def test_d19_a_small_session_is_not_trimmed():
    from dmlprof.render.html import page_data, report_data

    data = report_data(_session())
    assert page_data(data) == data


def test_d19_many_sweep_rows_are_capped():
    from dmlprof.render.html import PAGE_ROWS, render_html

    rows = [dict(SWEEP["rows"][0], batch_size=n + 1) for n in range(PAGE_ROWS + 10)]
    page = render_html(Session(meta={"mode": "sweep"}, **{"sweep": dict(SWEEP, rows=rows)}))
    assert "10 of 2,010 sweep rows" in page and len(page) < 5_000_000


# -- D11/D25: the emulated device's build cache -----------------------------------------------------------
def test_d11_two_installations_of_one_torch_version_build_in_two_folders(monkeypatch, tmp_path):
    import torch

    from dmlprof import testing

    here = testing.build_directory()
    monkeypatch.setattr(torch, "__file__", str(tmp_path / "other-venv" / "torch" / "__init__.py"))
    assert testing.build_directory() != here


def test_d11_the_build_folder_is_keyed_by_torch_install_path_source_and_flags(monkeypatch, tmp_path):
    import torch

    from dmlprof import testing

    here = testing.build_directory()
    monkeypatch.setattr(torch, "__file__", str(tmp_path / "other-venv" / "torch" / "__init__.py"))
    other_install = testing.build_directory()
    monkeypatch.undo()
    source = tmp_path / "emulated_dml.cpp"
    source.write_bytes(testing.SOURCES[0].read_bytes() + b"\n// changed\n")
    monkeypatch.setattr(testing, "SOURCES", (source,))
    other_source = testing.build_directory()
    monkeypatch.undo()
    monkeypatch.setattr(testing, "compile_flags", lambda: ["-O2"])
    other_flags = testing.build_directory()
    assert len({here, other_install, other_source, other_flags}) == 4
    monkeypatch.undo()
    monkeypatch.setenv(testing.BUILD_DIR_ENV, str(tmp_path / "mine"))
    assert testing.build_directory().parent.parent == tmp_path / "mine"
    assert testing.build_directory().parent.name == here.parent.name  # same key, another parent


def test_d25_an_extensions_dir_that_is_a_file_is_one_line(monkeypatch, tmp_path):
    from dmlprof import testing

    if testing.is_loaded():
        pytest.skip("the device is already loaded in this process; the CLI test covers it (test_bad_inputs)")
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    monkeypatch.setenv(testing.BUILD_DIR_ENV, str(blocker))
    with pytest.raises(testing.EmulatedDeviceError) as caught:
        testing.load()
    assert "cannot create the build folder" in str(caught.value) and "\n" not in str(caught.value)


# -- D13: numbers are checked where they are parsed ----------------------------------------------------------
@pytest.mark.parametrize("parse, text", [
    ("port", "99999"), ("port", "-1"), ("count1", "-1"), ("count1", "0"), ("count1", "99999999999999999999"),
    ("secs", "nan"), ("secs", "inf"), ("secs", "0"), ("secs0", "-1"), ("secs0", "nan"),
])
def test_d13_bad_numbers_are_argparse_errors(parse, text):
    from dmlprof.cli.arguments import at_least, port_number, seconds

    fn = {"port": port_number, "count1": at_least(1), "secs": seconds(allow_zero=False),
          "secs0": seconds(allow_zero=True)}[parse]
    with pytest.raises(argparse.ArgumentTypeError):
        fn(text)


@pytest.mark.parametrize("text", ["nan", "inf", "1e400", "-inf", "nan%", "9" * 400])
def test_d13_memory_budgets_that_are_not_finite_are_usage_errors(text):
    from dmlprof.errors import UsageError
    from dmlprof.sweep.options import parse_memory_budget

    with pytest.raises(UsageError):
        parse_memory_budget(text)


@pytest.mark.parametrize("text", ["99999999999T", "9" * 400, "99999999999999999999"])
def test_d13_sizes_past_int64_are_usage_errors(text):
    from dmlprof.errors import UsageError
    from dmlprof.sweep.options import parse_batch_sizes, parse_bytes

    with pytest.raises(UsageError):
        parse_bytes(text, "--child-memory-limit")
    if text.isdigit():
        with pytest.raises(UsageError):
            parse_batch_sizes(text)


# -- D24: a contract defined through `from x import *` ------------------------------------------------------
def test_d24_a_star_import_of_the_contract_is_read_without_running_it(tmp_path):
    from dmlprof.model_file import inspect_model_file

    (tmp_path / "parts.py").write_text(
        "raise SystemExit('never imported by the check')\n"
        "def build_model(): pass\ndef make_batch(n): pass\n", encoding="utf-8")
    (tmp_path / "model.py").write_text("from parts import *\n", encoding="utf-8")
    assert inspect_model_file(tmp_path / "model.py").mode == "contract"
    (tmp_path / "hidden.py").write_text("__all__ = ['helper']\ndef build_model(): pass\ndef make_batch(n): pass\n",
                                        encoding="utf-8")
    (tmp_path / "script.py").write_text("from hidden import *\nprint(1)\n", encoding="utf-8")
    assert inspect_model_file(tmp_path / "script.py").mode == "script"  # __all__ exports neither


def test_d24_an_unreadable_star_import_is_said_not_silent(tmp_path):
    from dmlprof.model_file import inspect_model_file

    (tmp_path / "model.py").write_text("from no_such_module_anywhere import *\nprint(1)\n", encoding="utf-8")
    found = inspect_model_file(tmp_path / "model.py")
    assert found.mode == "script" and "no_such_module_anywhere" in found.notes[0]


# -- D4: a session made by this dmlprof still loads after the checks -------------------------------------------
def test_d4_every_kind_of_session_this_dmlprof_writes_loads_again(tmp_path):
    kinds = [_session(), _session(partial=True, partial_reason="x"),
             Session(meta={"mode": "sweep"}, **{"sweep": SWEEP})]
    for i, session in enumerate(kinds):
        path = tmp_path / f"{i}.session.json"
        session.save(path)
        loaded = Session.load(path)
        assert loaded.meta.to_file() == json.loads(path.read_text(encoding="utf-8"))["meta"] and len(loaded.ops) == len(session.ops)


def test_a_lock_left_by_a_killed_build_is_cleared_and_a_live_one_kept(tmp_path):
    import os
    import time

    from dmlprof.testing import building as build_lock

    build = tmp_path / "build"
    build.mkdir()
    (build / "emulated_dml.o").write_bytes(b"")
    lock = build / "lock"
    lock.touch()
    build_lock.clear_stale_torch_lock(build)
    assert lock.exists(), "a build under way holds a fresh lock: it must be left alone"
    old = time.time() - build_lock.STALE_LOCK_S - 60
    for entry in build.iterdir():
        os.utime(entry, (old, old))
    build_lock.clear_stale_torch_lock(build)
    assert not lock.exists(), "a lock nothing has touched for longer than any build would hang every later load"
