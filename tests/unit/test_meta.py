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
    for key, value in meta.to_dict().items():
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
    assert again.meta.to_dict()["written_by_a_newer_dmlprof"] == {"nested": [1, 2]}
    assert again.meta.to_dict() == Session.load(path).meta.to_dict()


def test_a_session_types_its_metadata_once_and_its_flat_names_live_only_at_the_edge():
    from collections.abc import Mapping
    from dataclasses import FrozenInstanceError

    from dmlprof.session import Session

    session = Session(meta={"mode": "predicted", "backend": "dml", "steps": 2, "table_version": "t"})
    assert isinstance(session.meta, RunMeta) and session.kind == PREDICTED
    assert session.meta.prediction.table_version == "t" and session.meta.steps == 2
    # no Mapping face: code reads the typed fields; the flat names are the file's and the JSON report's
    assert not isinstance(session.meta, Mapping) and not hasattr(session.meta, "get")
    assert session.meta.to_dict()["steps"] == 2 and "batch_size" not in session.meta.to_dict()
    with pytest.raises(FrozenInstanceError):
        session.meta.steps = 3  # read-only: a changed fact is a new RunMeta (meta.updated(...))
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


# -- format 2: the file holds the typed fields under their own names -------------------------------
def _every_flat_key() -> dict:
    """A format-1 meta with a value under every key format 1 named otherwise than its typed field."""
    return {"mode": "predicted", "dmlprof_version": "0.9", "torch_version": "2.4.1", "python_version": "3.11.9",
            "platform": "Windows-10", "backend": "dml", "device": "privateuseone:0", "device_name": "Radeon",
            "backend_versions": {"torch-directml": "0.2.5"}, "device_float64": False, "device_emulation": "lavapipe",
            "sync": True, "profiler": False, "timing": "wall", "recording": "every call", "verify": True,
            "steady_state": {"steps": 3}, "structure_step_ms": 4.5, "device_time_check": {"ratio": 1.0},
            "profiler_check": {"matched_ops": 2, "time_ms": 1.0, "profiler_time_ms": 1.1, "ratio": 0.9},
            "target": "dml", "table_version": "t1", "table_torch_version": "2.4.1", "stand_in_device": "meta",
            "unknown_ops": ["aten::x"], "unknown_op_calls": {"aten::x": 2}, "placeholder_ops": {"aten::y": 1},
            "drift_ops": ["aten::z"], "predicted_failure_op": "aten::lu",
            "predicted_guess": {"first_seq": 3, "op": "aten::_local_scalar_dense", "why": "no value"},
            "sweep_stop_reason": "out of memory", "memory_budget": "8 GiB", "memory_total_bytes": 8 << 30,
            "sweep_settings": {"steps": 6, "warmup_steps": 2}, "sweep_notes": ["a note"],
            "sweep_details": [{"batch_size": 8}], "steps": 2, "partial": False, "started_at": "2026-01-02T03:04:05"}


def test_a_format_1_file_loads_into_the_same_run_meta_as_its_format_2_save(tmp_path):
    import json

    from dmlprof.meta import FLAT_KEYS
    from dmlprof.session import Session

    # GIVEN a format-1 file whose meta holds every key that format 1 named otherwise than its field
    flat = _every_flat_key()
    assert set(FLAT_KEYS) <= set(flat)
    old = tmp_path / "old.session.json"
    old.write_text(json.dumps({"format": "dmlprof-session", "format_version": 1, "meta": flat}), encoding="utf-8")
    # WHEN it is loaded, saved (format 2) and loaded again
    loaded = Session.load(old)
    again = Session.load(loaded.save(tmp_path / "new.session.json"))
    # THEN both read the same, field by field, and nothing became an unknown extra
    assert again.meta.to_file() == loaded.meta.to_file() and not loaded.meta.extra
    assert loaded.meta.device.name == "Radeon" and loaded.meta.recording.description == "every call"
    assert loaded.meta.prediction.failure_op == "aten::lu" and loaded.meta.prediction.guess.first_seq == 3
    assert loaded.meta.sweep.settings.steps == 6 and loaded.meta.environment.platform == "Windows-10"


@pytest.mark.parametrize("name", list(KINDS))
def test_a_saved_session_s_meta_keys_are_the_typed_field_names(name, tmp_path):
    import dataclasses
    import json

    from dmlprof.meta import RunMeta
    from dmlprof.session import Session

    # GIVEN any kind of session, saved
    data = json.loads(KINDS[name]().save(tmp_path / "s.session.json").read_text(encoding="utf-8"))
    # THEN its meta's keys are RunMeta's fields, and each sub-document's keys are its record's fields
    assert data["format_version"] == 2
    names = {f.name: f for f in dataclasses.fields(RunMeta)}
    assert set(data["meta"]) <= set(names) - {"extra"}, set(data["meta"]) - set(names)
    run = Session.load(tmp_path / "s.session.json").meta
    for key, value in data["meta"].items():
        typed = getattr(run, key)
        if dataclasses.is_dataclass(typed):
            assert set(value) <= {f.name for f in dataclasses.fields(typed)}, key


def test_sub_documents_are_records_whether_the_producer_or_a_file_gave_them(tmp_path):
    from dmlprof.meta import DeviceTimeCheck, NonfiniteLoss, ScriptWindow, SteadyState
    from dmlprof.session import Session

    # GIVEN run facts as a producer builds them (records) and as a format-1 file holds them (objects)
    built = {"steady_state": SteadyState(structure_step_calls=9, matched_steps=2, unmatched_steps=(3,)),
             "nonfinite_loss": NonfiniteLoss(step=1, steps_run=2, value="nan")}
    read = {"script_window": {"warmup_steps": 1, "steps_requested": 2, "optimizer_steps_taken": 3,
                              "window_closed": True, "run_to_end": False},
            "device_time_check": {"calls_device_time_ms": 1.5, "profiler_kernel_time_ms": 2.0, "ratio": 0.75}}
    run = RunMeta.from_dict({**built, **read})
    # THEN both are typed records, the same after a save and a load
    assert run.recording.steady_state == built["steady_state"] and run.nonfinite_loss == built["nonfinite_loss"]
    assert run.script_window == ScriptWindow(1, 2, 3, True, False)
    assert run.recording.device_time_check == DeviceTimeCheck(1.5, 2.0, 0.75)
    again = Session.load(Session(meta=run).save(tmp_path / "s.session.json")).meta
    assert again.recording == run.recording and again.script_window == run.script_window
    assert again.nonfinite_loss == run.nonfinite_loss
    # AND the JSON report's flat view writes them as the objects it always did
    assert run.to_dict()["steady_state"]["unmatched_steps"] == [3] and run.to_dict()["nonfinite_loss"] == {"step": 1, "steps_run": 2,
                                                                                        "value": "nan"}


def test_a_rank_s_facts_are_a_record_and_the_flat_view_keeps_what_the_rank_knew():
    from dmlprof.meta import Distributed

    # GIVEN a rank's facts without a launcher (the script's own process group): no rank or world size
    run = RunMeta.from_dict({"distributed": {"backend": "gloo", "collective_calls": 4, "comm_timing": "wall"}})
    # THEN it is a record, and the flat view holds only what was known (readers default the rest)
    assert run.distributed == Distributed(backend="gloo", collective_calls=4, comm_timing="wall")
    assert run.to_dict()["distributed"] == {"backend": "gloo", "collective_calls": 4, "comm_timing": "wall"}


@pytest.mark.parametrize("name", list(KINDS))
def test_whether_a_session_is_a_prediction_is_one_property(name):
    from dmlprof.report import build_report

    session = KINDS[name]()
    # the run's facts and the report answer alike, from the kind alone
    assert session.meta.is_prediction == (session.kind == PREDICTED) == build_report(session).is_prediction


@pytest.mark.parametrize("name", list(KINDS))
def test_a_session_saved_and_loaded_has_the_same_run_facts_and_report_meta(name, tmp_path):
    from dmlprof.report import build_report
    from dmlprof.session import Session

    session = KINDS[name]()
    again = Session.load(session.save(tmp_path / "s.session.json"))
    # THEN the typed facts, their flat view and the JSON report's meta are the same as before the save
    assert again.meta == session.meta and again.meta.to_file() == session.meta.to_file()
    assert build_report(again).to_dict()["meta"] == build_report(session).to_dict()["meta"]


@pytest.mark.parametrize("path", sorted((__import__("pathlib").Path(__file__).parents[1] / "fixtures" / "sessions")
                                        .glob("*.session.json")), ids=lambda p: p.name)
def test_a_real_format_1_session_reads_the_same_after_its_format_2_save(path, tmp_path):
    from dmlprof.report import build_report
    from dmlprof.session import Session

    old = Session.load(path)
    new = Session.load(old.save(tmp_path / path.name))
    assert new.meta == old.meta and not old.meta.extra
    assert build_report(new).to_dict()["meta"] == build_report(old).to_dict()["meta"]


# -- the builder a run's producers write to (dmlprof/facts.py) -----------------------------------------
def test_a_run_fact_is_set_by_its_field_name_and_a_misspelled_one_fails_where_it_is_written():
    from dmlprof.facts import RunFacts

    facts = RunFacts(kind=LIVE, steps=0)
    facts.set(steps=3, step_times_ms=[1.0, 2.0])
    facts.set_recording(sync=True, description="every call")
    facts.note("first")
    facts.note("second")
    assert facts.steps == 3 and facts.recording.sync and facts.notes == ("first", "second")
    assert facts.step_times_ms == (1.0, 2.0)  # a producer's list is the record's tuple
    with pytest.raises(TypeError):
        facts.set(stpes=4)  # no key a reader would never find
    with pytest.raises(TypeError):
        facts.set_recording(synced=True)


def test_what_a_run_builds_is_what_its_saved_file_loads_as(tmp_path):
    from dmlprof.facts import RunFacts
    from dmlprof.meta import Memory, Prediction
    from dmlprof.session import Session

    facts = RunFacts(kind=PREDICTED, model="m.py", model_name="m", prediction=Prediction(target="dml"))
    facts.set_prediction(placeholder_ops={"aten::nonzero": 2})
    facts.set(memory=Memory(peak_bytes=5), warnings=[], partial=True, partial_reason="stopped")
    built = facts.build()
    loaded = Session.load(Session(meta=built).save(tmp_path / "s.session.json")).meta
    assert built == loaded and built.is_prediction and built.prediction.placeholder_ops == {"aten::nonzero": 2}


def test_the_kind_of_a_session_comes_from_the_backends_record():
    from dmlprof.facts import BackendFacts
    from dmlprof.meta import Device, Prediction

    assert BackendFacts(Device(backend="dml")).kind == LIVE
    assert BackendFacts(Device(backend="dml"), prediction=Prediction(target="dml")).kind == PREDICTED
