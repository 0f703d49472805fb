#!/usr/bin/env python3
"""Checks that every Python module blockfs's tests, examples, benchmarks and package import is
one scripts/deps.txt installs, or is imported under a guard.

    scripts/pyimports.py [ROOT]

It reads every .py file under python/, test/, docs/ and bench/, and the Python programs the Go
tests hold in string literals (any literal that parses as Python and imports something). A
module passes when it is the standard library's, the project's own (blockfs, or a .py file of
the tree), in deps.txt's MODULES column, or imported inside a `try:` whose handlers catch
ImportError (or ModuleNotFoundError, or Exception). Prints one line for each other import
(file:line: module, and what to do) and exits 1; prints "ok ..." and exits 0 otherwise.
"""
import ast
import os
import re
import sys

DIRS = ("python", "test", "docs", "bench")
GUARDS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def listed(root):
    """The Python modules of deps.txt's MODULES column."""
    mods = set()
    with open(os.path.join(root, "scripts", "deps.txt")) as f:
        for line in f:
            cols = line.split("#", 1)[0].split()
            if len(cols) >= 2 and cols[1] != "-":
                mods.update(cols[1].split(","))
    return mods


def catches_import_error(handler):
    t = handler.type
    if t is None:
        return True
    names = t.elts if isinstance(t, ast.Tuple) else [t]
    return any(isinstance(n, ast.Name) and n.id in GUARDS for n in names)


def imports(tree):
    """(line, top-level module, guarded) for every absolute import in tree."""
    out = []

    def walk(node, guarded):
        if isinstance(node, ast.Try):
            g = guarded or any(catches_import_error(h) for h in node.handlers)
            for n in node.body:
                walk(n, g)
            for n in node.handlers + node.orelse + node.finalbody:
                walk(n, guarded)
            return
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name.split(".")[0], guarded) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module.split(".")[0], guarded))
        for child in ast.iter_child_nodes(node):
            walk(child, guarded)

    walk(tree, False)
    return out


# A Go string literal: raw (`...`) or interpreted ("..."), the latter unquoted by Python's own
# rules, which agree with Go's for what Python programs in tests hold (\n, \t, \", \\).
GO_STRING = re.compile(r'`([^`]*)`|"((?:[^"\\\n]|\\.)*)"')


def go_programs(path):
    """(line, source) of the string literals in a Go file that parse as Python and import."""
    with open(path) as f:
        text = f.read()
    for m in GO_STRING.finditer(text):
        src = m.group(1) if m.group(1) is not None else m.group(2)
        if "import " not in src:
            continue
        if m.group(2) is not None:
            try:
                src = src.encode().decode("unicode_escape")
            except UnicodeDecodeError:
                continue
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError):
            continue
        yield text.count("\n", 0, m.start()) + 1, tree


def main(root):
    allowed = listed(root) | set(sys.stdlib_module_names) | {"blockfs"}
    sources = []  # (path, line offset, tree)
    for d in DIRS:
        for dirpath, dirnames, files in os.walk(os.path.join(root, d)):
            dirnames[:] = [n for n in dirnames if not n.startswith(".") and n not in ("build", "__pycache__")]
            for name in files:
                path = os.path.join(dirpath, name)
                if name.endswith(".py"):
                    allowed.add(name[:-3])
                    with open(path) as f:
                        sources.append((path, 0, ast.parse(f.read(), path)))
                elif name.endswith("_test.go"):
                    sources.extend((path, line - 1, tree) for line, tree in go_programs(path))
    bad = []
    n = 0
    for path, offset, tree in sources:
        for line, mod, guarded in imports(tree):
            n += 1
            if mod not in allowed and not guarded:
                rel = os.path.relpath(path, root)
                bad.append(f"{rel}:{offset + line}: imports {mod!r}, which scripts/deps.txt does not install: "
                           f"add its Debian package there, or import it under try/except ImportError and skip saying why")
    for b in bad:
        print(b)
    if bad:
        return 1
    print(f"ok: {n} imports in {len(sources)} Python sources are the standard library's, the project's, "
          f"scripts/deps.txt's or guarded")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))
