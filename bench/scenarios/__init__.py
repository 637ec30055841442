"""One module per scenario; each exposes `NAME`, `TITLE` and `run(ctx) -> Result`."""
