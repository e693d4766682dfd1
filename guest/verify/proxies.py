"""The solution's objects as the judge sees them, and the judge's rules for them.

The solution computes; the judge decides. An object of the solution's crosses as a proxy
whose *values* come from the solution's process (attributes, method results, lengths,
items, iteration, text), each a copy of a closed value or another proxy, and whose
*decisions* are the judge's alone:

- equality and hashing: the stub's own `__eq__`/`__hash__` where the stub implements them
  (run here, over the values the solution's object holds); equality of state (the
  objects' attributes, copied) where the stub declares `__eq__` and leaves it to the
  solution; identity otherwise, and always for a class the stub does not declare (a
  helper of the solution's). A proxy never equals a builtin value unless the stub's own
  `__eq__` says so;
- ordering: the stub's own operators only; otherwise the objects are unordered;
- truth: the stub's own `__bool__`/`__len__`, else `len(obj) != 0` when the object has a
  length (a number the solution computed), else true. The solution's `__bool__` never runs;
- membership (`in`): by iterating and comparing with the judge's equality;
- arithmetic and other operators: only those the stub declares for the class.

Values the tests build themselves: a class whose stub implements `__init__` and `__eq__`
(guest/verify/stubs.py) is built here when a test calls it, from the stub; where a test
calls a method the stub leaves to the solution on such a value, the solution's process
builds its own object from the same constructor arguments and calls the method there.
The expected value a test constructs never passes through the solution's code.
"""

from __future__ import annotations

import builtins
import sys
import types
from collections.abc import Callable
from typing import Any, ClassVar

from guest.verify import link
from guest.verify.link import SplitJudgeError
from guest.verify.stubs import JUDGED, NO_STUBS, ClassSpec, Stubs
from guest.verify.wire import EXCEPTION_NAMES, MAX_NAME, Encoded, ProtocolError, checked_id


def forbidden(name: str) -> bool:
    """Names never forwarded: pytest and unittest look up such names on objects."""
    return name.startswith(("_", "pytest"))


def _request(message: Encoded) -> Any:
    return link.LINK.request(message)


def _encode(value: object) -> Encoded:
    return link.LINK.encode(value)


def _ref(obj: object) -> int:
    return int(object.__getattribute__(obj, "_ref"))


def _op(obj: object, name: str, *args: object) -> Any:
    return _request(["op", _ref(obj), name, _encode(args)])


def _typed(value: object, kind: type, what: str) -> Any:
    if type(value) is not kind:
        raise TypeError(f"{what} of the solution's object is not a {kind.__name__}")
    return value


# -- the judge's rules -----------------------------------------------------------------
def judge_truth(obj: object) -> bool:
    """True unless the object has a length and it is 0 (`len` runs the stub's own
    `__len__` or asks the solution for a number)."""
    try:
        return len(obj) != 0  # type: ignore[arg-type]
    except TypeError:
        return True


def state_eq(self: object, other: object) -> object:
    """Equality of two objects of one declared class, over their copied attributes."""
    if self is other:
        return True
    if type(other) is not type(self):
        return NotImplemented
    return _request(["state", _ref(self)]) == _request(["state", _ref(other)])


def state_ne(self: object, other: object) -> object:
    equal = state_eq(self, other)
    return equal if equal is NotImplemented else not equal


def _class_hash(self: object) -> int:
    return hash((type(self).__module__, type(self).__qualname__))


def _unordered(self: object, other: object) -> object:
    return NotImplemented


# -- forwarding ------------------------------------------------------------------------
_RESULTS: dict[str, type] = {
    "__repr__": str, "__str__": str, "__format__": str, "__len__": int, "__index__": int,
    "__int__": int, "__float__": float, "__complex__": complex, "__bytes__": bytes,
}  # fmt: skip


def forwarded_dunder(name: str) -> Callable[..., object]:
    """An operator the solution's process answers with a value."""
    result = _RESULTS.get(name)

    def method(self: object, *args: object) -> object:
        value = _op(self, name, *args)
        return _typed(value, result, name) if result is not None else value

    method.__name__ = name
    return method


def _getattr(self: object, name: str) -> object:
    if forbidden(name):
        raise AttributeError(name)
    return _request(["getattr", _ref(self), name])


def _setattr(self: object, name: str, value: object) -> None:
    if forbidden(name):
        raise AttributeError(name)
    _request(["setattr", _ref(self), name, _encode(value)])


def _delattr(self: object, name: str) -> None:
    if forbidden(name):
        raise AttributeError(name)
    _request(["delattr", _ref(self), name])


def _call(self: object, *args: object, **kwargs: object) -> object:
    return _request(["call", _ref(self), _encode(args), _encode(kwargs)])


BASE: dict[str, Callable[..., object]] = {
    "__getattr__": _getattr,
    "__setattr__": _setattr,
    "__delattr__": _delattr,
    "__call__": _call,
    "__bool__": judge_truth,
    **{
        name: forwarded_dunder(name)
        for name in ("__iter__", "__len__", "__getitem__", "__setitem__", "__delitem__",
                     "__repr__", "__str__")
    },
}  # fmt: skip
"""What every object of the solution's answers, unless the stub implements it: values."""


class RemoteType(type):
    """A class of the solution's: calling it constructs in the solution's process."""

    _class_ref: int | None

    def __call__(cls, *args: object, **kwargs: object) -> object:
        return _request(["call", class_ref(cls), _encode(args), _encode(kwargs)])

    def __getattr__(cls, name: str) -> object:
        if forbidden(name):
            raise AttributeError(name)
        return _request(["getattr", class_ref(cls), name])


def class_ref(cls: type) -> int:
    """The solution's handle of the class a judge type stands for (asked of the
    solution's module when the judge has not seen it yet)."""
    ref = cls.__dict__.get("_class_ref")
    if ref is None:
        module = sys.modules.get(cls.__module__)
        if not isinstance(module, RemoteModule):
            raise SplitJudgeError("this class of the solution's cannot be reached")
        _request(["getattr", module.__dict__["_harness_ref"], cls.__qualname__])
        ref = cls.__dict__.get("_class_ref")
    if type(ref) is not int:
        raise SplitJudgeError("this class of the solution's cannot be called")
    return ref


class RemoteObject(metaclass=RemoteType):
    """An object of a class the stub does not declare: it answers with values only."""

    __slots__ = ("_ref",)
    _harness_served: ClassVar[bool] = True
    _class_ref: ClassVar[int | None] = None


for _name, _function in BASE.items():
    setattr(RemoteObject, _name, _function)


class InstanceForward:
    """A method the stub leaves to the solution, on an object of the solution's."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> object:
        if obj is None:
            return _request(["getattr", class_ref(owner), self.name])  # type: ignore[arg-type]
        return _request(["getattr", _ref(obj), self.name])


class ClassForward:
    """A static or class method the stub leaves to the solution: asked of its class."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> object:
        return _request(["getattr", class_ref(owner or type(obj)), self.name])


class ValueForward:
    """A method the stub leaves to the solution, on a value the judge built: the
    solution's process builds its own object from the same constructor arguments."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: object, owner: type | None = None) -> object:
        if obj is None:
            return _request(["getattr", class_ref(owner), self.name])  # type: ignore[arg-type]
        name = self.name

        def method(*args: object, **kwargs: object) -> object:
            return _request(["vcall", _encode(obj), name, _encode(args), _encode(kwargs)])

        return method


def _rules(spec: ClassSpec) -> dict[str, object]:
    """The judge's answers for the decisions the stub does not implement itself."""
    rules: dict[str, object] = {}
    if "__eq__" in spec.left:
        rules.update(__eq__=state_eq, __ne__=state_ne, __hash__=_class_hash)
    elif "__eq__" in spec.implemented:
        if "__ne__" in spec.left:
            rules["__ne__"] = lambda self, other: _negate(self.__eq__(other))
        if "__hash__" in spec.left:
            rules["__hash__"] = None
    for name in ("__lt__", "__le__", "__gt__", "__ge__"):
        if name in spec.left:
            rules[name] = _unordered
    if "__bool__" not in spec.implemented:
        rules["__bool__"] = judge_truth
    return rules


def _negate(result: object) -> object:
    return result if result is NotImplemented else not result


def _left_methods(spec: ClassSpec, forward: Callable[[str], object]) -> dict[str, object]:
    """The methods the stub leaves to the solution, each as `forward` makes it (an
    object of the solution's asks its own; a value the judge built, a copy the solution
    builds). Python finds an operator through the descriptor too, so one kind serves
    both methods and operators of a value; an object of the solution's answers an
    operator through `op`."""
    methods: dict[str, object] = {}
    for name in spec.left - JUDGED - {"__init__"}:
        if name in spec.on_class:
            methods[name] = ClassForward(name)
        elif forward is InstanceForward and name.startswith("__") and name.endswith("__"):
            methods[name] = forwarded_dunder(name)
        else:
            methods[name] = forward(name)
    return methods


Built = dict[int, tuple[object, tuple[object, ...], dict[str, object]]]
"""Values the judge built, by id: (the value, its constructor's arguments)."""


def value_type(spec: ClassSpec, values: Built) -> type:
    """The class a test builds a value of (the stub's, run here)."""
    stub_init = spec.stub.__dict__["__init__"]

    def __init__(self: object, *args: object, **kwargs: object) -> None:
        stub_init(self, *args, **kwargs)
        values[id(self)] = (self, args, kwargs)

    namespace: dict[str, object] = {"__module__": spec.module, "__qualname__": spec.name}
    namespace["__init__"] = __init__
    namespace.update(_left_methods(spec, ValueForward))
    namespace.update({k: v for k, v in _rules(spec).items() if k != "__bool__"})
    return type(spec.name, (spec.stub,), namespace)


def served_type(spec: ClassSpec, base: type) -> type:
    """The class of the solution's objects of a declared class, as the judge sees them."""
    namespace: dict[str, object] = {
        "__module__": spec.module,
        "__qualname__": spec.name,
        "_harness_served": True,
        "_class_ref": None,
    }
    namespace.update({k: v for k, v in BASE.items() if k not in spec.implemented})
    namespace.update(_left_methods(spec, InstanceForward))
    namespace.update(_rules(spec))
    return RemoteType(spec.name, (base,), namespace)


class RemoteIterator:
    """A generator or iterator of the solution's: it iterates, and nothing else."""

    __slots__ = ("_ref",)

    def __init__(self, ref: int) -> None:
        self._ref = ref

    def __iter__(self) -> RemoteIterator:
        return self

    def __next__(self) -> object:
        return _op(self, "__next__")

    def __repr__(self) -> str:
        return "<iterator of the solution>"


class RemoteCallable:
    """A function or bound method of the solution's: it can be called, and nothing else."""

    __slots__ = ("_ref",)

    def __init__(self, ref: int) -> None:
        self._ref = ref

    def __call__(self, *args: object, **kwargs: object) -> object:
        return _call(self, *args, **kwargs)

    def __repr__(self) -> str:
        return "<function of the solution>"


class RemoteModule(types.ModuleType):
    """A module of the agent's workspace, as the judge sees it. A value class of the stub
    is the judge's own; anything else is asked of the solution. Setting a public name (a
    test's `mock.patch("module.open", ...)`) sets it in the solution's module."""

    def __getattr__(self, name: str) -> object:
        ref = self.__dict__.get("_harness_ref")
        if forbidden(name) or ref is None:
            raise AttributeError(name)
        handles = link.LINK.handles
        if isinstance(handles, SolutionHandles):
            value = handles.value_class(self.__name__, name)
            if value is not None:
                return value
        return _request(["getattr", ref, name])

    def __setattr__(self, name: str, value: object) -> None:
        if name.startswith("_") or "_harness_ref" not in self.__dict__:
            super().__setattr__(name, value)
            return
        _request(["setattr", self.__dict__["_harness_ref"], name, _encode(value)])

    def __delattr__(self, name: str) -> None:
        if name.startswith("_") or "_harness_ref" not in self.__dict__:
            super().__delattr__(name)
            return
        _request(["delattr", self.__dict__["_harness_ref"], name])


def _exception_base(name: object) -> type[Exception]:
    if type(name) is not str or name not in EXCEPTION_NAMES:
        raise ProtocolError("malformed value")
    base: type[Exception] = getattr(builtins, name)
    return base


class SolutionHandles:
    """What the solution's handles are in the judge, under the rules the stub sets."""

    def __init__(self, stubs: Stubs = NO_STUBS) -> None:
        self.stubs = stubs
        self.imported: set[str] = set()
        self.proxies: dict[int, object] = {}
        self.helper_types: dict[tuple[str, str], type] = {}
        self.served_types: dict[tuple[str, str], type] = {}
        self.value_types: dict[tuple[str, str], type] = {}
        self.exception_refs: dict[type, int] = {}
        self.values: Built = {}

    # -- types -------------------------------------------------------------------------
    def _spec(self, module: str, name: str) -> ClassSpec | None:
        return self.stubs.spec(module, name) if module in self.imported else None

    def value_class(self, module: str, name: str) -> type | None:
        spec = self._spec(module, name)
        if spec is None or not spec.is_value:
            return None
        key = (module, name)
        if key not in self.value_types:
            self.value_types[key] = value_type(spec, self.values)
        return self.value_types[key]

    def declared_type(self, module: str, name: str) -> type | None:
        spec = self._spec(module, name)
        if spec is None:
            return None
        key = (module, name)
        if key not in self.served_types:
            base = self.value_class(module, name) or spec.stub
            self.served_types[key] = served_type(spec, base)
        return self.served_types[key]

    def helper_type(self, module: str, name: str) -> type:
        key = (module, name)
        if key not in self.helper_types:
            namespace = {"__module__": module, "__qualname__": name, "__slots__": ()}
            self.helper_types[key] = RemoteType(
                name.rpartition(".")[2] or "Object", (RemoteObject,), namespace
            )
        return self.helper_types[key]

    # -- handles in ----------------------------------------------------------------------
    def proxy(self, data: Encoded) -> object:
        ref = checked_id(data[1])
        kind, module, name = data[2], data[3], data[4]
        if not all(type(part) is str and len(part) <= MAX_NAME for part in (kind, module, name)):
            raise ProtocolError("malformed value")
        known = self.proxies.get(ref)
        if known is not None:
            return known
        proxy = self._new_proxy(ref, kind, module, name, data[5] if len(data) == 6 else None)
        self.proxies[ref] = proxy
        return proxy

    def _new_proxy(self, ref: int, kind: str, module: str, name: str, base: object) -> object:
        if kind == "callable":
            return RemoteCallable(ref)
        if kind == "iterator":
            return RemoteIterator(ref)
        if kind == "module":
            proxy = RemoteModule(module)
            proxy.__dict__["_harness_ref"] = ref
            if name == "package":
                proxy.__path__ = []
            return proxy
        if kind == "class":
            cls = self.declared_type(module, name) or self.helper_type(module, name)
            if cls.__dict__.get("_class_ref") is None:
                type.__setattr__(cls, "_class_ref", ref)
            return cls
        if kind == "exception_class":
            parent = _exception_base(base)
            exc_cls = type(name.rpartition(".")[2] or "Error", (parent,), {"__module__": module})
            self.exception_refs[exc_cls] = ref
            return exc_cls
        if kind == "instance":
            cls = self.declared_type(module, name) or self.helper_type(module, name)
            instance: object = object.__new__(cls)
            object.__setattr__(instance, "_ref", ref)
            return instance
        raise ProtocolError("malformed value")

    # -- judge values out ------------------------------------------------------------------
    def reference(self, value: object) -> Encoded | None:
        if isinstance(value, RemoteIterator | RemoteCallable):
            return ["h", value._ref]
        if getattr(type(value), "_harness_served", False) and not isinstance(value, type):
            return ["h", _ref(value)]
        if isinstance(value, RemoteModule) and "_harness_ref" in value.__dict__:
            return ["h", value.__dict__["_harness_ref"]]
        if isinstance(value, RemoteType):
            return ["h", class_ref(value)]
        if isinstance(value, type) and value in self.exception_refs:
            return ["h", self.exception_refs[value]]
        built = self.values.get(id(value))
        if built is not None and built[0] is value:
            cls = type(value)
            return ["V", cls.__module__, cls.__qualname__, _encode(built[1]), _encode(built[2])]
        return None
