"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict (and Identity)."""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator

from ...tensor import Tensor
from ..parameter import Parameter
from .module import Module, _addindent


class Identity(Module):
    """Returns its input unchanged (accepts and ignores constructor arguments, like PyTorch)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input):
        return input


def _index(idx: int, n: int) -> int:
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range")
    return idx % n


class _NumberedModules(Module):
    """What Sequential and ModuleList share: children keyed "0".."n-1" (Sequential may also use names),
    list-style indexing, slicing, deletion with renumbering, append/extend/insert/pop."""

    def _from_items(self, items: list):
        raise NotImplementedError

    def _key(self, idx) -> str:
        return list(self._modules)[_index(idx, len(self))]

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self._from_items(list(self._modules.items())[idx])
        return self._modules[self._key(idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(self._key(idx), module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules) if isinstance(idx, slice) else None
        for k in keys[idx] if keys is not None else [self._key(idx)]:
            del self._modules[k]
        self._renumber(list(self._modules.values()))  # numbering stays contiguous, like PyTorch

    def _renumber(self, modules: list) -> None:
        self._modules.clear()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]):
        for m in modules:
            self.append(m)
        return self

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def _insert(self, index: int, module: Module) -> None:
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._renumber(modules)


class Sequential(_NumberedModules):
    """Runs its modules in order: Sequential(a, b, c) or Sequential(OrderedDict(name=module))."""

    def __init__(self, *args) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for k, m in args[0].items():
                self.add_module(k, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def _from_items(self, items: list) -> Sequential:
        return type(self)(OrderedDict(items))

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input

    def insert(self, index: int, module: Module) -> Sequential:
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        self._insert(index + n if index < 0 else index, module)
        return self


class ModuleList(_NumberedModules):
    """A list of modules, registered by index."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _from_items(self, items: list) -> ModuleList:
        return type(self)([m for _, m in items])

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList([*self, *other])

    def insert(self, index: int, module: Module) -> None:
        self._insert(index, module)

    def __repr__(self) -> str:
        # PyTorch compresses runs of identical children: "(0-2): 3 x Linear(...)"
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs = []
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = []
        for start, end, r in runs:
            head = f"({start}): " if start == end else f"({start}-{end}): {end - start + 1} x "
            lines.append(_addindent(head + r, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of modules, registered by key."""

    def __init__(self, modules=None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        m = self[key]
        del self[key]
        return m

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self[k] = m


_LEGACY_TYPE = {
    "float32": "Float",
    "float64": "Double",
    "float16": "Half",
    "bfloat16": "BFloat16",
    "int64": "Long",
    "int32": "Int",
    "int16": "Short",
    "int8": "Char",
    "uint8": "Byte",
    "bool": "Bool",
}


def _param_line(k, p, legacy_type: bool) -> str:
    """One line of ParameterList/ParameterDict's repr, as PyTorch prints it (the dict names the dtype the
    legacy way, e.g. engine.DoubleTensor)."""
    if not isinstance(p, Tensor):
        return f"  ({k}): Object of type: {type(p).__name__}"
    size = "x".join(str(s) for s in p.shape)
    kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
    dtype = f"engine.{_LEGACY_TYPE.get(p.dtype.name, p.dtype.name)}Tensor" if legacy_type else str(p.dtype)
    device = f" ({p.device})" if p.is_cuda else ""
    return f"  ({k}): {kind} containing: [{dtype} of size {size}{device}]"


class ParameterList(Module):
    """A list of parameters, registered by index (plain tensors are wrapped as Parameters)."""

    def __init__(self, values: Iterable | None = None) -> None:
        super().__init__()
        self.__dict__["_size"] = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList(list(self)[idx])
        return getattr(self, str(_index(idx, len(self))))

    def __setitem__(self, idx: int, param) -> None:
        idx = _index(idx, len(self))
        if isinstance(param, Tensor) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, str(idx), param)

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value) -> ParameterList:
        n = self._size
        self.__dict__["_size"] = n + 1
        self[n] = value
        return self

    def extend(self, values) -> ParameterList:
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_param_line(i, p, False) for i, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict of parameters, registered by key."""

    def __init__(self, parameters=None) -> None:
        super().__init__()
        self.__dict__["_keys"] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        self._keys[key] = None
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, key, value)

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def pop(self, key: str):
        v = self[key]
        del self[key]
        return v

    def update(self, parameters) -> None:
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for k, v in items:
            self[k] = v

    def extra_repr(self) -> str:
        return "\n".join(_param_line(k, self[k], True) for k in self._keys)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterDict should not be called.")
