"""Units (MLP neurons, SAE latents) read one way: top contexts, concepts, the monosemanticity rule."""
