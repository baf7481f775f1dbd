"""``@record``: a dataclass made on its first use, not at import.

Making a dataclass compiles its ``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` (and, frozen, its
``__setattr__`` and ``__delattr__``): about 1 ms a class, and a ``probe`` command imports some sixty of them,
most of which it never instantiates (the spec families of the commands it does not run, say). A class
decorated with :func:`record` is handed to :func:`dataclasses.dataclass` when it is first instantiated (or
unpickled), or when its fields are first asked for (``dataclasses.fields``, ``is_dataclass``, a dataclass
that inherits from it): from then on it is that dataclass, the same class object.

Not for ``slots=True`` (that makes a new class, which a name bound at import would miss), nor for a class made
by the thousand (its ``__new__`` stays a Python function, 0.1-0.2 us a call).
"""

from __future__ import annotations

from _thread import RLock
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from dataclasses import Field, field

    from typing_extensions import dataclass_transform
else:  # dataclasses (which imports inspect) is imported when a record is first used
    Field = field = None  # only type checkers read them (below)

    def dataclass_transform(**_: Any) -> Any:
        return lambda decorator: decorator

_T = TypeVar("_T", bound=type)
_OPTIONS = "__record_options__"
_LOCK = RLock()  # (reentrant: a dataclass made may ask for another record's fields)


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def record(cls: _T | None = None, /, *, frozen: bool = True, **options: Any) -> Any:
    """``@dataclasses.dataclass(frozen=frozen, **options)``, applied on the class's first use."""
    if options.get("slots"):
        raise TypeError("@record cannot make a slots dataclass; use @dataclasses.dataclass")

    def wrap(cls: _T) -> _T:
        setattr(cls, _OPTIONS, dict(options, frozen=frozen))
        cls.__new__ = staticmethod(_first_new)  # type: ignore[assignment]
        setattr(cls, "__dataclass_fields__", _Pending())
        return cls

    return wrap if cls is None else wrap(cls)


def materialize(cls: type) -> None:
    """Make ``cls`` and every pending record it inherits from their dataclasses (idempotent, thread-safe)."""
    import dataclasses

    with _LOCK:
        for klass in reversed(cls.__mro__):
            options = klass.__dict__.get(_OPTIONS)
            if options is not None:
                delattr(klass, _OPTIONS)
                delattr(klass, "__dataclass_fields__")
                # (a __new__ once set on a class cannot be deleted: Python would then call object.__new__
                # with the arguments, which it refuses)
                klass.__new__ = staticmethod(_new)  # type: ignore[assignment]
                dataclasses.dataclass(klass, **options)


def _first_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    materialize(cls)
    return cls.__new__(cls, *args, **kwargs)


def _new(cls: type, *args: Any, **kwargs: Any) -> Any:
    return object.__new__(cls)


class _Pending:
    """A pending record's ``__dataclass_fields__``: makes the dataclass and answers its fields."""

    def __get__(self, instance: Any, owner: type) -> Any:
        materialize(owner)
        return owner.__dataclass_fields__  # type: ignore[attr-defined]
