"""``dmlprof view DIR``: open the traces written with ``--tb DIR`` in TensorBoard.

Starts TensorBoard (with the PyTorch profiler plugin) on 127.0.0.1 on a free
port, prints the URL, and runs until Ctrl-C, ``kill`` or the terminal closing
(SIGHUP), each of which stops TensorBoard too. Its log is removed when it
stops cleanly and kept (and named) when it fails.
"""
from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dmlprof.cli import arguments
from dmlprof.errors import UsageError

INSTALL_HINT = "pip install 'dmlprof[tensorboard]'"
HOST = "127.0.0.1"
#: how long TensorBoard may take to start listening
START_TIMEOUT_S = 120
#: said before the page is opened: torch-tb-profiler's pages draw with Google Charts, fetched from the internet
OFFLINE_NOTE = ("note: the profiler plugin's pages load Google Charts from the internet, so the browser needs "
                "internet access; offline its views stay blank (the --html report and a --trace file work offline)")


def add_parser(commands) -> None:
    parser = commands.add_parser("view", help="open --tb traces in TensorBoard (127.0.0.1)", description=__doc__)
    parser.add_argument("logdir", metavar="DIR", help="the folder given to --tb")
    parser.add_argument("--port", type=arguments.port_number, default=0, help="port to listen on (default: a free one)")
    parser.set_defaults(handler=run)


def _check_port_free(port: int) -> None:
    """A taken --port fails here, in one line, before TensorBoard starts (and before a URL that
    would point at the other server is printed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            raise UsageError(f"port {port} on {HOST} is in use ({exc.strerror or exc})",
                             remedy="pick another --port, or leave it out for a free one") from None


def free_port(host: str = HOST) -> int:
    """A port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def tensorboard_command(logdir: Path, port: int) -> list:
    """The command that starts TensorBoard from this interpreter's environment."""
    return [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", HOST, "--port", str(port)]


def _check_installed() -> None:
    try:
        import tensorboard  # noqa: F401
        import torch_tb_profiler  # noqa: F401
    except ImportError as exc:
        missing = "torch-tb-profiler" if "torch_tb_profiler" in str(exc) else "tensorboard"
        raise UsageError(f"{missing} is not installed", remedy=INSTALL_HINT) from None


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((HOST, port)) == 0


def run(args) -> int:
    if not args.logdir.strip():  # an unset shell variable: not the working directory
        raise UsageError("the folder to view is given an empty name", remedy="give the folder given to --tb")
    logdir = Path(args.logdir)
    if not logdir.is_dir():
        raise UsageError(f"{logdir}: no such folder", remedy="write traces first: dmlprof scan MODEL --tb DIR")
    _check_installed()
    traces = list(logdir.rglob("*.pt.trace.json")) + list(logdir.rglob("*.pt.trace.json.gz"))
    if not traces:
        print(f"dmlprof: no traces under {logdir} yet (write some with --tb {logdir}); TensorBoard will pick them up",
              file=sys.stderr)
    if args.port:
        _check_port_free(args.port)
    port = args.port or free_port()
    from dmlprof import interrupts

    # kill (SIGTERM) and a closed terminal (SIGHUP) stop TensorBoard too, as Ctrl-C does, instead of orphaning
    # it (SIGHUP does not exist on Windows; closing the console there ends the process group, TensorBoard with it)
    with interrupts.stopping():
        return _serve(logdir, port)


def _serve(logdir: Path, port: int) -> int:
    """Run TensorBoard on ``port`` until it stops or is stopped (Ctrl-C, SIGTERM, SIGHUP: exit 0)."""
    log = tempfile.NamedTemporaryFile("w+", prefix="dmlprof-tensorboard-", suffix=".log", delete=False)
    keep_log = True  # until TensorBoard has run and stopped cleanly
    process = subprocess.Popen(tensorboard_command(logdir, port), stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
    try:
        _wait_until_listening(process, port, log.name)
        print(f"TensorBoard: http://{HOST}:{port}/#pytorch_profiler  (traces from {logdir}; Ctrl-C to stop)", flush=True)
        print(OFFLINE_NOTE, flush=True)
        process.wait()
        if process.returncode not in (0, None):
            raise UsageError(f"TensorBoard stopped with status {process.returncode}: {_last_line(log.name)}",
                             remedy=f"its log: {log.name}")
        keep_log = False
        return 0
    except KeyboardInterrupt:
        print("dmlprof: stopping TensorBoard", file=sys.stderr)
        keep_log = False
        return 0
    finally:
        _stop(process)
        log.close()
        if not keep_log:
            _remove(log.name)


def _wait_until_listening(process: subprocess.Popen, port: int, log: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        # exited first: a listener on the port would then be someone else's
        if process.poll() is not None:
            raise UsageError(f"TensorBoard exited at start: {_last_line(log) or 'no output'}", remedy=f"its log: {log}")
        if _listening(port):
            return
        if time.monotonic() > deadline:
            raise UsageError(f"TensorBoard did not start listening on {HOST}:{port} within {START_TIMEOUT_S} s",
                             remedy=f"its log: {log}")
        time.sleep(0.25)


def _remove(path: str) -> None:
    try:
        Path(path).unlink()
    except OSError:
        pass


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def _last_line(path: str) -> str:
    try:
        lines = [line.strip() for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""
