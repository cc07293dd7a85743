"""Each command says what its figures mean and what it could not see, and offers a command that works
(issue 37): the emulated device's times, the LSTM fix's command."""
from __future__ import annotations

import shlex

from dmlprof.backends.emulated import EmulatedDmlBackend
from dmlprof.backends.errors import match_known_error
from dmlprof.cli import build_parser


def test_an_emulated_scan_says_its_times_are_the_host_cpus():
    """The run's timing fact (the report's 'timing' line) on the emulated device names the host CPU, not a GPU."""
    timing = EmulatedDmlBackend().run_meta()["timing"]
    assert "host CPU" in timing and "never a GPU's" in timing
    assert "synchronised" not in timing


def test_the_lstm_fix_names_a_scan_command_that_parses_and_is_not_refused():
    """The LSTM failure's remedy names the command that shows the result; that command must be one dmlprof
    accepts (--replace is refused with --target; it runs on --device emulated-dml)."""
    known = match_known_error("Could not run 'aten::_thnn_fused_lstm_cell' with arguments from the 'CPU' backend")
    command = known.remedy[known.remedy.index("dmlprof scan"):known.remedy.index(" shows the result")]
    args = build_parser().parse_args(shlex.split(command)[1:])
    assert args.replace and args.device == "emulated-dml" and not args.target
