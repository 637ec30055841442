"""Example pipelines: each one module, run with `slipstream run examples.MODULE:CLASS`."""
