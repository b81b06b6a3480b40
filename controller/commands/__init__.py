"""One module per ``shoe-controller`` subcommand, each with ``run(args) -> int``."""
