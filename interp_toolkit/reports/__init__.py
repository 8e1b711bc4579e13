"""Reports: run the analysis, then render it with the views (model in, HTML out).

- :mod:`.attention`    attention views of a model on a prompt (notebooks; ``interp-toolkit view``)
- :mod:`.run_report`   ``RUN/report.html`` from :class:`~interp_toolkit.measures.run.RunAnalysis`
- :mod:`.study_report` the study's side-by-side page from run summaries
"""
