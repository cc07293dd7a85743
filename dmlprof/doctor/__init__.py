"""``dmlprof doctor``: what is installed, what will break, and what to change.

Two halves, kept apart so every check can be tested without the machine it
describes:

* :func:`~dmlprof.doctor.gather.gather_snapshot` reads this machine once,
  safely, into a :class:`~dmlprof.doctor.snapshot.Snapshot` (versions,
  environment variables, a few paths, what torch says about its devices, and
  what torch-directml says in a child process, asked only where a DirectML
  adapter can exist at all).
* each ``check_*`` function takes a Snapshot and returns one
  :class:`~dmlprof.doctor.snapshot.Check` (or ``None`` when it has nothing
  true to say here). Tests build simulated Snapshots and pass them in. The
  checks live by what they look at: :mod:`~dmlprof.doctor.packages` (the
  interpreter and packages), :mod:`~dmlprof.doctor.devices` (the devices) and
  :mod:`~dmlprof.doctor.settings` (the user's code settings and environment
  variables); :mod:`~dmlprof.doctor.table` lists them in table order, runs
  them and formats the table.

Exit status (see docs/doctor.md): 0 unless a *blocking* check fails, i.e. one
without which dmlprof cannot run at all (Python or torch too old or missing,
pandas or tabulate missing) or the device named with ``--device`` cannot be
used. Then 1. ``--strict`` makes any failed check exit 1.

Nothing is re-exported here: import each piece from its module (the CLI
does so inside its ``run``, so ``dmlprof --help`` loads none of it).
"""
