"""The ground floor: the error type and exit codes, where things are, Debian packages."""
