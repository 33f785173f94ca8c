"""The supervisor: runs one job until it settles, or sweeps every unsettled job once."""

from dispatch.supervise.supervisor import Deliver, PassResult, Supervisor, SweepReport

__all__ = ["Deliver", "PassResult", "Supervisor", "SweepReport"]
