"""Edge: the command line (click + rich)."""
