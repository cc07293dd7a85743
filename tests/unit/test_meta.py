"""RunMeta: typed run metadata read from (and written back to) a session file's flat ``meta``."""
from __future__ import annotations

import pytest

from dmlprof.meta import LIVE, PREDICTED, SWEEP, RunMeta
from session_kinds import KINDS


@pytest.mark.parametrize("name", list(KINDS))
def test_known_keys_read_typed_and_write_back_as_they_were(name):
    meta = KINDS[name]().meta
    written = RunMeta.from_dict(meta).to_dict()
    # what differs is only normalisation: a null read as "not recorded" is left out
    for key, value in meta.items():
        if value in (None, [], {}):  # "not recorded" in any spelling
            continue
        assert written.get(key) == value, key


def test_typed_fields_and_the_kind():
    run = RunMeta.from_dict(KINDS["steady_nosync"]().meta)
    assert run.kind == LIVE and run.device.backend == "dml" and run.environment.torch_version == "2.4.1"
    assert run.recording.structure_step and run.recording.profiler_check.note.startswith("measured steps")
    assert run.step_time_ms_p50 == 12.5 and run.memory.peak_bytes == 3 << 20
    assert RunMeta.from_dict(KINDS["predicted"]().meta).kind == PREDICTED
    sweep = RunMeta.from_dict(KINDS["sweep"]().meta)
    assert sweep.kind == SWEEP and sweep.sweep.settings.steps == 6 and sweep.sweep.stop_reason.startswith("out of memory")


def test_unknown_keys_survive_a_load_and_a_save(tmp_path):
    import json

    from dmlprof.session import Session

    # GIVEN a session file a newer dmlprof wrote, with a run fact this one does not know
    path = KINDS["live_dml"]().save(tmp_path / "s.session.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    data["meta"]["written_by_a_newer_dmlprof"] = {"nested": [1, 2]}
    path.write_text(json.dumps(data), encoding="utf-8")
    # WHEN it is loaded and saved again
    again = Session.load(Session.load(path).save(tmp_path / "again.session.json"))
    # THEN the fact is still there, untouched, and still readable by its flat key
    assert again.meta.extra == {"written_by_a_newer_dmlprof": {"nested": [1, 2]}}
    assert again.meta["written_by_a_newer_dmlprof"] == {"nested": [1, 2]}
    assert again.meta.to_dict() == Session.load(path).meta.to_dict()


def test_a_session_types_its_metadata_once_and_reads_like_the_file():
    from dmlprof.session import Session

    session = Session(meta={"mode": "predicted", "backend": "dml", "steps": 2, "table_version": "t"})
    assert isinstance(session.meta, RunMeta) and session.kind == PREDICTED
    assert session.meta.prediction.table_version == "t" and session.meta["steps"] == 2
    assert session.meta.get("batch_size") is None and "steps" in session.meta
    with pytest.raises(TypeError):
        session.meta["steps"] = 3  # read-only: a changed fact is a new RunMeta (meta.updated(...))
    assert session.meta.updated(steps=3).steps == 3 and session.meta.steps == 2


def test_values_of_the_wrong_type_read_as_not_recorded():
    run = RunMeta.from_dict({"mode": "nonsense", "batch_size": "eight", "steps": True, "notes": "one note",
                             "step_times_ms": [1.0, "x", float("nan"), 2.0], "memory": [1], "warnings": ["bad", {}],
                             "backend_versions": "0.2.5"})
    assert run.kind == LIVE and run.batch_size is None and run.steps is None
    assert run.notes == ("one note",) and run.step_times_ms == (1.0, 2.0) and run.memory is None
    assert len(run.warnings) == 1 and run.device.versions == {"backend": "0.2.5"}
    assert RunMeta.from_dict(None).kind == LIVE  # not even a mapping


def test_file_stem_names_the_model_backend_kind_and_start():
    assert RunMeta.from_dict(KINDS["live_dml"]().meta).file_stem() == "net-dml-20260102T030405"
    assert RunMeta.from_dict(KINDS["sweep"]().meta).file_stem() == "net-dml-sweep-20260102T030405"
    odd = RunMeta.from_dict({"model_name": "my model/../x", "backend": "dml", "started_at": "2026-01-02T03:04:05"})
    assert odd.file_stem() == "my_model_x-dml-20260102T030405"
