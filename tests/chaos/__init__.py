"""The randomized fault campaign (issue 43, item 2): seeded scenarios that combine a pipeline,
generated input with its dirt (files landed in a folder, or produced to a Kafka topic), a sink
and a schedule of faults (SIGKILL at random points and inside the sink's transaction, Ctrl-C, a
damaged checkpoint file, a restart with a changed parameter, files landed between runs, a file
appended after its batch read it, a file landed late, a broker restart, the state dir's disk
full), each ended by a run to completion and the sink (SQLite, PostgreSQL, Parquet files or a
Kafka topic) compared with an independent model over everything landed.

    python -m tests.chaos --seed 7                # one scenario: the command a failure prints
    python -m tests.chaos --seeds 20 --report R   # seeds 1..20 and a Markdown report

`scenario.py` plans (a pure function of the seed), `workloads.py` makes the input and the model,
`outputs.py` reads what the sinks hold, `runner.py` runs the CLI and lands the input,
`execute.py` injects the faults of the checkpoint and the process and classifies the outcome,
`input_faults.py` injects those of the input, `disk_full.py` fills the state dir's disk before
the final run, `campaign.py` runs many and reports."""
