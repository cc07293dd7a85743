from dmlprof.cli import entry

entry()
