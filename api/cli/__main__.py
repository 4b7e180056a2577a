"""``python -m api.cli``: the ``flowloom`` command without the console script."""

from . import main

main()
