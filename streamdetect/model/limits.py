"""Limits a topology's values must keep, in a module of their own so that the command line reads them
without loading the model's parsers."""

#: The largest threshold (``k``, ``l``) a topology or an option may ask for.
MAX_K = 2**31 - 1
