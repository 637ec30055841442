"""Ingest: a raw record becomes a typed row or a rejection with its reason (parse), the
event-time guard, expectations, and the quarantine that keeps what was rejected."""
