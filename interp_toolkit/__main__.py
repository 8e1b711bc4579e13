"""``python -m interp_toolkit`` is the ``interp-toolkit`` command."""

from interp_toolkit.cli import main

main()
