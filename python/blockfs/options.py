"""A mount's options, checked against the schema the blockfs binary publishes.

``blockfs options --json`` prints every option of a mount, declared once in the binary (its
name, type, default, scope and help). blockfs.Mount checks its keywords against it when it is
called, so a misspelled option or a value of the wrong kind fails at once, naming the option,
instead of when the binary runs:

    >>> blockfs.Mount("/data/train", cache_sise="4GiB")
    TypeError: blockfs.Mount() got an unexpected keyword argument 'cache_sise' (did you mean
    cache_size?); its options are allow_other, block_size, cache_size, ...

The schema is read once per binary (its path and modification time). A binary older than the
``options`` command publishes none: its options are then passed on unchecked, as before.
"""
from __future__ import annotations

import difflib
import json
import numbers
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any, Collection, Dict, List, Mapping, Optional, Tuple

# The types an option's values may have ("type" in the schema). An option of a type this
# package does not know (a newer binary's) takes any value, which the binary then checks.
TYPES = ("bool", "int", "uint", "size", "string", "path", "duration", "shape", "enum")

# Where an option may be given ("scope"): the whole mount's, a dataset's (a mixture source's
# "options" take only these), or how the command runs (in the background, where it logs).
SCOPES = ("mount", "source", "process")

# The default of an option that the binary chooses itself; such an option also takes "auto".
AUTO = "auto"

# How long `blockfs options --json` may take.
SCHEMA_TIMEOUT = 60.0

_SIZE = re.compile(r"\s*[0-9][0-9.]*\s*[A-Za-z]*\s*")
_DURATION = re.compile(r"([0-9]*(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+|0")
_SHAPE = re.compile(r"\s*[0-9]+(\s*,\s*[0-9]+)*\s*")


@dataclass(frozen=True)
class Option:
    """One option of a mount, as the binary's schema declares it.

    Attributes
    ----------
    name : str
        Its name on the command line, without the dashes ("cache-size").
    key : str
        Its name as a keyword and in JSON ("cache_size").
    type : str
        The kind of value it takes, one of TYPES (or a newer binary's).
    default : str
        Its default as text ("auto", "0", "" for none).
    scope : str
        "mount", "source" or "process" (see SCOPES).
    help : str
        One line saying what it does.
    choices : tuple of str
        An enum's values.
    hidden : bool
        Whether it is a developer's option, left out of the names listed to users.
    """

    name: str
    key: str
    type: str
    default: str = ""
    scope: str = "mount"
    help: str = ""
    choices: Tuple[str, ...] = ()
    hidden: bool = False

    def value(self, v: Any) -> Any:
        """v checked against the option's type and turned into what its flag takes: a path's
        str, a shape's "3,32,32", a duration's "30s", "false" for a bool whose default is true.
        Raises TypeError for a value of the wrong kind and ValueError for one out of range,
        each naming the option as its keyword ("cache_size=")."""
        check = _CHECKS.get(self.type)
        if v is None or check is None:
            return v
        if isinstance(v, str) and v == AUTO and self.default == AUTO:
            return v
        return check(self, v)

    def wrong(self, v: Any, want: str) -> TypeError:
        """The TypeError of a value v that is not of the kind want."""
        return TypeError(f"{self.key}= takes {want}, not {type(v).__name__} {v!r}{self._auto()}")

    def bad(self, v: Any, why: str) -> ValueError:
        """The ValueError of a value v of the right kind that the option does not take."""
        return ValueError(f"{self.key}={v!r}: {why}")

    def _auto(self) -> str:
        return ' (or "auto")' if self.default == AUTO else ""


def _integral(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _bool(opt: Option, v: Any) -> Any:
    if not isinstance(v, bool):
        raise opt.wrong(v, "True or False")
    return "false" if not v and opt.default == "true" else v


def _int(opt: Option, v: Any) -> Any:
    if not _integral(v):
        raise opt.wrong(v, "an int")
    if opt.type == "uint" and v < 0:
        raise opt.bad(v, "must not be negative")
    return int(v)


def _size(opt: Option, v: Any) -> Any:
    if _integral(v):
        if v < 0:
            raise opt.bad(v, "must not be negative")
        return int(v)
    if not isinstance(v, str):
        raise opt.wrong(v, 'bytes, an int or a str with units such as "64MiB"')
    if not _SIZE.fullmatch(v):
        raise opt.bad(v, f"is not a size (give bytes, or units such as 64KiB, 16MiB, 1GiB){opt._auto()}")
    return v


def _string(opt: Option, v: Any) -> Any:
    if not isinstance(v, str):
        raise opt.wrong(v, "a str")
    return v


def _path(opt: Option, v: Any) -> Any:
    p = os.fspath(v) if isinstance(v, (str, os.PathLike)) else None
    if not isinstance(p, str):
        raise opt.wrong(v, "a path (str or os.PathLike)")
    return p


def _duration(opt: Option, v: Any) -> Any:
    want = 'a duration, seconds or a str such as "30s", "1m30s", "500ms"'
    if isinstance(v, bool):
        raise opt.wrong(v, want)
    if isinstance(v, numbers.Real):
        if v < 0:
            raise opt.bad(v, "must not be negative")
        return (f"{float(v):.9f}".rstrip("0").rstrip(".") or "0") + "s"
    if not isinstance(v, str):
        raise opt.wrong(v, want)
    if not _DURATION.fullmatch(v):
        raise opt.bad(v, "is not a duration (give seconds, or units such as 500ms, 30s, 2m)")
    return v


def _shape(opt: Option, v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        if not all(_integral(d) for d in v):
            raise opt.wrong(v, "a shape, a list or tuple of ints")
        if not v or any(d < 1 for d in v):
            raise opt.bad(v, "dimensions must be at least 1")
        return ",".join(str(int(d)) for d in v)
    if not isinstance(v, str):
        raise opt.wrong(v, 'a shape, a list or tuple of ints or a str such as "3,32,32"')
    if not _SHAPE.fullmatch(v):
        raise opt.bad(v, 'is not a shape (give dimensions such as (3, 32, 32) or "3,32,32")')
    return v


def _enum(opt: Option, v: Any) -> Any:
    if not isinstance(v, str):
        raise opt.wrong(v, f"a str, one of {', '.join(opt.choices)}")
    if opt.choices and v not in opt.choices:
        raise opt.bad(v, f"is not one of {', '.join(opt.choices)}")
    return v


_CHECKS = {"bool": _bool, "int": _int, "uint": _int, "size": _size, "string": _string, "path": _path,
           "duration": _duration, "shape": _shape, "enum": _enum}


class Schema:
    """Every option of a mount, by keyword, as a binary publishes them."""

    def __init__(self, options: Collection[Option]) -> None:
        self.options: Dict[str, Option] = {o.key: o for o in options}

    @classmethod
    def from_json(cls, doc: Any) -> Schema:
        """The schema of `blockfs options --json`'s output, parsed: {"options": [{...}, ...]}.
        Raises ValueError for a document that is not one."""
        entries = doc.get("options") if isinstance(doc, dict) else None
        if not isinstance(entries, list):
            raise ValueError("the options schema has no list of \"options\"")
        return cls([_option(e) for e in entries])

    def names(self, scopes: Optional[Collection[str]] = None) -> List[str]:
        """The keywords of the options users give (not hidden ones), sorted; only those of
        scopes when given."""
        return sorted(k for k, o in self.options.items() if not o.hidden and (scopes is None or o.scope in scopes))

    def check(self, options: Mapping[str, Any], caller: str = "blockfs.Mount()",
              scopes: Optional[Collection[str]] = None, reserved: Collection[str] = ()) -> Dict[str, Any]:
        """options checked, with their values turned into what their flags take (Option.value).

        Raises TypeError for a keyword that is not an option (of scopes, when given; naming the
        closest option and listing them all), for one in reserved (caller sets it itself), or
        for a value of the wrong kind; ValueError for a value the option does not take."""
        out: Dict[str, Any] = {}
        for key, v in options.items():
            opt = self.options.get(key)
            if key in reserved:
                raise TypeError(f"{caller} sets {key}= itself: leave it out")
            if opt is None or (scopes is not None and opt.scope not in scopes):
                raise TypeError(self._unknown(key, caller, scopes, reserved))
            out[key] = opt.value(v)
        return out

    def _unknown(self, key: str, caller: str, scopes: Optional[Collection[str]], reserved: Collection[str]) -> str:
        names = [n for n in self.names(scopes) if n not in reserved]
        msg = f"{caller} got an unexpected keyword argument {key!r}"
        known = self.options.get(key)
        if known is not None and scopes is not None:
            msg += f" (it is a {known.scope} option, not one of {' or '.join(sorted(scopes))})"
        else:
            close = difflib.get_close_matches(key.replace("-", "_").lower(), names, n=1)
            if close:
                msg += f" (did you mean {close[0]}?)"
        return msg + f"; its options are {', '.join(names)}"


def _option(e: Any) -> Option:
    """An Option of an entry of the schema's "options"."""
    if not isinstance(e, dict) or not isinstance(e.get("name"), str) or not e["name"]:
        raise ValueError(f"the options schema: {e!r} is not an option with a name")
    name: str = e["name"]
    key = e.get("key") or name.replace("-", "_")
    choices = e.get("choices") or []
    fields = {"key": key, "type": e.get("type"), "default": e.get("default", ""), "scope": e.get("scope", "mount"),
              "help": e.get("help", "")}
    bad = sorted(k for k, v in fields.items() if not isinstance(v, str))
    if bad or not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise ValueError(f"the options schema: option {name!r} has a bad {', '.join(bad) or 'choices'}")
    return Option(name, key, e["type"], fields["default"], fields["scope"], fields["help"], tuple(choices),
                  bool(e.get("hidden", False)))


# Schemas read, by binary: (path, mtime_ns, size) -> its schema, or None for a binary that
# publishes none.
_schemas: Dict[Tuple[str, int, int], Optional[Schema]] = {}


def schema_of(binary: str) -> Optional[Schema]:
    """The options schema that binary publishes (`binary options --json`), read once per binary
    path and modification time; None for a binary that has no `options` command (older than
    it). Raises ValueError when its output is not a schema."""
    st = os.stat(binary)
    k = (os.path.abspath(binary), st.st_mtime_ns, st.st_size)
    if k not in _schemas:
        p = subprocess.run([binary, "options", "--json"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=SCHEMA_TIMEOUT)
        if p.returncode != 0:
            _schemas[k] = None
        else:
            try:
                _schemas[k] = Schema.from_json(json.loads(p.stdout))
            except ValueError as e:
                raise ValueError(f"{binary} options --json: {e}") from None
    return _schemas[k]


def flag(key: str) -> str:
    """The command-line flag of option key: cache_size is --cache-size."""
    return "--" + key.replace("_", "-")


def flags(options: Mapping[str, Any]) -> List[str]:
    """Command-line flags from keyword options (checked ones, see Schema.check), sorted by key:
    cache_size="1GiB" is --cache-size=1GiB, True a bare flag, False and None leave the flag
    out."""
    out = []
    for k in sorted(options):
        v = options[k]
        if v is None or v is False:
            continue
        out.append(flag(k) if v is True else f"{flag(k)}={v}")
    return out


__all__ = ["Option", "Schema", "TYPES", "SCOPES", "schema_of", "flag", "flags"]
