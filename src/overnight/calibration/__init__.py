"""``overnight calibrate``: the drift judge measured on labelled queues.

The labelled queues and their loading (``queues``), the judge asked as a run asks it under a
money cap (``judge``), the statistics of its verdicts (``stats``) in a report (``report``), and
the report as printed (``calibration_text``).
"""

from overnight.calibration.calibration_text import render_text
from overnight.calibration.judge import (
    DEFAULT_CAP_USD,
    MeteredJudge,
    calibrate,
    calibrate_spec,
    judge_queue,
)
from overnight.calibration.queues import (
    LABELS,
    VERIFY_NOT_GIVEN,
    CalibrationSet,
    CalibrationTask,
    Label,
    LabelledQueue,
    bundled_text,
    load_queues,
    parse_set,
)
from overnight.calibration.report import (
    BANDS,
    CONFIGURED,
    EXIT_MODEL_FAILED,
    EXIT_NOT_SEPARATED,
    EXIT_SEPARATES,
    Agreement,
    Band,
    CalibrationReport,
    Distribution,
    QueueResult,
    Separation,
    Status,
    Stopped,
    Thresholds,
)
from overnight.calibration.stats import (
    agreement,
    agrees,
    band_of,
    confusion_matrix,
    distribution,
    scores_of,
    separation,
    severity_order,
    suggest_threshold,
    summarize,
)

__all__ = [
    "BANDS",
    "CONFIGURED",
    "DEFAULT_CAP_USD",
    "EXIT_MODEL_FAILED",
    "EXIT_NOT_SEPARATED",
    "EXIT_SEPARATES",
    "LABELS",
    "VERIFY_NOT_GIVEN",
    "Agreement",
    "Band",
    "CalibrationReport",
    "CalibrationSet",
    "CalibrationTask",
    "Distribution",
    "Label",
    "LabelledQueue",
    "MeteredJudge",
    "QueueResult",
    "Separation",
    "Status",
    "Stopped",
    "Thresholds",
    "agreement",
    "agrees",
    "band_of",
    "bundled_text",
    "calibrate",
    "calibrate_spec",
    "confusion_matrix",
    "distribution",
    "judge_queue",
    "load_queues",
    "parse_set",
    "render_text",
    "scores_of",
    "separation",
    "severity_order",
    "suggest_threshold",
    "summarize",
]
