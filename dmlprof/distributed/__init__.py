"""A distributed run's data: ``torchrun``/DDP jobs profiled per rank, one run folder for all.

- :mod:`.env`: is this process one rank of a launched job (torchrun's environment), and which run
  folder do all ranks share;
- :mod:`.annotate`: what a rank's session carries beyond a plain one (rank facts, the collectives table,
  torch.profiler's own trace); which calls are collectives is the recorder's
  (:mod:`dmlprof.record.collectives`);
- :mod:`.watchdog`: a rank stuck at a collective, ended and named;
- :mod:`.run_dir`: a run folder read back; :mod:`.trace`: each rank's trace for TensorBoard.

The job's commands (the launcher, each rank's entry point, the merged report's command) are
:mod:`dmlprof.job`'s; :mod:`dmlprof.analysis.distributed` merges the ranks, :mod:`dmlprof.report.run`
makes every rank one report value (``RunReport``), which the renderers of every report format.

Importing this package imports neither torch nor torch.distributed.
"""
