"""streamdetect: detect privacy disclosure across several released views of one private table."""

from streamdetect.api import check, load_topology
from streamdetect.checks.findings import LinkageFinding
from streamdetect.engine import Report
from streamdetect.errors import PredicateError, StreamdetectError, TopologyError

__all__ = [
    "LinkageFinding",
    "PredicateError",
    "Report",
    "StreamdetectError",
    "TopologyError",
    "check",
    "load_topology",
]
__version__ = "0.1.0"
