"""Sandbox runner: executed as a script inside the sandbox, never imported by the server.

Usage: python -I -S _runner.py PAYLOAD RESULT [json|marshal], PAYLOAD/RESULT a file path or `fd:N`.

The payload (source_code, function_name, args, agent_state, limits, optionally env) arrives as data, so arguments
are never spliced into code. It is JSON, or marshal when the server and runner share a machine
(marshal is built in, and importing `json` would double this script's start-up time; the payload
comes from the server, so it is trusted input). The result goes to RESULT as JSON — the server
parses it with `json`, never marshal, because the tool controls it — on a channel separate from
stdout, so whatever the tool prints cannot pose as its return value. Standard library only, each module imported
where it is first needed, for the same start-up time.
"""

import os
import sys

_MB = 1024 * 1024


def _open(spec, mode):
    text = {} if "b" in mode else {"encoding": "utf-8", "errors": "replace"}
    if spec.startswith("fd:"):
        return os.fdopen(int(spec[3:]), mode, **text)
    return open(spec, mode, **text)


# A json.dumps(ensure_ascii=False) equivalent for plain data, so the common case needs no `json` import.
_ESCAPES = {i: f"\\u{i:04x}" for i in range(32)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\", 8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"})
_FLOATS = {float("inf"): "Infinity", float("-inf"): "-Infinity"}


def _dumps(value):
    if isinstance(value, str):
        return '"' + value.translate(_ESCAPES) + '"'
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value:
            return "NaN"
        return _FLOATS.get(value) or float.__repr__(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_dumps(v) for v in value) + "]"
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return "{" + ", ".join(_dumps(k) + ": " + _dumps(v) for k, v in dict.items(value)) + "}"
    raise TypeError("not plain data")


def _to_json(value):
    try:
        return _dumps(value)
    except (TypeError, RecursionError):
        import json  # the rare cases: int keys, subclasses with custom encodings, cycles

        return json.dumps(value, ensure_ascii=False)


def _apply_limits(limits):
    """Lower this process's rlimits (soft and hard, so the tool cannot raise them back)."""
    if not limits:
        return
    import resource

    wanted = {
        "RLIMIT_CPU": (limits.get("cpu_s"), 1),
        "RLIMIT_AS": (limits.get("memory_mb"), _MB),
        "RLIMIT_FSIZE": (limits.get("file_size_mb"), _MB),
        "RLIMIT_NPROC": (limits.get("nproc"), 1),
        "RLIMIT_CORE": (0, 1),
    }
    for name, (value, unit) in wanted.items():
        if value is None or not hasattr(resource, name):
            continue
        which = getattr(resource, name)
        _soft, hard = resource.getrlimit(which)
        target = int(value) * unit
        if hard != resource.RLIM_INFINITY:
            target = min(target, hard)
        # One spare CPU second between SIGXCPU (soft) and SIGKILL (hard).
        hard_target = (
            target + 1 if name == "RLIMIT_CPU" and (hard == resource.RLIM_INFINITY or target < hard) else target
        )
        resource.setrlimit(which, (target, hard_target))


class Block:
    """A memory block of the agent snapshot: attribute or item access (`b.value`, `b["value"]`)."""

    def __init__(self, data):
        self.id = data.get("id")
        self.label = data.get("label")
        self.value = data.get("value", "")
        self.limit = data.get("limit")
        self.description = data.get("description")

    def __getitem__(self, key):
        return getattr(self, key)

    def to_dict(self):
        return {k: getattr(self, k) for k in ("id", "label", "value", "limit", "description")}


class Memory:
    """Blocks by label, with the Letta-style accessors tools commonly use."""

    def __init__(self, blocks):
        self._blocks = {}
        for data in blocks or []:
            block = Block(data)
            self._blocks[block.label] = block

    @property
    def blocks(self):
        return list(self._blocks.values())

    def list_block_labels(self):
        return list(self._blocks)

    def get_block(self, label):
        if label not in self._blocks:
            raise KeyError("no memory block labelled {!r} (have: {})".format(label, ", ".join(self._blocks) or "none"))
        return self._blocks[label]

    def update_block_value(self, label, value):
        if not isinstance(value, str):
            raise ValueError("block value must be a string")
        self.get_block(label).value = value


class AgentState:
    """A read-mostly snapshot of the calling agent: `.id`, `.name`, `.tags`, `.memory`, and `["key"]`."""

    def __init__(self, data):
        self._data = dict(data)
        self.id = data.get("id")
        self.name = data.get("name")
        self.tags = list(data.get("tags") or [])
        self.memory = Memory(data.get("blocks"))

    def __getitem__(self, key):
        if key == "blocks":
            return [b.to_dict() for b in self.memory.blocks]
        if key in ("id", "name", "tags", "memory"):
            return getattr(self, key)
        return self._data[key]

    def __getattr__(self, key):
        data = self.__dict__.get("_data", {})
        if key in data:
            return data[key]
        raise AttributeError(key)

    def to_dict(self):
        out = dict(self._data)
        out.update(id=self.id, name=self.name, tags=self.tags, blocks=[b.to_dict() for b in self.memory.blocks])
        return out


class Model(dict):
    """An argument of a model the tool's args schema defines: a dict with attribute access (`data.item.name`), as
    the pydantic models Letta's sandbox composes from args_json_schema are read."""

    __slots__ = ()

    def __getattribute__(self, key):
        if dict.__contains__(self, key):  # a field named `items` or `keys` is the field, not dict's method
            return dict.__getitem__(self, key)
        return object.__getattribute__(self, key)

    def model_dump(self):
        return _plain(self)


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in dict.items(value)}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _models(parameters):
    """One Model subclass per schema in `$defs`, under its name (so the source's annotations resolve)."""
    defs = parameters.get("$defs") or {}
    return {
        name: type(name, (Model,), {"__slots__": (), "_spec": spec})
        for name, spec in defs.items()
        if isinstance(name, str) and name.isidentifier() and isinstance(spec, dict)
    }


def _build(value, spec, models, depth=0):
    """`value` with every object the schema types as a model made that model, nested ones too."""
    if not isinstance(spec, dict) or depth > 64:
        return value
    ref = spec.get("$ref")
    if isinstance(ref, str):
        cls = models.get(ref.rsplit("/", 1)[-1])
        if cls is None or not isinstance(value, dict):
            return value
        props = cls._spec.get("properties") or {}
        built = {k: _build(v, props.get(k), models, depth + 1) for k, v in value.items()}
        for k, p in props.items():  # an absent optional field reads as its default, as on a pydantic model
            if k not in built:
                built[k] = p.get("default") if isinstance(p, dict) else None
        return cls(built)
    if isinstance(value, list) and isinstance(spec.get("items"), dict):
        return [_build(v, spec["items"], models, depth + 1) for v in value]
    for alt in spec.get("anyOf") or spec.get("oneOf") or spec.get("allOf") or ():
        built = _build(value, alt, models, depth + 1)
        if built is not value:
            return built
    return value


def _serialise(value):
    """Strings verbatim, None and booleans as Python writes them (as Letta's validate_function_response does), JSON
    for other JSON-able values, repr for the rest."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool):
        return str(value)
    try:
        return _to_json(value)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _declares(fn, param):
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    return param in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]


def _run_tool(payload):
    source = payload["source_code"]
    module = type(sys)("__tool__")
    module.__file__ = "<tool>"
    sys.modules["__tool__"] = module
    parameters = payload.get("arg_models")
    models = _models(parameters) if parameters else {}
    module.__dict__.update(models)  # before the source, as Letta puts the args schema's models before it
    exec(compile(source, "<tool>", "exec"), module.__dict__)
    fn = module.__dict__.get(payload["function_name"])
    if not callable(fn):
        raise NameError("the tool source defines no function named {!r}".format(payload["function_name"]))
    args = dict(payload.get("args") or {})
    if models:
        props = parameters.get("properties") or {}
        args = {k: _build(v, props.get(k), models) for k, v in args.items()}
    code = getattr(fn, "__code__", None)
    if code is not None and code.co_argcount and code.co_varnames[0] == "self" and "self" not in args:
        args["self"] = None  # a BaseTool's run(self, ...) posted as the tool's function
    state = None
    if _declares(fn, "agent_state"):
        state = AgentState(payload["agent_state"]) if payload.get("agent_state") is not None else None
        args["agent_state"] = state
    value = fn(**args)
    if type(value).__name__ == "coroutine":
        import asyncio

        value = asyncio.run(value)
    doc = {"status": "success", "tool_return": _serialise(value)}
    if state is not None:
        doc["agent_state"] = state.to_dict()
    return doc


def _error_doc(exc, source):
    import linecache
    import traceback

    linecache.cache["<tool>"] = (len(source), None, source.splitlines(True), "<tool>")
    tb = exc.__traceback__
    # Drop the runner's own frames so the traceback starts in the tool.
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    return {
        "status": "error",
        "error_type": type(exc).__name__,
        "error_message": str(exc),
        "traceback": text,
    }


def main(argv):
    main_pid = os.getpid()
    with _open(argv[1], "rb") as f:
        raw = f.read()
    if not raw:
        os._exit(0)  # a sandbox started ahead whose server went away (or discarded it): no run
    if len(argv) > 3 and argv[3] == "marshal":
        import marshal

        payload = marshal.loads(raw)
    else:
        import json

        payload = json.loads(raw)
    sink = _open(argv[2], "w")
    if payload.get("env") is not None:
        # The tool's environment arrives as data, so nothing it sets (LD_PRELOAD…) reaches the sandbox's launcher.
        os.environ.clear()
        os.environ.update(payload["env"])
    _apply_limits(payload.get("limits"))
    try:
        # A pipe is block-buffered: line by line, each printed line reaches a page following the run as it is printed.
        sys.stdout.reconfigure(line_buffering=True)
    except (AttributeError, ValueError):
        pass
    try:
        doc = _run_tool(payload)
    except BaseException as exc:  # noqa: BLE001 - SystemExit/KeyboardInterrupt from a tool are tool errors too
        if os.getpid() != main_pid:
            os._exit(1)  # a forked child of the tool must not report a result
        doc = None
        try:
            doc = _error_doc(exc, payload.get("source_code", ""))
        except MemoryError:
            del exc
            doc = {"status": "error", "error_type": "MemoryError", "error_message": "", "traceback": ""}
    if os.getpid() != main_pid:
        os._exit(0)
    try:
        text = _to_json(doc)
    except (TypeError, ValueError, RecursionError):  # e.g. non-JSON values put into agent_state by the tool
        doc.pop("agent_state", None)
        text = _to_json(doc)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - the tool may have closed or replaced its streams
            pass
    # JSON never holds a raw newline, so a final one tells the server the result is complete without
    # waiting for the sandbox to be torn down.
    sink.write(text + "\n")
    sink.close()
    # Don't wait for threads the tool may have left running: the call is over.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
