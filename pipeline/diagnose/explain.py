"""`torch._dynamo.explain` on the model and loss, as text (`diagnose.explain=true`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def explain(forward_loss: Callable[[Any], torch.Tensor], batch: Any) -> str:
    output = torch._dynamo.explain(forward_loss)(batch)
    lines = [
        f"graphs: {output.graph_count}",
        f"graph breaks: {output.graph_break_count}",
        f"ops: {output.op_count}",
        "",
    ]
    for i, reason in enumerate(output.break_reasons, 1):
        frames = [f"{f.filename}:{f.lineno}" for f in reason.user_stack] if reason.user_stack else []
        lines.append(f"break {i}: {frames[-1] if frames else '?'}")
        lines.extend("    " + line for line in str(reason.reason).strip().splitlines()[:6])
    lines += ["", "full report:", str(output)]
    return "\n".join(lines)
