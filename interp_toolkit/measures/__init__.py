"""What a study measures on its runs, as typed data: the run analysis (:mod:`.run`), each depth's
measurement (:mod:`.depth`), the probes and neurons (:mod:`.layers`), the registry of measures
the tables read (:mod:`.registry`), the measures over seeds (:mod:`.seeds`), and the original
post's claims as verdicts (:mod:`.claims`). Reports render them; nothing here writes words
beyond a measure's label."""
