"""CI's lanes 3 and 4 collect one folder each (collecting the whole suite to select by marker cost each lane a minute
or two on CI's 2 cores): a test marked for such a lane anywhere else would run in no lane at all."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: marker -> the folder its lane collects (.ci/run)
LANE_FOLDERS = {"realdml": "tests/realdml", "zoo": "tests/zoo"}


def test_each_folder_lane_collects_its_folder_and_the_marker_lives_nowhere_else():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    for marker, folder in LANE_FOLDERS.items():
        assert re.search(rf"-m {marker} {re.escape(folder)}\b", ci), f".ci/run's {marker} lane must collect {folder}"
        outside = [str(path.relative_to(REPO)) for path in (REPO / "tests").rglob("*.py")
                   if not path.is_relative_to(REPO / folder)
                   and re.search(rf"mark\.{marker}\b", path.read_text(encoding="utf-8"))]
        assert outside == [], f"tests marked {marker} outside {folder} run in no CI lane: {outside}"
