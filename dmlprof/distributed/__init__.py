"""Distributed runs: ``torchrun``/DDP jobs profiled per rank and merged into one report.

- :mod:`.env`: is this process one rank of a launched job (torchrun's
  environment), and which run folder do all ranks share;
- :mod:`.collectives`: which dispatcher calls are communication (the ``comm``
  phase) and what each one cost;
- :mod:`.rank`: one rank's scan (process group and DDP for model files, the
  session and trace saved in the run folder, signals, the hang watchdog);
- :mod:`.launch`: ``dmlprof scan --nproc N`` handing over to ``torch.distributed.run``;
- :mod:`.run_dir`: a run folder read back; :mod:`dmlprof.analysis.distributed`
  merges its ranks; :mod:`.report` renders the merged report.

Importing this package imports neither torch nor torch.distributed.
"""
