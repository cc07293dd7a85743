"""The README's commands and its sample, held to what dmlprof really does (issue 37: the sample had gone stale)."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: the sample's command and width, as the sentence above the sample gives them
_SAMPLE_INTRO = re.compile(r"## A real sample\s+`(?P<command>dmlprof [^`]+)`.*?in a (?P<columns>\d+)-column terminal",
                           re.S)


def _sample() -> tuple:
    """(command, columns, the sample's text) from the README."""
    intro = _SAMPLE_INTRO.search(README)
    assert intro, "the README's sample section lost its command or its width"
    block = README[intro.end():]
    start = block.index("```\n") + 4
    return intro["command"], int(intro["columns"]), block[start:block.index("```", start)]


def _without_session_names(text: str) -> str:
    # the saved session's name carries the time of the run
    return re.sub(r"-\d{8}T\d{6}\.session\.json", "-<time>.session.json", text)


def _sample_torch(sample: str) -> str:
    return re.search(r"^torch\s+(\S+)", sample, re.M).group(1)


@pytest.mark.slow
@pytest.mark.skipif(_sample_torch(_sample()[2]) != torch.__version__,
                    reason="the README's sample is of torch " + _sample_torch(_sample()[2]) + "; the report names the "
                           "torch it ran on and that torch's code paths")
def test_the_readme_sample_is_what_its_command_prints(tmp_path):
    """GIVEN the README's sample and the command above it WHEN that command runs as written, at the width the README
    names THEN it prints the sample (the session's time stamp aside)."""
    command, columns, sample = _sample()
    argv = shlex.split(command)
    for arg in argv:  # the model file, at the same relative path, so the report's source lines read the same
        if arg.endswith(".py"):
            (tmp_path / arg).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / arg, tmp_path / arg)
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "dmlprof", *argv[1:]], capture_output=True, text=True,
                          encoding="utf-8", cwd=str(tmp_path), env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert _without_session_names(done.stdout) == _without_session_names(sample), (
        "the README's sample differs from a real run: paste the run's output into the README")


def test_every_dmlprof_command_in_the_readme_parses():
    """Each `dmlprof ...` the README shows is accepted by dmlprof's parser (placeholders filled in)."""
    from dmlprof.cli import build_parser

    commands = sorted(set(re.findall(r"`(dmlprof [^`]+)`", README)))
    assert len(commands) >= 10
    parser = build_parser()
    for command in commands:
        argv = shlex.split(command.replace(" ... ", " model.py "))[1:]
        if "--" in argv:
            argv = argv[:argv.index("--")]  # a script's own arguments
        args, extras = parser.parse_known_args(argv)
        assert not extras, f"{command}: {extras} not accepted"


def test_the_quick_set_command_installs_what_it_needs():
    """`python -m pytest -q -m quick` right after the first command failed (no pytest): the README's quick-set
    command installs the test extras, which declare pytest."""
    quick = next(line for line in README.splitlines() if "-m quick" in line and "pytest" in line
                 and not line.startswith(("To ", "On ")))
    assert '".[test]"' in quick and quick.index(".[test]") < quick.index("pytest")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    test_extra = pyproject[pyproject.index("test = ["):]
    assert '"pytest' in test_extra[:test_extra.index("]")]


def _code_blocks() -> list:
    return re.findall(r"```\n(.*?)```", README, re.S)


def _run_as_written(line: str, venv: Path, cwd: Path) -> str:
    """A README command line (``a && b``) run as written, with the venv's ``pip``, ``python`` and ``dmlprof``: the
    last command's output."""
    scripts = venv / ("Scripts" if os.name == "nt" else "bin")
    env = {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}
    # the venv's own install of this checkout, not the test run's; and a terminal as a user's, not pytest's
    for name in ("PYTHONPATH", "COLUMNS", "LINES", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST"):
        env.pop(name, None)
    done = None
    for part in line.split("&&"):
        argv = shlex.split(part)
        done = subprocess.run(argv, cwd=str(cwd), env=env, capture_output=True, text=True, encoding="utf-8",
                              timeout=1200)
        assert done.returncode == 0, f"{part.strip()} failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.slow
def test_the_readme_commands_run_as_written_on_a_fresh_venv(tmp_path):
    """GIVEN a fresh clone and a fresh venv WHEN the README's set-up command and its quick-set command run as written
    THEN each succeeds: the first scan's report, then the quick set, run whole (about 8 minutes on 2 busy cores). The
    venv sees this machine's packages (torch is a 2 GB download otherwise); what it installs is the clone's own."""
    import venv as venv_module

    clone = tmp_path / "clone"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=str(ROOT), capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode("utf-8").split("\0")):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    env_dir = tmp_path / "venv"
    venv_module.create(env_dir, system_site_packages=True, with_pip=True)
    blocks = _code_blocks()
    setup = next(b for b in blocks if "dmlprof scan" in b and "pip install" in b).strip()
    quick = next(b for b in blocks if "-m quick" in b).strip()
    first_scan = _run_as_written(setup, env_dir, clone)
    assert "op calls" in first_scan and "session saved to" in first_scan, first_scan[-2000:]
    quick_set = _run_as_written(quick + " -p no:cacheprovider", env_dir, clone)
    # pytest's closing line only: the warnings summary above it quotes source lines, which may say "failed"
    summary = quick_set.strip().splitlines()[-1] if quick_set.strip() else ""
    counts = re.search(r"(\d+) passed", summary)
    assert counts and int(counts[1]) >= 1000, quick_set[-2000:]
    assert not re.search(r"\d+ (failed|errors?)\b", summary), quick_set[-2000:]
