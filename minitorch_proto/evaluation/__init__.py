"""Evaluating models: scores, cross-validation, tables, explanations, MIL unit tests.

=================  =====================================================================
module             what it holds
=================  =====================================================================
``metrics``        accuracy and ROC AUC, computed in one place
``cv``             leakage-free repeated cross-validation and inner-split tuning
``report``         tables shaped like the paper's Table 2, average ranks, atomic writes
``explain``        prototype tables, nearest instances, projection, per-instance shares
``mil_unit_tests`` the algorithmic unit tests of Raff & Holt (2023) on any estimator
=================  =====================================================================
"""
