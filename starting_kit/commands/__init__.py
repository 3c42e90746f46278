"""Sub-commands of the `arena` command line, one Typer app per module, mounted by
`starting_kit/cli.py`."""
