"""``python -m ltdask.cli``: the ``ltdask`` command."""

from ltdask.cli import main

main()
