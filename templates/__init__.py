"""Jinja templates of the emitted C (installed as ``kernelfarer.templates``)."""
