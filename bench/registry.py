"""Every benchmark case in run order: ``cases.CASES`` (lance_ops' own datasets), then
``cases_22.CASES_22`` (pylance-written 2.2 datasets), then ``cases_fleet.CASES_FLEET`` (the
planner), then ``cases_layout.CASES_LAYOUT`` (upgrade and Z-order clustering, issue 36); the Spark
cases take a session too; ``cases_cleanup.CASES_CLEANUP`` (cleanup at scale, issue 33) last."""

from .cases import CASES as _CASES
from .cases import SPARK_CASES as _SPARK_CASES
from .cases_22 import CASES_22, SPARK_CASES_22
from .cases_cleanup import CASES_CLEANUP
from .cases_fleet import CASES_FLEET
from .cases_layout import CASES_LAYOUT

CASES = {**_CASES, **CASES_22, **CASES_FLEET, **CASES_LAYOUT, **CASES_CLEANUP}
SPARK_CASES = _SPARK_CASES | SPARK_CASES_22
