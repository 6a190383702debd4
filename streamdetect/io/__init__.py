"""Edge adapters: topology files and data sources (the only modules here that touch the file system)."""
