#!/bin/sh
# The API reference, generated offline from the docstrings: sh docs/api.sh [OUT] (default docs/api).
# Open OUT/index.html. The notebook API is interp_toolkit (interp_toolkit.api); the packages
# underneath follow.
exec "${PYTHON:-python}" -m pdoc -o "${1:-docs/api}" \
    interp_toolkit interp_toolkit.api interp_toolkit.analysis interp_toolkit.views \
    interp_toolkit.reports interp_toolkit.targets interp_toolkit.training
