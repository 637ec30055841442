from slipstream.cli import entry

raise SystemExit(entry())
