"""The supervisor: runs one job until it settles, or sweeps every unsettled job once.

The names below are imported from their modules when first asked for: a command that needs
only a part of this package (``memo``, ``delivery``) does not import the supervisor, and with
it most of the core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dispatch.lazy_names import importer

if TYPE_CHECKING:
    from dispatch.supervise.delivery import Deliver
    from dispatch.supervise.supervisor import PassResult, Supervisor, SweepReport

__all__ = ["Deliver", "PassResult", "Supervisor", "SweepReport"]

_MODULE = {
    "Deliver": "dispatch.supervise.delivery",
    "PassResult": "dispatch.supervise.supervisor",
    "Supervisor": "dispatch.supervise.supervisor",
    "SweepReport": "dispatch.supervise.supervisor",
}

__getattr__ = importer(globals(), _MODULE)
