"""What each command of the CLI does, one function per command: its options in (typed, checked
once), the target loaded, the analysis run, a typed result out (its ``to_dict()``: the JSON the
command writes). The CLI parses, calls one of these and prints what :mod:`interp_toolkit.reports.
terminal` renders of the result; the notebook API (:mod:`interp_toolkit.api`) shares them where
both do the same thing (a training's recipe: :func:`interp_toolkit.training.presets.recipe`)."""
