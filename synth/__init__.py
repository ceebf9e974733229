"""ocs-synth: design the optical-circuit-switched interconnect of an LLM-inference deployment.

The public API a planning tool uses:

>>> import synth
>>> inst = synth.load_instance("instances/decode/deepseek-v3-72.toml")
>>> wl = synth.build_workload(inst)
>>> wl.traffic.accelerators
72
"""
from __future__ import annotations

__version__ = "0.1.0"

from .errors import Infeasible, InvalidInput, InvalidInstance, SolverUnavailable, SynthError
from .formats import (load_phases, load_traffic, load_wiring, read_xconnect, save_phases, save_traffic, save_wiring,
                      write_xconnect, xconnect_tables)
from .instance import Instance, ModelSpec, load_instance
from .model import (Accelerator, Circuit, Collective, CollectiveKind, Limit, OCSLayout, Schedule, SolveParams,
                    SolveResult, SolveStatus, TrafficMatrix, TrafficPhase, Transfer, Wiring, phases_traffic)
from .verify import Violation, require_valid_wiring, wiring_violations
from .workload import Workload, build_workload, step_phases

__all__ = [
    "Accelerator", "Circuit", "Collective", "CollectiveKind", "Infeasible", "Instance", "InvalidInput",
    "InvalidInstance", "Limit", "ModelSpec", "OCSLayout", "Schedule", "SolveParams", "SolveResult",
    "SolveStatus", "SolverUnavailable", "SynthError", "TrafficMatrix", "TrafficPhase", "Transfer", "Violation",
    "Wiring", "Workload", "build_workload", "load_instance", "load_phases", "load_traffic", "load_wiring",
    "phases_traffic", "read_xconnect", "require_valid_wiring", "save_phases", "save_traffic", "save_wiring",
    "step_phases", "wiring_violations", "write_xconnect", "xconnect_tables", "__version__",
]
