"""``scan --confirm``'s table: each call signature's prediction beside what real torch-directml did."""
from __future__ import annotations

from dmlprof.render.format import clean
from dmlprof.report.confirmation import CONFIRMED, Confirmation

#: the widest a column of the table may be (a long shape list is cut, the JSON keeps it whole)
_WIDTH = {"op": 34, "dtypes": 16, "shapes": 40, "predicted": 16, "real": 30}


def _cell(text: str, width: int) -> str:
    text = clean(str(text))
    return (text[: width - 1] + "…") if len(text) > width else text.ljust(width)


def render_confirmation_text(confirmation: Confirmation) -> str:
    """The table, contradicted rows first, then one line per contradiction's detail."""
    lines = [f"Confirmed on real torch-directml: {clean(confirmation.headline)} "
             f"({confirmation.seconds:.0f} s, {confirmation.workers} worker process"
             f"{'es' if confirmation.workers != 1 else ''})", ""]
    header = ("status".ljust(13) + _cell("op", _WIDTH["op"]) + " " + _cell("dtypes", _WIDTH["dtypes"]) + " "
              + _cell("shapes", _WIDTH["shapes"]) + " calls " + _cell("predicted", _WIDTH["predicted"]) + " real")
    lines.append(header)
    rows = sorted(confirmation.rows, key=lambda row: row.status == CONFIRMED)
    for row in rows:
        lines.append(row.status.ljust(13) + _cell(row.op.replace("aten::", ""), _WIDTH["op"]) + " "
                     + _cell(row.dtypes, _WIDTH["dtypes"]) + " " + _cell(row.shapes, _WIDTH["shapes"]) + " "
                     + str(row.calls).rjust(5) + " " + _cell(row.predicted_words, _WIDTH["predicted"]) + " "
                     + clean(row.real_words))
    return "\n".join(lines + _details(confirmation)) + "\n"


def _details(confirmation: Confirmation) -> list:
    """One line per wrong result (predicted or found), contradiction and call that could not be replayed."""
    lines = []
    for row in confirmation.rows:
        if row.predicted_wrong or row.real_wrong:  # a wrong result, predicted or found: what it is, in words
            where = f" at {row.source}" if row.source else ""
            lines.append(f"  wrong: {clean(row.op)}{clean(where)} ({row.status}): {clean(row.detail)}")
    for row in confirmation.contradicted:
        where = f" at {row.source}" if row.source else ""
        lines.append(f"  contradicted: {clean(row.op)}{clean(where)}: predicted {row.predicted_words}, real "
                     f"{clean(row.real_words)}" + (f": {clean(row.detail)}" if row.detail else ""))
    for op, why in confirmation.unreplayable:
        lines.append(f"  not replayed: {clean(op)} ({clean(why)})")
    return lines
