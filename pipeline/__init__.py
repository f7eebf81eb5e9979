"""PySpark jobs over the gateway's ledger. Importing this package does not import PySpark."""
from pipeline.environment import PipelineEnvironmentError, check_environment
from pipeline.report import ReportSummary, run_report

__all__ = ["PipelineEnvironmentError", "ReportSummary", "check_environment", "run_report"]
