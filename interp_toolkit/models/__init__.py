"""Models: a config with its derived shapes, building it with TransformerLens, presets, sampling, reading activations."""
