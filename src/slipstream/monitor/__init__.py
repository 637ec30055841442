"""Monitoring: the query listener, the event log, metrics, status and the dashboard."""
