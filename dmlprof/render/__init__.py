"""Renderers: a Report (``dmlprof.report``) formatted as text, JSON, HTML or a notebook cell, and the
op frame laid out as a TensorBoard trace. They compute nothing and never mutate what they format."""
