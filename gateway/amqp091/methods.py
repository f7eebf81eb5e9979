"""One frozen dataclass per 0-9-1 method, built from the rows of :mod:`gateway.amqp091.spec`.

Nothing here is written method by method: :func:`_build` turns a :class:`MethodSpec` row into
a dataclass and compiles an encoder and a decoder for it. The codecs are generated Python
source (``exec``), so every method gets the fast path the hot ones need: runs of fixed-width
arguments (and the length octet of a following short string) become one precompiled
``struct`` call, bits are packed low-order first into shared octets, and tables and long
strings call :mod:`gateway.amqp091.values`. ``methods_source(name)`` returns the generated
source of a method for inspection.

Contract:

* ``method.encode() -> bytes``: the method frame payload (class id, method id, arguments).
  Raises ``ValueError``/``struct.error`` for out-of-range values (a local bug).
* ``decode_method(payload) -> Method``: raises ``ConnectionException`` with 540 for a refused
  class (naming it), 503 for an unknown class or method, 502 for truncated, malformed or
  trailing argument bytes (naming the method).
"""
from __future__ import annotations

import struct
from dataclasses import field, make_dataclass
from typing import Any, Callable, ClassVar

from gateway.amqp091 import values as _values
from gateway.amqp091.errors import ConnectionException, DecodeError
from gateway.amqp091.spec import (
    METHODS,
    METHODS_BY_ID,
    REFUSED_CLASSES,
    Domain,
    MethodSpec,
    ReplyCode,
)

__all__ = ["Method", "decode_method", "method_class", "METHOD_CLASSES", "methods_source"]

_FIXED = {Domain.OCTET: "B", Domain.SHORT: "H", Domain.LONG: "I", Domain.LONGLONG: "Q", Domain.TIMESTAMP: "Q"}
_HEAD = struct.Struct(">HH")


class Method:
    """Base of every method dataclass. Class attributes come from the spec row."""

    __slots__ = ()
    NAME: ClassVar[str]
    CLASS_ID: ClassVar[int]
    METHOD_ID: ClassVar[int]
    SPEC: ClassVar[MethodSpec]
    CONTENT: ClassVar[bool]
    SYNCHRONOUS: ClassVar[bool]

    def encode(self) -> bytes:  # replaced per class by the generated encoder
        raise NotImplementedError

    #: ``make(*arguments)``: the method from all its arguments, positional, in spec order
    #: (generated per class; the hot paths' constructor, see ``_made_lines``)
    make: ClassVar[Callable[..., "Method"]]


def _class_name(name: str) -> str:
    """``basic.get-ok`` -> ``BasicGetOk``."""
    return "".join(part.capitalize() for part in name.replace(".", "-").split("-"))


def _plan(spec: MethodSpec) -> list[tuple[str, Any]]:
    """Split the arguments into steps: ('fixed', [(fmt, argname | bit-list)]), ('shortstr',
    name), ('longstr', name), ('table', name). A bit group is one 'B' with its bit names."""
    steps: list[tuple[str, Any]] = []
    run: list[tuple[str, Any]] = []
    bits: list[str] | None = None
    for arg in spec.arguments:
        if arg.domain is Domain.BIT:
            if bits is None or len(bits) == 8:
                bits = []
                run.append(("B", bits))
            bits.append(arg.name)
            continue
        bits = None
        if arg.domain in _FIXED:
            run.append((_FIXED[arg.domain], arg.name))
            continue
        if run:
            steps.append(("fixed", run))
            run = []
        steps.append((arg.domain.value, arg.name))
    if run:
        steps.append(("fixed", run))
    return steps


def _decoder_source(spec: MethodSpec, structs: dict[str, struct.Struct]) -> str:
    lines = ["def decode(buf, o):", "    end = len(buf)"]
    for kind, item in _plan(spec):
        if kind == "fixed":
            fmt = ">" + "".join(f for f, _ in item)
            sname = f"_S{len(structs)}"
            structs[sname] = struct.Struct(fmt)
            targets = []
            for i, (_f, target) in enumerate(item):
                targets.append(f"_bits{i}" if isinstance(target, list) else target)
            size = structs[sname].size
            lines.append(f"    if o + {size} > end: raise DecodeError('arguments truncated')")
            lines.append(f"    {', '.join(targets)}, = {sname}.unpack_from(buf, o)")
            lines.append(f"    o += {size}")
            for i, (_f, target) in enumerate(item):
                if isinstance(target, list):
                    for bit, name in enumerate(target):
                        lines.append(f"    {name} = (_bits{i} & {1 << bit}) != 0")
        elif kind == "shortstr":
            lines.append("    if o >= end: raise DecodeError('arguments truncated')")
            lines.append("    n = buf[o]; o += 1")
            lines.append(f"    if o + n > end: raise DecodeError('short string {item} overruns the frame')")
            lines.append(f"    {item} = buf[o:o + n].decode('utf-8'); o += n")
        elif kind == "longstr":
            lines.append(f"    {item}, o = decode_longstr(buf, o)")
        elif kind == "table":
            lines.append(f"    {item}, o = decode_table(buf, o)")
    lines.append("    if o != end: raise DecodeError(f'{end - o} unexpected octets after the arguments')")
    lines.extend(_made_lines(spec))
    return "\n".join(lines) + "\n\n" + _maker_source(spec)


def _made_lines(spec: MethodSpec) -> list[str]:
    """The end of a decoder or maker: the instance made from the argument variables.

    Why not ``cls(...)``: a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, twice the cost of setting the slots directly, and a method is
    made per message (basic.publish decoded, basic.deliver sent). Every field is set, so
    the instance is what ``__init__`` would make."""
    lines = ["    made = new(cls)"]
    lines.extend(f"    _set_{a.name}(made, {a.name})" for a in spec.arguments)
    lines.append("    return made")
    return lines


def _maker_source(spec: MethodSpec) -> str:
    """``make(arg, ...)``: the method from positional arguments, as fast as a decode."""
    args = ", ".join(a.name for a in spec.arguments)
    return "\n".join([f"def make({args}):", *_made_lines(spec)])


def _encoder_source(spec: MethodSpec, structs: dict[str, struct.Struct]) -> str:
    """The first struct run starts with the class and method ids; a short string's length
    octet is folded into the run before it, so ``basic.deliver`` is three struct calls."""
    lines = ["def encode(self):"]
    parts: list[str] = []
    fmt = ">HH"
    values: list[str] = [str(spec.class_id), str(spec.method_id)]

    def flush() -> None:
        nonlocal fmt, values
        if values:
            sname = f"_S{len(structs)}"
            structs[sname] = struct.Struct(fmt)
            parts.append(f"{sname}.pack({', '.join(values)})")
        fmt, values = ">", []

    for kind, item in _plan(spec):
        if kind == "fixed":
            for f, target in item:
                fmt += f
                if isinstance(target, list):
                    ors = " | ".join(f"({1 << b} if self.{n} else 0)" for b, n in enumerate(target))
                    values.append(f"({ors})")
                else:
                    values.append(f"self.{target}")
        elif kind == "shortstr":
            lines.append(f"    _v_{item} = self.{item}.encode('utf-8')")
            lines.append(
                f"    if len(_v_{item}) > 255: raise ValueError('{spec.name} {item} longer than 255 octets')"
            )
            fmt += "B"
            values.append(f"len(_v_{item})")
            flush()
            parts.append(f"_v_{item}")
        elif kind == "longstr":
            flush()
            parts.append(f"encode_longstr(self.{item})")
        elif kind == "table":
            flush()
            parts.append(f"encode_table(self.{item})")
    flush()
    if len(parts) == 1:
        lines.append(f"    return {parts[0]}")
    else:
        lines.append(f"    return b''.join(({', '.join(parts)},))")
    return "\n".join(lines)


_SOURCES: dict[str, str] = {}


def _build(spec: MethodSpec) -> type[Method]:
    fields = [(a.name, Any, field(default=a.default)) for a in spec.arguments]
    cls = make_dataclass(
        _class_name(spec.name),
        fields,
        bases=(Method,),
        frozen=True,
        slots=True,
        namespace={
            "NAME": spec.name,
            "CLASS_ID": spec.class_id,
            "METHOD_ID": spec.method_id,
            "SPEC": spec,
            "CONTENT": spec.content,
            "SYNCHRONOUS": spec.synchronous,
            "__module__": __name__,
        },
    )
    structs: dict[str, struct.Struct] = {}
    source = _decoder_source(spec, structs) + "\n\n" + _encoder_source(spec, structs)
    namespace: dict[str, Any] = {
        "DecodeError": DecodeError,
        "decode_longstr": _values.decode_longstr,
        "decode_table": _values.decode_table,
        "encode_longstr": _values.encode_longstr,
        "encode_table": _values.encode_table,
        "cls": cls,
        "new": object.__new__,
        **{f"_set_{a.name}": cls.__dict__[a.name].__set__ for a in spec.arguments},
        **structs,
    }
    exec(compile(source, f"<amqp091 {spec.name}>", "exec"), namespace)  # noqa: S102 - generated from the spec table
    cls.encode = namespace["encode"]
    cls._decode = staticmethod(namespace["decode"])
    cls.make = staticmethod(namespace["make"])
    _SOURCES[spec.name] = source
    return cls


METHOD_CLASSES: dict[tuple[int, int], type[Method]] = {}
_BY_NAME: dict[str, type[Method]] = {}
for _spec in METHODS:
    _cls = _build(_spec)
    METHOD_CLASSES[(_spec.class_id, _spec.method_id)] = _cls
    _BY_NAME[_spec.name] = _cls
del _spec, _cls

_DECODERS = {key: cls._decode for key, cls in METHOD_CLASSES.items()}  # type: ignore[attr-defined]
_DECODE_PUBLISH = _BY_NAME["basic.publish"]._decode  # type: ignore[attr-defined]


def method_class(name: str) -> type[Method]:
    """The dataclass for a dotted method name such as ``"basic.publish"``."""
    return _BY_NAME[name]


def methods_source(name: str) -> str:
    """The generated encoder/decoder source of one method (for debugging and review)."""
    return _SOURCES[name]


#: decoded basic.publish methods by their payload (at most ``PUBLISHES_MAX``, forgotten
#: all at once when full): a publisher names the same exchange and routing key again and
#: again, and decoding them was a microsecond of every published message. Methods are
#: frozen, so one instance can stand for every frame with the same octets. As many keys
#: as the topic index caches: a publisher to ten thousand topics stays cached.
_PUBLISHES: dict[bytes, Method] = {}
PUBLISHES_MAX = 16_384


def decode_method(payload: bytes) -> Method:
    """Decode a whole method-frame payload. See the module docstring for what is raised."""
    cacheable = payload.__class__ is bytes
    if cacheable:
        shared = _PUBLISHES.get(payload)
        if shared is not None:
            return shared
    if len(payload) < 4:
        raise ConnectionException(ReplyCode.FRAME_ERROR, "method frame shorter than class and method ids")
    class_id, method_id = _HEAD.unpack_from(payload, 0)
    decoder = _DECODERS.get((class_id, method_id))
    if decoder is None:
        refused = REFUSED_CLASSES.get(class_id)
        if refused is not None:
            raise ConnectionException(
                ReplyCode.NOT_IMPLEMENTED,
                f"class '{refused}' ({class_id}) is not implemented",
                class_id,
                method_id,
            )
        raise ConnectionException(
            ReplyCode.COMMAND_INVALID, f"unknown method {class_id}/{method_id}", class_id, method_id
        )
    try:
        method = decoder(payload, 4)
    except (DecodeError, UnicodeDecodeError, struct.error, IndexError) as exc:
        name = METHODS_BY_ID[(class_id, method_id)].name
        reason = "a short string is not valid UTF-8" if isinstance(exc, UnicodeDecodeError) else str(exc)
        raise ConnectionException(
            ReplyCode.SYNTAX_ERROR, f"cannot decode {name}: {reason}", class_id, method_id
        ) from None
    if cacheable and decoder is _DECODE_PUBLISH:
        if len(_PUBLISHES) >= PUBLISHES_MAX:
            _PUBLISHES.clear()
        _PUBLISHES[payload] = method
    return method


# Explicit names so that imports and grep find every class (the dict above is the source).
ConnectionStart = _BY_NAME["connection.start"]
ConnectionStartOk = _BY_NAME["connection.start-ok"]
ConnectionSecure = _BY_NAME["connection.secure"]
ConnectionSecureOk = _BY_NAME["connection.secure-ok"]
ConnectionTune = _BY_NAME["connection.tune"]
ConnectionTuneOk = _BY_NAME["connection.tune-ok"]
ConnectionOpen = _BY_NAME["connection.open"]
ConnectionOpenOk = _BY_NAME["connection.open-ok"]
ConnectionClose = _BY_NAME["connection.close"]
ConnectionCloseOk = _BY_NAME["connection.close-ok"]
ConnectionBlocked = _BY_NAME["connection.blocked"]
ConnectionUnblocked = _BY_NAME["connection.unblocked"]
ConnectionUpdateSecret = _BY_NAME["connection.update-secret"]
ConnectionUpdateSecretOk = _BY_NAME["connection.update-secret-ok"]
ChannelOpen = _BY_NAME["channel.open"]
ChannelOpenOk = _BY_NAME["channel.open-ok"]
ChannelFlow = _BY_NAME["channel.flow"]
ChannelFlowOk = _BY_NAME["channel.flow-ok"]
ChannelClose = _BY_NAME["channel.close"]
ChannelCloseOk = _BY_NAME["channel.close-ok"]
AccessRequest = _BY_NAME["access.request"]
AccessRequestOk = _BY_NAME["access.request-ok"]
ExchangeDeclare = _BY_NAME["exchange.declare"]
ExchangeDeclareOk = _BY_NAME["exchange.declare-ok"]
ExchangeDelete = _BY_NAME["exchange.delete"]
ExchangeDeleteOk = _BY_NAME["exchange.delete-ok"]
ExchangeBind = _BY_NAME["exchange.bind"]
ExchangeBindOk = _BY_NAME["exchange.bind-ok"]
ExchangeUnbind = _BY_NAME["exchange.unbind"]
ExchangeUnbindOk = _BY_NAME["exchange.unbind-ok"]
QueueDeclare = _BY_NAME["queue.declare"]
QueueDeclareOk = _BY_NAME["queue.declare-ok"]
QueueBind = _BY_NAME["queue.bind"]
QueueBindOk = _BY_NAME["queue.bind-ok"]
QueuePurge = _BY_NAME["queue.purge"]
QueuePurgeOk = _BY_NAME["queue.purge-ok"]
QueueDelete = _BY_NAME["queue.delete"]
QueueDeleteOk = _BY_NAME["queue.delete-ok"]
QueueUnbind = _BY_NAME["queue.unbind"]
QueueUnbindOk = _BY_NAME["queue.unbind-ok"]
BasicQos = _BY_NAME["basic.qos"]
BasicQosOk = _BY_NAME["basic.qos-ok"]
BasicConsume = _BY_NAME["basic.consume"]
BasicConsumeOk = _BY_NAME["basic.consume-ok"]
BasicCancel = _BY_NAME["basic.cancel"]
BasicCancelOk = _BY_NAME["basic.cancel-ok"]
BasicPublish = _BY_NAME["basic.publish"]
BasicReturn = _BY_NAME["basic.return"]
BasicDeliver = _BY_NAME["basic.deliver"]
BasicGet = _BY_NAME["basic.get"]
BasicGetOk = _BY_NAME["basic.get-ok"]
BasicGetEmpty = _BY_NAME["basic.get-empty"]
BasicAck = _BY_NAME["basic.ack"]
BasicReject = _BY_NAME["basic.reject"]
BasicRecoverAsync = _BY_NAME["basic.recover-async"]
BasicRecover = _BY_NAME["basic.recover"]
BasicRecoverOk = _BY_NAME["basic.recover-ok"]
BasicNack = _BY_NAME["basic.nack"]
ConfirmSelect = _BY_NAME["confirm.select"]
ConfirmSelectOk = _BY_NAME["confirm.select-ok"]
TxSelect = _BY_NAME["tx.select"]
TxSelectOk = _BY_NAME["tx.select-ok"]
TxCommit = _BY_NAME["tx.commit"]
TxCommitOk = _BY_NAME["tx.commit-ok"]
TxRollback = _BY_NAME["tx.rollback"]
TxRollbackOk = _BY_NAME["tx.rollback-ok"]

__all__ += [cls.__name__ for cls in METHOD_CLASSES.values()]
