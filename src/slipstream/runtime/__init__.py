"""The run: bind a pipeline to its inputs and outputs (bind), build and start its queries
(runner), watch them to the end (run), the checkpoint's owners, stop control and the late-row
dead-letter."""
