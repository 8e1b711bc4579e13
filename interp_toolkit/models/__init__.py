"""Models: a config with its derived shapes, building it with TransformerLens, sampling, reading
activations (the presets, a model with its training settings, are ``training/presets.py``)."""
