"""Keys that moved, still read under their old names (deprecated aliases).

The loader gives an old key's value to the key that replaced it, so the rest of the
gateway reads only the new one, and records a warning naming the file and line, which
``check-config`` prints and ``run`` logs. Both keys given with different values is an
error: which one was meant cannot be guessed.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping

from gateway.config.errors import ConfigError
from gateway.config.root import GatewayConfig

__all__ = ["RENAMED_KEYS", "apply_renamed_keys"]

#: old key path -> the top-level key that replaced it, and why it moved
RENAMED_KEYS: dict[str, tuple[str, str]] = {
    "amqp10.rabbitmq_version": ("rabbitmq_version",
                                "it applies to AMQP 0-9-1's server-properties too"),
}


def _value(cfg: GatewayConfig, key_path: str) -> Any:
    return functools.reduce(getattr, key_path.split("."), cfg)


def apply_renamed_keys(cfg: GatewayConfig, lines: Mapping[str, int], source: str) -> GatewayConfig:
    """``cfg`` with each old key the file gives (``lines``: key path -> line) applied to
    its replacement, and a warning for it. Raises ``ConfigError`` when the file gives
    both with different values."""
    warnings = list(cfg.warnings)
    for old, (new, why) in RENAMED_KEYS.items():
        if old not in lines:
            continue
        value = _value(cfg, old)
        if new in lines and _value(cfg, new) != value:
            raise ConfigError(old, lines[old], f"the deprecated name of {new}, which says "
                              f"{_value(cfg, new)!r} (line {lines[new]}): keep only {new}", source)
        where = f"{source}:{lines[old]}" if source else f"line {lines[old]}"
        warnings.append(f"{where}: {old} is deprecated: use the top-level {new} ({why})")
        cfg = dataclasses.replace(cfg, **{new: value})
    return dataclasses.replace(cfg, warnings=tuple(warnings))
