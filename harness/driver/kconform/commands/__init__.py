"""One module per `kconform` subcommand; cli.py holds the table of subcommands
and their arguments."""
