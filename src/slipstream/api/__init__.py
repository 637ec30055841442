"""What a pipeline author imports: `Pipeline`, `Input`, `Output`, `Param` and their shortcuts,
the helpers for `build` (frames) and `Expectation`."""
