"""Every benchmark case in run order: ``cases.CASES`` (lance_ops' own datasets), then
``cases_22.CASES_22`` (pylance-written 2.2 datasets), ``cases_cleanup.CASES_CLEANUP`` (cleanup at scale); the Spark cases take a session too."""

from .cases import CASES as _CASES
from .cases import SPARK_CASES as _SPARK_CASES
from .cases_22 import CASES_22, SPARK_CASES_22
from .cases_cleanup import CASES_CLEANUP

CASES = {**_CASES, **CASES_22, **CASES_CLEANUP}
SPARK_CASES = _SPARK_CASES | SPARK_CASES_22
