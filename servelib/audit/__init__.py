"""A capacity plan checked against the rest of servelib, with a code for each beginner mistake.

``CapacityPlan`` describes a deployment and the numbers its author claims; ``load_plan``
reads one from TOML; ``derive`` computes what its inputs imply; ``audit`` returns a
``Finding`` per mistake, each with a stable code from ``CODES``. ``examples`` holds the
book's plans: a sound one, one per beginner mistake, one per war story.
Command line: ``python -m servelib plan.toml``.
"""
from .audit import Derived, audit, derive, plan_model, plan_tco, right_tp_degree
from .findings import CODES, Finding
from .plan import CapacityPlan, PlanError, load_plan, parse_plan, plan_from_dict, plan_to_toml

__all__ = ["CapacityPlan", "PlanError", "load_plan", "parse_plan", "plan_from_dict", "plan_to_toml",
           "Derived", "derive", "audit", "plan_model", "plan_tco", "right_tp_degree", "Finding", "CODES"]
