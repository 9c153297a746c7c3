"""Every benchmark case in run order: ``cases.CASES`` (lance_ops' own datasets), then
``cases_22.CASES_22`` (pylance-written 2.2 datasets), then ``cases_fleet.CASES_FLEET`` (the planner); the Spark cases take a session too."""

from .cases import CASES as _CASES
from .cases import SPARK_CASES as _SPARK_CASES
from .cases_22 import CASES_22, SPARK_CASES_22
from .cases_fleet import CASES_FLEET

CASES = {**_CASES, **CASES_22, **CASES_FLEET}
SPARK_CASES = _SPARK_CASES | SPARK_CASES_22
