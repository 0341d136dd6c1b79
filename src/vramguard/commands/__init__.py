"""One module per CLI subcommand; see vramguard.cli.COMMANDS."""
