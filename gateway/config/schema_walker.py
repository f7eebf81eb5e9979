"""The schema walker: a PyYAML node tree -> the config dataclasses, every problem with its
key path and line, all of them in one pass; and the checks across keys of one section.
"""
from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import enum
import types
import typing
from typing import Any, Mapping

import yaml

from gateway.config.checks import existing_file_problem
from gateway.config.errors import ConfigError
from gateway.config.listeners import ListenerConfig, TlsMode
from gateway.config.root import GatewayConfig
from gateway.config.workers import workers_problem
from gateway.backend.settings import BackendSettings, backend_problems, backends_problems
from gateway.forward.outbound import RemoteSettings
from gateway.forward.settings import ForwardingSettings, forwarding_problems, remote_problems, tls_problems


#: fields the loader sets on ``GatewayConfig``, which the file cannot give
LOADER_FIELDS = frozenset({"source", "warnings"})

_SCALAR_TAGS = {
    "tag:yaml.org,2002:str": str,
    "tag:yaml.org,2002:int": int,
    "tag:yaml.org,2002:float": float,
    "tag:yaml.org,2002:bool": bool,
    "tag:yaml.org,2002:null": type(None),
}
_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
               type(None): "null"}


class SchemaWalker:
    """Builds a dataclass from a YAML node tree, reporting every problem in one pass.

    A problem is raised as a ``ConfigError`` (``raise self.fail(...)``) and caught at the
    nearest key, list item or mapping entry (``_noting``), which keeps it and goes on with
    the next one; a mapping with a problem inside is not built (nor cross-checked) and
    counts as a problem of its parent. ``build_all`` raises them all together."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.loader = yaml.SafeLoader("")
        self.lines: dict[str, int] = {}     # key path -> 1-based line, for later checks
        self.errors: list[ConfigError] = []

    def build_all(self, tp: Any, node: yaml.Node) -> Any:
        """``build`` from the root; raises one ``ConfigError`` holding every problem."""
        value = None
        with self._noting():
            value = self.build(tp, node, "")
        if self.errors:
            raise ConfigError.collected(self.errors)
        return value

    @contextlib.contextmanager
    def _noting(self):
        """Keep a problem raised inside (once: a nested one arrives again) and go on."""
        try:
            yield
        except ConfigError as exc:
            if not any(e is exc for e in self.errors):
                self.errors.append(exc)

    def fail(self, path: str, node: yaml.Node, message: str) -> ConfigError:
        return ConfigError(path, node.start_mark.line + 1, message, self.source)

    def scalar(self, node: yaml.Node, path: str) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            kind = "a list" if isinstance(node, yaml.SequenceNode) else "a mapping"
            raise self.fail(path, node, f"expected a single value, got {kind}")
        return self.loader.construct_object(node, deep=True)

    def build(self, tp: Any, node: yaml.Node, path: str) -> Any:
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin in (typing.Union, types.UnionType):
            inner = [a for a in args if a is not type(None)]
            if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
                return None
            if isinstance(node, yaml.ScalarNode) and node.value == "none" and inner == [str]:
                return None
            if len(inner) > 1 and all(t in _TYPE_NAMES for t in inner):
                value = self.scalar(node, path)   # one of several scalar types (workers)
                if type(value) in inner:
                    return value
                wanted = " or ".join(_TYPE_NAMES[t] for t in inner)
                raise self.fail(path, node, f"expected {wanted}, got {value!r}")
            return self.build(inner[0], node, path)
        if dataclasses.is_dataclass(tp):
            scalar_key = getattr(tp, "SCALAR_KEY", None)
            if scalar_key is not None and isinstance(node, yaml.ScalarNode):
                # a bare value in place of the mapping: ``- /`` for ``- {name: /}``
                return tp(**{scalar_key: self.build(str, node, path)})
            return self.build_dataclass(tp, node, path)
        if origin in (tuple, list):
            if not isinstance(node, yaml.SequenceNode):
                raise self.fail(path, node, "expected a list")
            items = []
            errors_before = len(self.errors)
            for i, item in enumerate(node.value):
                self.lines[f"{path}[{i}]"] = item.start_mark.line + 1
                with self._noting():
                    items.append(self.build(args[0], item, f"{path}[{i}]"))
            self._raise_new_errors(errors_before)
            return tuple(items)
        if origin in (dict, collections.abc.Mapping) or tp is Mapping:
            if not isinstance(node, yaml.MappingNode):
                raise self.fail(path, node, "expected a mapping")
            out = {}
            errors_before = len(self.errors)
            for knode, vnode in node.value:
                with self._noting():
                    key = str(self.scalar(knode, path))
                    out[key] = self.build(args[1], vnode, f"{path}[{key!r}]")
            self._raise_new_errors(errors_before)
            return out
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            value = self.scalar(node, path)
            if value is False and "off" in [m.value for m in tp]:
                value = "off"  # YAML 1.1 reads a bare off/on as booleans
            elif value is True and "on" in [m.value for m in tp]:
                value = "on"
            try:
                return tp(value)
            except ValueError:
                allowed = ", ".join(m.value for m in tp)
                raise self.fail(path, node, f"{value!r} is not one of: {allowed}") from None
        value = self.scalar(node, path)
        actual = type(value)
        if tp is float and actual is int:
            value = float(value)
        elif actual is not tp:
            raise self.fail(path, node, f"expected {_TYPE_NAMES.get(tp, tp.__name__)}, got {value!r}")
        return value

    def build_dataclass(self, cls: type, node: yaml.Node, path: str) -> Any:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(path, node, f"expected a mapping of {cls.__name__} settings")
        hints = typing.get_type_hints(cls)
        fields_by_name = {f.name: f for f in dataclasses.fields(cls) if f.name not in LOADER_FIELDS}
        values: dict[str, Any] = {}
        given: set[Any] = set()
        errors_before = len(self.errors)
        for knode, vnode in node.value:
            with self._noting():
                self._build_key(values, given, fields_by_name, hints, knode, vnode, path)
        for name, f in fields_by_name.items():
            if name not in given and f.default is dataclasses.MISSING \
                    and f.default_factory is dataclasses.MISSING:
                sub = f"{path}.{name}" if path else name
                with self._noting():
                    raise self.fail(sub, node, f"required key {name!r} is missing")
        self._raise_new_errors(errors_before)
        obj = cls(**values)
        cross = getattr(self, f"_cross_{cls.__name__}", None)
        if cross is not None:
            cross(obj, node, path)
        return obj

    def _build_key(self, values: dict[str, Any], given: set[Any],
                   fields_by_name: Mapping[str, dataclasses.Field], hints: Mapping[str, Any],
                   knode: yaml.Node, vnode: yaml.Node, path: str) -> None:
        key = self.scalar(knode, path)
        sub = f"{path}.{key}" if path else str(key)
        f = fields_by_name.get(key) if isinstance(key, str) else None
        if f is None:
            known = ", ".join(sorted(fields_by_name))
            raise self.fail(sub, knode, f"unknown key {key!r} (known keys: {known})")
        if key in given:
            raise self.fail(sub, knode, "key given twice")
        given.add(key)
        self.lines[sub] = knode.start_mark.line + 1
        value = self.build(hints[key], vnode, sub)
        check = f.metadata.get("check")
        problem = check(value) if check and value is not None else None
        if problem:
            raise self.fail(sub, vnode, problem)
        values[key] = value

    def _raise_new_errors(self, errors_before: int) -> None:
        """A list or mapping with a problem inside is not built: its parent skips it."""
        if len(self.errors) > errors_before:
            raise self.errors[errors_before]

    def _vhost_place(self, node: yaml.MappingNode, index: int) -> str:
        """``vhosts[i], line N``; the default vhosts when the key is not given."""
        item = self._item_node(node, "vhosts", index)
        if item is node:
            return "the default vhosts"
        return f"vhosts[{index}], line {item.start_mark.line + 1}"

    def _item_node(self, node: yaml.MappingNode, key: str, index: int) -> yaml.Node:
        """Item ``index`` of the list under ``key`` (else the key, else ``node``)."""
        for knode, vnode in node.value:
            if getattr(knode, "value", None) == key:
                if isinstance(vnode, yaml.SequenceNode) and index < len(vnode.value):
                    return vnode.value[index]
                return knode
        return node

    def _key_node(self, node: yaml.MappingNode, key: str) -> yaml.Node:
        for knode, vnode in node.value:
            if getattr(knode, "value", None) == key:
                return knode
        return node

    def _cross_RemoteSettings(self, obj: RemoteSettings, node: yaml.MappingNode, path: str) -> None:
        for key, message in remote_problems(obj, existing_file_problem):
            raise self.fail(f"{path}.{key}", self._key_node(node, key), message)

    def _cross_ForwardingSettings(self, obj: ForwardingSettings, node: yaml.MappingNode,
                                  path: str) -> None:
        for key, sub, message in forwarding_problems(obj):
            raise self.fail(f"{path}.{sub}", self._key_node(node, key), message)

    def _cross_BackendSettings(self, obj: BackendSettings, node: yaml.MappingNode, path: str) -> None:
        for key, message in backend_problems(obj, existing_file_problem, tls_problems):
            raise self.fail(f"{path}.{key}", self._key_node(node, key), message)

    def _cross_GatewayConfig(self, obj: "GatewayConfig", node: yaml.MappingNode, path: str) -> None:
        seen: set[str] = set()
        for i, vhost in enumerate(obj.vhosts):
            if vhost.name in seen:
                with self._noting():
                    raise self.fail(f"vhosts[{i}]", self._item_node(node, "vhosts", i),
                                    f"vhost '{vhost.name}' is listed twice")
            seen.add(vhost.name)
        for key_path, message in backends_problems(obj.backends, obj.vhosts):
            section, _, rest = key_path.partition("[")
            index = int(rest.split("]", 1)[0])
            item = self._item_node(node, section, index)
            key = key_path.rsplit(".", 1)[-1]
            at = self._key_node(item, key) if isinstance(item, yaml.MappingNode) else item
            with self._noting():
                raise self.fail(key_path, at, message)
        refused = workers_problem(obj.workers, obj.vhosts, lambda i: self._vhost_place(node, i))
        if refused is not None:
            with self._noting():
                raise self.fail("workers", self._key_node(node, "workers"), refused)
        if obj.container_id and obj.forwarding.remote(obj.container_id) is not None:
            raise self.fail("forwarding.remotes", self._key_node(node, "forwarding"),
                            f"remote container '{obj.container_id}' is this gateway's own "
                            "container_id")

    def _cross_ListenerConfig(self, obj: "ListenerConfig", node: yaml.MappingNode, path: str) -> None:
        if obj.tls is not TlsMode.OFF:
            for key in ("tls_cert_file", "tls_key_file"):
                if getattr(obj, key) is None:
                    raise self.fail(f"{path}.{key}", self._key_node(node, "tls"),
                                    f"tls: {obj.tls.value} needs {key}")
        if obj.tls_verify_client != "none" and obj.tls_ca_file is None:
            raise self.fail(f"{path}.tls_ca_file", self._key_node(node, "tls_verify_client"),
                            "verifying client certificates needs tls_ca_file")
