"""A replica that cannot take a request: one name for the emulated fleet's and the rehearsal's router."""

from __future__ import annotations


class NoReadyReplica(Exception):
    """No replica is Ready to take a request (all loading, failed, or none exist)."""
