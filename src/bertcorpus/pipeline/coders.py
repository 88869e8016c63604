"""The base of the typed coders that jobs register for the values crossing their shuffles."""

from __future__ import annotations

import apache_beam as beam


class DeterministicCoder(beam.coders.Coder):
    """A coder whose bytes depend only on the value, so Beam may use it for keys; one instance equals another."""

    def is_deterministic(self) -> bool:
        return True

    def __eq__(self, other) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))
