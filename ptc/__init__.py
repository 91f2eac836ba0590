"""The ``run_code`` executor: bridge, rolling-pool scheduler, modes, events and the CLI."""

__all__: list[str] = []
