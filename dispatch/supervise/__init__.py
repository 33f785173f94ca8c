"""The supervisor: runs one job until it settles, or sweeps every unsettled job once."""

from dispatch.supervise.delivery import Deliver
from dispatch.supervise.supervisor import PassResult, Supervisor, SweepReport

__all__ = ["Deliver", "PassResult", "Supervisor", "SweepReport"]
