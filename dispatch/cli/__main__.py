"""``python -m dispatch.cli``: the dispatch command."""

from dispatch.cli.main import main

main()
