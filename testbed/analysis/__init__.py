"""From raw results to verdicts and figures: the checks against the oracle, the
operators' Spark application, and plots."""
