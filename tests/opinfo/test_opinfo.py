"""PyTorch's OpInfo database through the emulated DirectML device and through the prediction.

GIVEN op_db (torch.testing._internal.common_methods_invocations), the first
      ``DMLPROF_OPINFO_SAMPLES`` (2) samples of every op, in float32 where the op
      supports it (else int64, bool, complex64), forward and, where the op
      supports autograd, backward (see opinfo_samples.py), split into
      ``DMLPROF_OPINFO_SHARDS`` (4) shards by op index
WHEN  each sample runs on the emulated device without dmlprof (the device's own
      fallback counters), under ``dmlprof.scan(..., "emulated-dml")``, and
      under ``dmlprof scan --target dml`` in a process of its own
THEN  a sample that runs on one path runs on the others; the live report's
      fallbacks for it are the device's; and the prediction's calls for it
      equal the live report's call for call (op, verdict, fallback ops).

Samples that run on no path (an op the emulated device cannot run at all) are
counted, not judged. The test prints the coverage: ops and samples compared.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MODEL_FILE = HERE / "opinfo_samples.py"
SHARDS = int(os.environ.get("DMLPROF_OPINFO_SHARDS", "4"))
SAMPLES = int(os.environ.get("DMLPROF_OPINFO_SAMPLES", "2"))
TIMEOUT_S = 1800

pytestmark = [pytest.mark.live, pytest.mark.slow]


def _env(shard: int, status: Path) -> dict:
    env = dict(os.environ, DMLPROF_OPINFO_SHARD=f"{shard}/{SHARDS}", DMLPROF_OPINFO_SAMPLES=str(SAMPLES),
               DMLPROF_OPINFO_STATUS=str(status), PYTHONIOENCODING="utf-8")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _run(command, shard, status, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=_env(shard, status), capture_output=True, text=True,
                          encoding="utf-8", errors="replace", timeout=TIMEOUT_S)


def sample_rows(session: dict, key: str) -> list:
    """``(op, verdict, fallback ops)`` of the calls a sample's module made, in order; gradient accumulation
    named as torch-directml calls it on both sides (``dmlprof.testing.as_on_directml``), in any phase: a
    sample runs its own backward inside its module's forward."""
    from dmlprof.testing import as_on_directml

    ops = session.get("ops") or {}
    prefix = f"OpSamples.samples.{key}"
    rows = []
    for op, verdict, fallbacks, module in zip(ops.get("op", []), ops.get("verdict", []),
                                              ops.get("fallback_ops", []), ops.get("module", [])):
        if module == prefix or module.startswith(prefix + "."):
            rows.append((as_on_directml(op, "backward"), verdict, fallbacks or ""))
    return rows


def reported_fallbacks(rows: list) -> dict:
    total: Counter = Counter()
    for _, verdict, text in rows:
        if verdict == "fallback":
            for part in filter(None, text.split(";")):
                name, _, count = part.rpartition("=")
                total[name] += int(count)
    return dict(total)


#: Checks on values a prediction does not have: on the sample's real values the check fails (on the
#: device, with or without dmlprof), while the prediction takes it to hold, as it does for the
#: working programs users profile (docs/prediction.md). Matched on the error, never on the op alone.
FAILS_ON_ITS_VALUES = (
    "linalg_eig_backward: The eigenvectors in the complex case are specified up to multiplication by e^{i phi}",
)


def _fails_on_its_values(outcome: dict, live_error) -> bool:
    return (outcome["status"] != "ok" and any(check in str(outcome["status"]) for check in FAILS_ON_ITS_VALUES)
            and any(check in str(live_error) for check in FAILS_ON_ITS_VALUES))


def judge(bare: dict, live_status: dict, predicted_status: dict, live: dict, predicted: dict) -> dict:
    """Per sample key: ``None`` when the paths agree, else what differs; plus coverage counts."""
    problems, agreed, nowhere = {}, [], []
    for key, outcome in bare["samples"].items():
        ran = {"bare": outcome["status"] == "ok", "live": live_status.get(key) == "ok",
               "predicted": predicted_status.get(key) == "ok"}
        if not any(ran.values()):
            nowhere.append(key)
            continue
        live_rows, predicted_rows = sample_rows(live, key), sample_rows(predicted, key)
        if ran["bare"] and not ran["live"]:
            problems[key] = f"fails under dmlprof's live recording only: {live_status.get(key)}"
        elif ran["predicted"] and not ran["live"] and _fails_on_its_values(outcome, live_status.get(key)):
            agreed.append(key)
        elif ran["live"] != ran["predicted"]:
            failed = "predicted" if ran["live"] else "live"
            status = (predicted_status if failed == "predicted" else live_status).get(key)
            problems[key] = f"runs {'live' if ran['live'] else 'predicted'} but fails {failed}: {status}"
        elif ran["live"] and reported_fallbacks(live_rows) != outcome["fallbacks"]:
            problems[key] = (f"live report's fallbacks {reported_fallbacks(live_rows)} != the device's without "
                             f"dmlprof {outcome['fallbacks']}")
        elif ran["live"] and live_rows != predicted_rows:
            problems[key] = f"calls differ: live {_diff(live_rows, predicted_rows)}"
        else:
            agreed.append(key)
    return {"problems": problems, "agreed": agreed, "nowhere": nowhere}


def _diff(a: list, b: list) -> str:
    only_a = Counter(a) - Counter(b)
    only_b = Counter(b) - Counter(a)
    if not only_a and not only_b:
        return "same calls, different order"
    show = lambda c: ", ".join(f"{op}{'/' + v if v != 'device' else ''}{'[' + f + ']' if f else ''} x{n}"
                               for (op, v, f), n in list(c.items())[:4])
    return f"only live: {show(only_a) or '-'}; only predicted: {show(only_b) or '-'}"


@pytest.mark.parametrize("shard", range(SHARDS), ids=lambda k: f"shard{k}of{SHARDS}")
def test_opinfo_prediction_equals_emulation(shard, tmp_path):
    from dmlprof import testing

    if testing.build_problem():
        pytest.fail(f"the emulated DML device must build here: {testing.build_problem()}")
    live_out, live_session = tmp_path / "live.json", tmp_path / "live.session.json"
    done = _run([sys.executable, str(HERE / "run_opinfo.py"), "--out", str(live_out), "--session", str(live_session)],
                shard, tmp_path / "unused.json", tmp_path)
    assert live_out.is_file(), f"the live run died (exit code {done.returncode}): {done.stderr[-2000:]}"
    result = json.loads(live_out.read_text(encoding="utf-8"))
    predicted_status_path = tmp_path / "predicted-status.json"
    predicted = _run([sys.executable, "-m", "dmlprof", "scan", str(MODEL_FILE), "--target", "dml", "--steps", "1",
                      "--out", str(tmp_path / "predicted"), "--quiet"], shard, predicted_status_path, tmp_path)
    sessions = sorted((tmp_path / "predicted").glob("*.session.json"))
    assert sessions, f"the prediction saved no session (exit code {predicted.returncode}): {predicted.stderr[-2000:]}"
    assert live_session.is_file(), f"the live scan saved no session: {result['live_error']}"
    assert result["live"] is not None and predicted_status_path.is_file(), "a model forward never finished"
    verdict = judge(result["bare"], result["live"]["status"],
                    json.loads(predicted_status_path.read_text(encoding="utf-8"))["status"],
                    json.loads(live_session.read_text(encoding="utf-8")),
                    json.loads(sessions[0].read_text(encoding="utf-8")))
    labels = result["bare"]["labels"]
    ops_compared = {labels[k] for k in verdict["agreed"]} | {labels[k] for k in verdict["problems"]}
    print(f"shard {shard}/{SHARDS} on torch {result['torch']}: {len(labels)} samples of "
          f"{len(set(labels.values()))} ops; compared {len(verdict['agreed']) + len(verdict['problems'])} samples "
          f"of {len(ops_compared)} ops; {len(verdict['nowhere'])} samples run on no path; "
          f"{len(result['bare']['left_out'])} samples with sparse tensors left out; "
          f"{len(verdict['problems'])} disagree; ops run on no path: "
          f"{', '.join(sorted({labels[k] for k in verdict['nowhere']})) or '-'}")
    by_op = defaultdict(list)
    for key, problem in verdict["problems"].items():
        by_op[labels[key]].append(f"{key}: {problem}")
    assert not by_op, f"{len(by_op)} ops disagree between the paths:\n" + "\n".join(
        f"{op}: {'; '.join(lines)}"[:400] for op, lines in sorted(by_op.items()))
