"""The driver script for spark-submit: `spark-submit [spark flags] --py-files slipstream-*.whl
scripts/slipstream_submit.py run PIPELINE [slipstream flags]` (docs/scaling.md). spark-submit
needs a .py file as its main program; this one is the `slipstream` command."""

from slipstream.app.cli import entry

raise SystemExit(entry())
