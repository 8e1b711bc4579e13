"""Development over training: the local learning coefficient (LLC) at each kept checkpoint and
the stages its curve marks (docs/stages.md)."""
