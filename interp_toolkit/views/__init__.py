"""Views: data in, HTML or figures out (no model runs here).

- :mod:`.page`      the HTML page kit (sections, rows, tables; one offline page)
- :mod:`.cv`        the one adapter of circuitsvis output (offline, bundle once per page)
- :mod:`.attention` attention patterns + token labels -> circuitsvis views
- :mod:`.plots`     plotly figures from plain data

Pages that need a model run (a run report, a study page, a view of a prompt) are
:mod:`interp_toolkit.reports`.
"""
