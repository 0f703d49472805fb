"""Types shared by the package's modules, for their annotations."""
import os
from typing import Any, Dict, Protocol, Sequence, Union, runtime_checkable


@runtime_checkable
class HasPath(Protocol):
    """Anything with the path of a mount: a blockfs.Mount."""

    path: str


# A mountpoint: a path, or a Mount.
MountPath = Union[str, "os.PathLike[str]", HasPath]

# A mount's info.json, as read.
Info = Dict[str, Any]

# Shard R of W: "R/W" or (R, W).
ShardSpec = Union[str, Sequence[Union[int, str]]]
