"""``python -m interp_toolkit`` is the ``interp-toolkit`` command."""

import sys

try:
    from interp_toolkit.cli import main
except KeyboardInterrupt:  # Ctrl-C while the command line loads: still one line, exit 130
    print("interrupted.", file=sys.stderr)
    sys.exit(130)

main()
