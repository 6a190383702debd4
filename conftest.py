"""pytest: doctests run from the package too; the CLI's ``__main__`` is not a test module."""

collect_ignore = ["streamdetect/__main__.py"]
