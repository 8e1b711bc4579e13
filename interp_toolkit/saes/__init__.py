"""Sparse dictionaries (SAEs) on TransformerLens 4: configs in SAELens's field names
(:mod:`.config`), the architectures and their registry (:mod:`.architectures`), the autoencoder
(:mod:`.sae`), activations streamed through hooks
(:mod:`.activations`), training (:mod:`.train`), SAELens's metrics (:mod:`.evaluate`), per-latent
feature data (:mod:`.features`) and a planted-feature known answer (:mod:`.toy`).
See docs/dictionaries.md."""
