"""The worker's defaults, in a module of their own: the command line shows them in ``--help`` without
loading Faust, the Kafka client or the checks."""

#: Bytes of records written since the last snapshot (and at least that snapshot's size) after which a
#: new snapshot replaces them: the table stays within about twice the state plus this, and a restore
#: replays at most that much; each byte written is snapshotted at most about once more (amortised O(1)).
COMPACT_BYTES = 16 << 20
#: Seconds a folded batch id is remembered (to skip a redelivered record) once a snapshot is taken: Kafka
#: redelivers what a worker read and did not commit, within minutes; a week is far beyond that.
REPLAY_RETENTION_S = 7 * 86_400.0
