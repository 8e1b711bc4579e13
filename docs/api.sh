#!/bin/sh
# The API reference, generated offline from the docstrings: sh docs/api.sh [OUT] (default docs/api).
# Open OUT/index.html. The notebook API is interp_toolkit (interp_toolkit.api); the packages
# underneath follow.
exec "${PYTHON:-python}" -m pdoc -o "${1:-docs/api}" \
    interp_toolkit interp_toolkit.api interp_toolkit.text interp_toolkit.models interp_toolkit.runs interp_toolkit.heads interp_toolkit.stats interp_toolkit.exams interp_toolkit.weights interp_toolkit.causal interp_toolkit.probing interp_toolkit.units interp_toolkit.saes interp_toolkit.study interp_toolkit.views \
    interp_toolkit.reports interp_toolkit.training
