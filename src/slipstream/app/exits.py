"""The CLI's exit codes: 0 done, 1 failed, 2 refused before anything ran, 130 interrupted
(Ctrl-C: 128 + SIGINT, as a shell reports it)."""

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2
EXIT_INTERRUPTED = 130
