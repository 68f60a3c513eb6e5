"""Make torchvision importable on CPU-only torch builds.

timm imports torchvision. PyPI has no CPU build of torchvision, and its CUDA wheel cannot load its
C++ ops (`_C.so` links libtorch_cuda) against a CPU build of torch; torchvision 0.28 then fails at
import, because it registers fake kernels for `torchvision::nms` and `torchvision::qnms` even when its
ops did not load. Declaring those two operator schemas first lets the import finish. torchvision's C++
ops (nms, roi_align, ...) stay unavailable, and no model here uses them. Nothing happens where
torchvision's ops load (every CUDA build of torch, e.g. on GPU hosts).
"""

from __future__ import annotations

import importlib.util
import pathlib

_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_library = None  # keeps the schema registrations alive


def ensure_torchvision_importable() -> None:
    global _library
    import torch

    if _library is not None or torch.version.cuda is not None:
        return
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return
    ops = next(pathlib.Path(spec.origin).parent.glob("_C*.so"), None)
    try:
        if ops is not None:
            torch.ops.load_library(str(ops))
            return
    except OSError:
        pass
    library = torch.library.Library("torchvision", "FRAGMENT")
    for name, schema in _SCHEMAS.items():
        if not hasattr(torch.ops.torchvision, name):
            library.define(schema)
    _library = library
