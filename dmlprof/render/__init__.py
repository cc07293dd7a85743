"""Renderers: Session (+ analysis frames) -> text, JSON, HTML, traces. They never mutate data."""
