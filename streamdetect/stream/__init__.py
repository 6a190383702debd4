"""The streaming edge: Kafka topics, records, the broker for tests and demos, the Faust worker.

Nothing in the pure core imports from here (tests/unit/test_architecture.py); this package calls the
core's :class:`~streamdetect.detector.Detector`, as ``check`` does.
"""
