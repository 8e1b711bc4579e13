"""Where and how work runs: devices and precision, progress bars, argument checks, seed streams."""
