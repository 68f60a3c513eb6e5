"""A model factory whose error quotes the secret it was given, as a real one's authentication error
might (used through `model._target_` by tests/test_secrets.py)."""

from __future__ import annotations

from typing import Any


def auth_fails(input_spec: dict[str, Any], api_token: str = "", **kwargs: Any) -> Any:
    raise PermissionError(f"auth failed for token {api_token}")
