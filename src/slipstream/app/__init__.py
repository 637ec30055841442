"""The application: the `slipstream` command (cli: parse and dispatch) and the functions it
dispatches to (commands)."""
