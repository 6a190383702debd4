"""The privacy checks, one per module, each an incremental state with initialize/update/result."""
