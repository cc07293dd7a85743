"""Which rank this process is, and the run folder every rank of one job writes into.

torchrun (and any launcher following its conventions: SLURM wrappers,
``torch.distributed.launcher``) describes each worker through environment
variables: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``.
Nothing here touches torch.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from dmlprof.errors import UsageError
from dmlprof.meta import Distributed
from dmlprof.session_check import MAX_WORLD_SIZE  # noqa: F401  (the most ranks a run folder may claim)

#: set by ``dmlprof scan --nproc``: the run folder its ranks write into
RUN_DIR_ENV = "DMLPROF_RUN_DIR"
#: set by ``dmlprof scan --nproc``: the parent prints the merged report, ranks print nothing
PARENT_ENV = "DMLPROF_DISTRIBUTED_PARENT"
#: NCCL and symmetric-memory switches passed through to every rank untouched
#: (multicast over NVLink stays off where the lender says so; see issue 18)
PASS_THROUGH_ENV = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
SESSION_NAME = "rank{rank}.session.json"
#: ``--nproc`` starts this many ranks at most: each is a process with its own torch, and more processes
#: than twice the cores (or 8, for a machine with a GPU per rank and few cores) only starve each other
MAX_LOCAL_RANKS = max(8, 2 * (os.cpu_count() or 1))
#: set by ``dmlprof scan --nproc``: the run's id, which each rank's session carries (``meta.distributed.run_id``)
RUN_ID_ENV = "DMLPROF_RUN_ID"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class RankInfo:
    """One worker of a launched job, as its launcher described it."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int = 0
    #: what every rank of one job shares, and no other job does (sessions of two runs are never merged)
    run_id: str = ""

    def as_meta(self) -> dict:
        return asdict(self)

    def as_record(self) -> Distributed:
        """The rank's place as its session records it (``RunMeta.distributed``; the collectives come later)."""
        return Distributed(**self.as_meta())


def rank_info(environ=None) -> Optional[RankInfo]:
    """This process's place in a launched job, or None when no launcher started it.

    Raises UsageError when the variables are there but make no sense.
    """
    environ = os.environ if environ is None else environ
    if "RANK" not in environ or "WORLD_SIZE" not in environ:
        return None
    try:
        rank, world = int(environ["RANK"]), int(environ["WORLD_SIZE"])
        local_rank = int(environ.get("LOCAL_RANK", rank))
        local_world = int(environ.get("LOCAL_WORLD_SIZE", world))
        node = int(environ.get("GROUP_RANK", 0))
    except ValueError:
        raise UsageError("RANK, LOCAL_RANK, WORLD_SIZE must be whole numbers (as torchrun sets them)") from None
    if not 1 <= world <= MAX_WORLD_SIZE or not 0 <= rank < world or not 0 <= local_rank < max(local_world, 1) \
            or not 0 <= node < MAX_WORLD_SIZE or local_world > MAX_WORLD_SIZE:
        raise UsageError(f"RANK {rank} / LOCAL_RANK {local_rank} / WORLD_SIZE {world} do not describe a rank of a job")
    return RankInfo(rank, local_rank, world, local_world, node, environ.get(RUN_ID_ENV) or job_token(environ))


def job_token(environ=None) -> str:
    """A short name all ranks of one job compute alike, without talking to each other.

    torchrun's run id when the user gave one (``--rdzv-id``, and ``--standalone``
    makes one up); otherwise the folder torchrun's agent made for this job's
    error files (one per agent, so one per job on one machine); otherwise the
    rendezvous address.
    """
    environ = os.environ if environ is None else environ
    run_id = environ.get("TORCHELASTIC_RUN_ID", "")
    if run_id and run_id != "none":
        seed = run_id
    elif environ.get("TORCHELASTIC_ERROR_FILE"):
        # .../torchelastic_XXXX/<run id>_YYYY/attempt_N/<local rank>/error.json
        parts = Path(environ["TORCHELASTIC_ERROR_FILE"]).parts
        seed = str(Path(*parts[:-3])) if len(parts) > 3 else environ["TORCHELASTIC_ERROR_FILE"]
    else:
        seed = "|".join(environ.get(k, "") for k in ("MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID", "WORLD_SIZE"))
    return hashlib.sha1(seed.encode("utf-8")).hexdigest()[:8]


def run_dir_name(model: str, backend: str, world_size: int, token: str) -> str:
    """``<model>-<backend>-<N>ranks-<token>``."""
    model = _SAFE.sub("_", Path(model).stem) or "run"
    return f"{model}-{_SAFE.sub('_', backend)}-{int(world_size)}ranks-{token}"


def run_dir(out, model: str, backend: str, info: RankInfo, environ=None) -> Path:
    """The folder every rank of this job writes into."""
    environ = os.environ if environ is None else environ
    if environ.get(RUN_DIR_ENV):
        return Path(environ[RUN_DIR_ENV])
    return Path(out or "reports") / run_dir_name(model, backend, info.world_size, job_token(environ))


def session_path(folder: Path, rank: int) -> Path:
    return Path(folder) / SESSION_NAME.format(rank=int(rank))
