"""``dmlprof report`` with no session named: the latest one, in reports/ or in the folder given.

GIVEN a folder of saved sessions (and the run folder of a distributed scan)
WHEN ``dmlprof report`` is given no argument, or the folder
THEN it renders the session written last, says on stderr which it picked, and refuses one line when there is none.
"""
from __future__ import annotations

import os
import shutil

from conftest import FIXTURES

SESSIONS = FIXTURES / "sessions"


def _saved(folder, name, mtime):
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.session.json"
    shutil.copy(SESSIONS / f"{name}.session.json", path)
    os.utime(path, (mtime, mtime))
    return path


def test_no_argument_renders_the_latest_session_in_reports(cli, tmp_path):
    _saved(tmp_path / "reports", "predicted_dml", 1_000_000)
    latest = _saved(tmp_path / "reports", "script_cpu", 2_000_000)
    _saved(tmp_path / "reports", "partial_raises", 1_500_000)
    result = cli("report")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == f"dmlprof: the latest session in that folder: {os.path.join('reports', latest.name)}"
    assert "script scan of" in result.stdout


def test_a_folder_renders_its_latest_session(cli, tmp_path):
    _saved(tmp_path / "runs", "script_cpu", 1_000_000)
    _saved(tmp_path / "runs", "predicted_dml", 3_000_000)
    result = cli("report", tmp_path / "runs")
    assert result.returncode == 0, result.stderr
    assert "predicted_dml.session.json" in result.stderr and "predicted scan of" in result.stdout


def test_no_session_to_pick_is_one_line(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    for args, words in ((("empty",), "no session in empty"), ((), "no reports/ folder here")):
        result = cli("report", *args)
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and words in result.stderr, result.stderr
