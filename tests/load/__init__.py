"""The load harness (issue 45): built-in pipelines run while CPU hogs hold the machine busy, each
sink judged against the same independent models as the rest of the suite. `python -m tests.load`
(`make stress`) runs every case at 4x and 8x the cores; tests/e2e/load/ runs a small set at 4x in
`make test`. resources.py adds memory and disk pressure: the smallest heap, the state dir on a
tmpfs that fills and on a throttled disk (disks.py mounts them, as root)."""
