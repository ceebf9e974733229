"""Exception hierarchy of ocs-synth.

Every error a user can cause is a :class:`SynthError`; the CLI turns it into a one-line message and exit
status 2. Input errors carry the file (``source``) and the dotted ``field`` they concern, so the message
names both::

    >>> str(InvalidInput("must be >= 1, got 0", field="ports", source="a.toml"))
    'a.toml: ports: must be >= 1, got 0'
"""
from __future__ import annotations

import difflib
from typing import Iterable


class SynthError(Exception):
    """Base class of every error ocs-synth raises on purpose."""


class Located(SynthError):
    """An error about given data: names the file (``source``) and the dotted ``field`` it concerns."""

    def __init__(self, rule: str, *, field: str | None = None, source: str | None = None):
        self.rule = rule
        self.field = field
        self.source = source
        super().__init__(self._text())

    def _text(self) -> str:
        parts = [p for p in (self.source, self.field) if p]
        return ": ".join(parts + [self.rule])

    def located(self, source: str | None = None, prefix: str | None = None) -> "Located":
        """The same error with a file name and a field prefix added (the innermost wins)."""
        field = self.field
        if prefix:
            field = f"{prefix}.{field}" if field else prefix
        return type(self)(self.rule, field=field, source=self.source or source)


class InvalidInput(Located):
    """A value, file or argument breaks a rule; names the file and the field."""


class InvalidInstance(InvalidInput):
    """An instance (deployment) file or object is inconsistent."""


class Infeasible(Located):
    """The problem has no solution (e.g. demands that a direct-only wiring cannot serve); names the file and
    the field whose value makes it so, where one does."""


class SolverUnavailable(SynthError):
    """The requested optimization back-end is not installed."""


def unknown_key_message(key: str, valid: Iterable[str]) -> str:
    """'unknown key "x"' with the closest valid key suggested.

    >>> unknown_key_message("prots", ["ports", "switches"])
    'unknown key "prots" (did you mean "ports"?)'
    """
    valid = sorted(valid)
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    if close:
        return f'unknown key "{key}" (did you mean "{close[0]}"?)'
    return f'unknown key "{key}" (valid: {", ".join(valid)})'
