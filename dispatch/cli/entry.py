"""The ``dispatch`` program's first code: a sweep of a ledger with nothing to pass is answered
before click, pydantic and the core are imported (``empty_sweep``); anything else goes to the
command group (``main``)."""

import sys


def run() -> None:
    """The console script's entry point."""
    words = sys.argv[1:]
    asked = words[:1] == ["sweep"]
    if asked:
        from dispatch.cli.empty_sweep import answer

        if answer(words[1:]):
            sys.exit(0)
    from dispatch.cli.main import main

    main(empty_sweep_asked=asked)
