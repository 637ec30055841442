"""The CLI's exit codes: 0 done, 1 failed, 2 refused before anything ran."""

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2
