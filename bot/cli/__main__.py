"""`python -m bot.cli`: the command line, as the `revert-bisect` script."""

from bot.cli.main import main

main()
