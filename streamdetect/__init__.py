"""streamdetect: detect privacy disclosure across several released views of one private table."""

from streamdetect.api import check, load_topology
from streamdetect.checks.findings import LinkageFinding
from streamdetect.checks.protocol import Batch
from streamdetect.detector import Detector
from streamdetect.engine import Report
from streamdetect.errors import PredicateError, StreamdetectError, TopologyError

__all__ = [
    "Batch",
    "Detector",
    "LinkageFinding",
    "PredicateError",
    "Report",
    "StreamdetectError",
    "TopologyError",
    "check",
    "load_topology",
]
__version__ = "0.1.0"
