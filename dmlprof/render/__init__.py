"""Renderers: a report (``dmlprof.report``: one run's Report, or a job's RunReport) formatted as text, JSON,
HTML or a notebook cell, and the op frame laid out as a TensorBoard trace. Each takes what it formats through
one door, ``report_of``. They compute nothing (every figure, sentence and tone is the report's) and never
mutate what they format."""
