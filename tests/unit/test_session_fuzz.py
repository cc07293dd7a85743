"""Fuzzing Session.load: a damaged or hostile session file only ever gives dmlprof's own one-line error.

GIVEN real session files (tests/fixtures/sessions, written by the real CLI: a
--verify scan with a corrupted op, a --replace comparison, a sweep, a --no-sync
scan, a partial run, a prediction, a script) WHEN one field is mutated at
random (types, lengths, nesting, non-finite numbers, cut or flipped bytes)
THEN ``Session.load`` either raises :class:`SessionFileError` (one line) or
returns a session that every renderer (terminal, JSON, HTML, trace, sweep)
renders without raising anything but a DmlprofError. Seeded, so a failure
reproduces; a few seconds in all.
"""
from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest

from dmlprof.errors import DmlprofError, SessionFileError
from dmlprof.session import Session

SESSIONS = Path(__file__).resolve().parent.parent / "fixtures" / "sessions"
SOURCES = sorted(SESSIONS.glob("*.session.json"))
MUTATIONS_PER_FILE = 25

ESC = "\x1b]0;pwned\x07\x1b[31m"
HOSTILE_VALUES = [
    None, True, False, 0, -1, 1, 2**63, -(2**63) - 1, 2**80, 1.5, -0.0, 1e308, "", "x" * 5000, ESC,
    "line\nforged: line", "<script>alert(1)</script>", "aten::x=notanumber", [], {}, [1, "a", None], {"a": {"b": 1}},
    [[[[[[1]]]]]], ["aten::x"], {"op": 1},
]


def _same_kind(value, rng: random.Random):
    """A value of the same JSON type that a writer could have produced, but that stretches a reader."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice([0, -1, 1, 2**62, -(2**62)])
    if isinstance(value, float):
        return rng.choice([0.0, -1.0, 1e300, -1e300, 5e-324])
    if isinstance(value, str):
        return rng.choice(["", ESC, "x" * 5000, "aten::x", "a=1;b=2", "\u2028", "../../etc/passwd", "1"])
    if isinstance(value, list):
        return rng.choice([[], value * 3, value[::-1]])
    if isinstance(value, dict):
        return rng.choice([{}, dict(list(value.items())[::2])])
    return value


def _paths(value, prefix=()):
    """Every path to a node in the parsed JSON (lists sampled, so big columns do not dominate)."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list) and value:
        for index in sorted({0, len(value) // 2, len(value) - 1}):
            yield from _paths(value[index], prefix + (index,))


def _get(doc, path):
    for part in path:
        doc = doc[part]
    return doc


def _set(doc, path, value):
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def _deep(depth: int):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


def mutate(doc: dict, rng: random.Random):
    """(description, file text) for one random mutation of ``doc``."""
    doc = copy.deepcopy(doc)
    paths = list(_paths(doc))
    path = rng.choice(paths[1:])
    kind = rng.choice(["same", "same", "same", "value", "value", "delete", "ragged", "deep", "text-nonfinite", "text-cut", "text-flip"])
    if kind == "same":
        value = _same_kind(_get(doc, path), rng)
        return f"{path} = {str(value)[:40]!r}", json.dumps(_set(doc, path, value))
    if kind == "value":
        value = rng.choice(HOSTILE_VALUES)
        return f"{path} = {str(value)[:40]!r}", json.dumps(_set(doc, path, value))
    if kind == "delete":
        parent = _get(doc, path[:-1])
        del parent[path[-1]]
        return f"del {path}", json.dumps(doc)
    if kind == "ragged":
        target = _get(doc, path[:-1]) if path else doc
        if isinstance(target, list):
            target.append(rng.choice(HOSTILE_VALUES))
        elif isinstance(target, dict) and isinstance(target.get(path[-1]), list):
            target[path[-1]] = target[path[-1]][:-1]
        return f"ragged at {path}", json.dumps(doc)
    if kind == "deep":
        depth = rng.choice([70, 900, 5000, 100_000])
        text = json.dumps(_set(doc, path, "DEEP")).replace('"DEEP"', "[" * depth + "]" * depth, 1)
        return f"{path} nested {depth} deep", text
    text = json.dumps(doc)
    if kind == "text-nonfinite":
        literal = rng.choice(["Infinity", "-Infinity", "NaN", "1e400", "-1e400"])
        return f"{path} = {literal}", json.dumps(_set(doc, path, "NONFINITE")).replace('"NONFINITE"', literal, 1)
    if kind == "text-cut":
        cut = rng.randrange(len(text))
        return f"cut at byte {cut}", text[:cut]
    at = rng.randrange(len(text))
    return f"byte {at} flipped", text[:at] + chr(rng.choice([0, 0x1B, ord('"'), ord("{"), 0xFF, 0x7F])) + text[at + 1:]


def render_everything(session: Session) -> None:
    """Every renderer over the session; only DmlprofError may escape."""
    from dmlprof.render.html import render_html
    from dmlprof.render.json_report import render_json
    from dmlprof.render.terminal import render_text
    from dmlprof.render.trace import trace_dict

    render_text(session, top=5)
    render_json(session)
    render_html(session)
    try:
        trace_dict(session)
    except DmlprofError:
        pass
    if "sweep" in session.extras:
        from dmlprof.render.terminal import render_sweep_text

        render_sweep_text(session)


def test_the_fixture_sessions_are_real_and_of_every_kind():
    kinds = {json.loads(p.read_text(encoding="utf-8"))["meta"].get("mode") for p in SOURCES}
    extras = {key for p in SOURCES for key in json.loads(p.read_text(encoding="utf-8"))["extras"]}
    assert {"live", "predicted", "sweep"} <= kinds and {"verify", "replace", "sweep"} <= extras
    for path in SOURCES:  # unmutated, each loads and renders
        render_everything(Session.load(path))


@pytest.mark.parametrize("source", SOURCES, ids=[p.name.split(".")[0] for p in SOURCES])
def test_a_mutated_session_loads_or_fails_in_one_line(source, tmp_path):
    doc = json.loads(source.read_text(encoding="utf-8"))
    rng = random.Random(f"dmlprof-fuzz-{source.name}")
    rejected = 0
    for attempt in range(MUTATIONS_PER_FILE):
        what, text = mutate(doc, rng)
        path = tmp_path / f"m{attempt}.session.json"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            session = Session.load(path)
        except SessionFileError as err:
            line = err.one_line()
            assert line and "\n" not in str(err) and "Traceback" not in line, (what, str(err))
            rejected += 1
            continue
        except Exception as exc:  # anything else is the defect this test exists for
            pytest.fail(f"{source.name}: {what}: Session.load raised {type(exc).__name__}: {str(exc)[:200]}")
        try:
            render_everything(session)
        except DmlprofError:
            pass
        except Exception as exc:
            pytest.fail(f"{source.name}: {what}: loaded, then rendering raised {type(exc).__name__}: {str(exc)[:200]}")
    # the mutations were hostile enough to be refused at least sometimes, and not always
    assert 0 < rejected < MUTATIONS_PER_FILE


@pytest.mark.parametrize("text, words", [
    ('{"format": "dmlprof-session", "format_version": "1", "meta": {}}', "format_version"),
    ('{"format": "dmlprof-session", "format_version": null, "meta": {}}', "format_version"),
    ('{"format": "dmlprof-session", "format_version": 1, "meta": []}', "meta"),
    ('{"format": "dmlprof-session", "format_version": 1, "meta": "x"}', "meta"),
    ('{"format": "dmlprof-session", "format_version": 1, "meta": {}, "ops": {"op": ["a", "b"], "seq": [1]}}',
     "different lengths"),
    ('{"format": "dmlprof-session", "format_version": 1, "meta": {}, "ops": {"time_ns": [Infinity]}}', "Infinity"),
    ('{"format": "dmlprof-session", "format_version": 1, "meta": {}, "extras": {"verify": {"divergent": 3}}}',
     "extras.verify.divergent"),
    ('{"format": "dmlprof-session", "format_version": 1, "meta": {"steps": "three"}}', "meta.steps"),
    ('{"format": "dmlprof-session", "format_version": 1, "meta": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested"),
], ids=["version-string", "version-null", "meta-list", "meta-string", "ragged-ops", "infinity", "bad-verify",
        "meta-types", "deep-nesting"])
def test_the_probes_malformed_sessions_fail_in_one_line_naming_the_problem(text, words, tmp_path):
    path = tmp_path / "bad.session.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SessionFileError) as caught:
        Session.load(path)
    assert words in str(caught.value) and "\n" not in str(caught.value)
