"""CLI command groups. Each module defines ``register(app)``; ``interp_toolkit.cli`` wires them."""
