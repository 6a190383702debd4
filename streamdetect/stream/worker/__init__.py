"""The Faust worker (docs/streaming.md): the application and its two shapes, what they write, and the
catch-up of records the consumer skipped."""

from streamdetect.stream.worker.app import app_id, build_app, run_worker, state_table
from streamdetect.stream.worker.catch_up import TAIL_CHECK_S, UNSTICK_S
from streamdetect.stream.worker.one_stage import IDLE_SNAPSHOT_S

__all__ = ["IDLE_SNAPSHOT_S", "TAIL_CHECK_S", "UNSTICK_S", "app_id", "build_app", "run_worker", "state_table"]
