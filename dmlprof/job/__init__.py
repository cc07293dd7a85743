"""A launched job (``scan --nproc N``, or a script under torchrun): the launcher, each rank's entry point, and
the merged report's command. Its data (the run folder, the ranks' environment, the collectives, the watchdog)
is :mod:`dmlprof.distributed`'s; each rank's scan is the runner's."""
from __future__ import annotations

from dmlprof.errors import UsageError


def refuse_single_scan_options(args, run: str) -> None:
    """--target, --replace, --verify and --trace belong to one scan; a job runs one scan per rank."""
    for flag, name in ((args.target, "--target"), (args.replace, "--replace"), (args.verify, "--verify"),
                       (getattr(args, "trace", None), "--trace")):
        if flag:
            raise UsageError(f"{name} does not combine with {run} (one scan per rank)",
                             remedy="--tb DIR writes each rank's trace" if name == "--trace" else None)
