"""A launched job (``scan --nproc N``, or a script under torchrun): the launcher, each rank's entry point, and
the merged report's command. Its data (the run folder, the ranks' environment, the collectives, the watchdog)
is :mod:`dmlprof.distributed`'s; each rank's scan is the runner's."""
