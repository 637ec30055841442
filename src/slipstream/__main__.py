from slipstream.app.cli import entry

raise SystemExit(entry())
