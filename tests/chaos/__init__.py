"""The randomized fault campaign (issue 43, item 2): seeded scenarios that combine a pipeline,
generated input with its dirt, a sink and a schedule of faults (SIGKILL at random points and
inside the sink's transaction, Ctrl-C, a damaged checkpoint file, a restart with a changed
parameter, files landed between runs), each ended by a run to completion and the sink compared
with an independent model over everything landed.

    python -m tests.chaos --seed 7                # one scenario: the command a failure prints
    python -m tests.chaos --seeds 20 --report R   # seeds 1..20 and a Markdown report

`scenario.py` plans (a pure function of the seed), `workloads.py` makes the input and the model,
`outputs.py` reads what the sinks hold, `execute.py` runs a plan and classifies its outcome,
`campaign.py` runs many and reports."""
