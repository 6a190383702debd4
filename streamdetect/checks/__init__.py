"""The privacy checks: each an incremental state with initialize/update/merge/result and a codec
(:mod:`~streamdetect.checks.protocol`), registered once in :mod:`~streamdetect.checks.registry` with
its factory, its section of a report and its explanation. One package per check family (linkage,
k_anonymity, indistinguishability, table); the modules beside them are what the checks share."""
