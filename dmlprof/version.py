"""dmlprof's version, in the foundation so that every layer may name it (the public package re-exports it)."""

__version__ = "0.1.0"
