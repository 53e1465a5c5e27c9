#!/usr/bin/env python3
"""Rewrite imports and module references after modules moved (issue 36: a room for every module).

    python scripts/apply_module_moves.py [--moves scripts/module_moves.txt] FILE...

The moves file has one move a line, ``old new``: a module (``memtop.bridge memtop.stream.bridge``)
or a name that moved between modules (``memtop.cli:run_export memtop.commands.export:run_export``);
``#`` starts a comment. Each FILE is rewritten in place:

* ``from OLD import a, b`` and ``from memtop import old_module, other``, split into one statement
  per module the names now live in (a trailing comment, e.g. ``# noqa: E402``, goes on each);
* dotted references anywhere, code or text: ``import memtop.old``, ``memtop.old.attr``,
  ``"memtop.old.name"`` in a monkeypatch, ``memtop.cli:entry`` in pyproject.toml;
* paths in prose: ``memtop/old.py`` becomes ``memtop/new/path.py``.

It is meant for code written against the old layout, and rewriting is idempotent: a reference
that already names a new module is left alone (``memtop.headless.doctor`` stays, though
``memtop.headless`` was a module that became a package). What cannot be rewritten safely is
reported on stderr: a module whose names moved, imported as a module (``from memtop import cli``:
its attribute uses, ``cli.run_export``, are not followed). Run ``ruff check --fix --select I``
and ``ruff format`` afterwards: the split statements are not sorted. ``--check`` changes nothing
and exits 1 when a file would change (tests/unit/test_module_moves.py runs it over the tree).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_MOVES = Path(__file__).resolve().parent / "module_moves.txt"
PACKAGE = Path(__file__).resolve().parent.parent / "memtop"


def package_modules(root: Path) -> set[str]:
    """The dotted names of the modules and packages under ``root`` (a package directory)."""
    out = set()
    for p in root.rglob("*.py"):
        if "__pycache__" in p.parts:
            continue
        parts = p.relative_to(root.parent).with_suffix("").parts
        out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


_FROM = re.compile(
    # at a line's start, or inside a one-line program in a string (``"import os; from memtop ..."``)
    r"(?:^|(?<=[;\"']))(?P<indent>[ \t]*)from[ \t]+(?P<mod>[\w.]+)[ \t]+import[ \t]+"
    r"(?:\((?P<paren>[^)]*)\)(?P<ptail>[^\n]*)|(?P<plain>[^\n(;\"']*))",
    re.MULTILINE,
)
_DOTTED = re.compile(r"(?<![\w.])(?P<chain>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?::(?P<attr>[A-Za-z_]\w*))?")
_PATH = re.compile(r"(?<![\w/.])(?P<path>[A-Za-z_]\w*(?:/[A-Za-z_]\w*)+)\.py\b")


@dataclass
class Moves:
    modules: dict[str, str] = field(default_factory=dict)
    #: (module, name) -> (module, name), keyed by the module's name after its own move
    names: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    #: the package's modules as they are now, none of them an old name: a module added after the
    #: moves under a moved module's name (``memtop.headless.start``, where ``memtop.headless``
    #: was a module) is the new layout already
    existing: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, path: Path) -> Moves:
        moves = cls()
        for n, line in enumerate(path.read_text().splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or (":" in parts[0]) != (":" in parts[1]):
                raise SystemExit(f"{path}:{n}: expected 'old new' (both modules or both module:name)")
            old, new = parts
            if ":" in old:
                om, on = old.split(":", 1)
                nm, nn = new.split(":", 1)
                moves.names[(om, on)] = (nm, nn)
            else:
                moves.modules[old] = new
        # a name move written with the module's old name also applies under its new name
        for (om, on), target in list(moves.names.items()):
            moves.names.setdefault((moves.module(om), on), target)
        moves.existing = {m for m in package_modules(PACKAGE) if m not in moves.modules}
        return moves

    @property
    def roots(self) -> set[str]:
        return {m.split(".", 1)[0] for m in (*self.modules, *self.modules.values())}

    def module(self, name: str) -> str:
        """The module's new name (a moved package carries its submodules along)."""
        best = max((o for o in self.modules if name == o or name.startswith(o + ".")), key=len, default="")
        # already the new layout: a new module's name at least as long as the old one's
        now = max(
            (n for n in self.new_modules() if name == n or name.startswith(n + ".")), key=len, default=""
        )
        if not best or len(now) >= len(best):
            return name
        return self.modules[best] + name[len(best) :]

    def new_modules(self) -> set[str]:
        return set(self.modules.values()) | {m for m, _ in self.names.values()} | self.existing

    def name(self, module: str, name: str) -> tuple[str, str]:
        """Where ``module.name`` lives now (following chains of moves)."""
        module = self.module(module)
        seen: set[tuple[str, str]] = set()
        while (module, name) in self.names and (module, name) not in seen:
            seen.add((module, name))
            module, name = self.names[(module, name)]
            module = self.module(module)
        return module, name

    def has_name_moves(self, module: str) -> bool:
        return any(m == module for m, _ in self.names)


def _split_names(text: str) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for part in text.replace("\\\n", " ").split(","):
        words = part.split()
        if not words:
            continue
        if len(words) == 3 and words[1] == "as":
            out.append((words[0], words[2]))
        else:
            out.append((words[0], None))
    return out


def _render(indent: str, module: str, names: list[tuple[str, str | None]], comment: str) -> str:
    listed = ", ".join(n if a is None or a == n else f"{n} as {a}" for n, a in names)
    return f"{indent}from {module} import {listed}{comment}"


def _rewrite_from(m: re.Match[str], moves: Moves, warnings: list[str], where: str) -> str:
    mod = m.group("mod")
    if mod.split(".", 1)[0] not in moves.roots:
        return m.group(0)
    if m.group("paren") is not None:
        body, tail = m.group("paren"), m.group("ptail")
        # comments inside parentheses are kept on the first statement
        inner = [c.strip() for c in re.findall(r"#[^\n]*", body)]
        body = re.sub(r"#[^\n]*", "", body)
    else:
        body, tail, inner = m.group("plain"), "", []
    comment = ""
    if "#" in body:
        body, comment = body.split("#", 1)
        comment = "#" + comment
    elif "#" in tail:
        comment = tail[tail.index("#") :]
    names = _split_names(body)
    if not names or any(n == "*" for n, _ in names):
        return m.group(0)
    groups: dict[str, list[tuple[str, str | None]]] = {}
    for name, alias in names:
        sub = f"{mod}.{name}"
        if moves.has_name_moves(sub):
            warnings.append(f"{where}: {sub} imported as a module; its moved names are not followed")
        if sub in moves.new_modules():
            groups.setdefault(mod, []).append((name, alias))
            continue
        if sub in moves.modules:  # a module imported from its package
            new = moves.module(sub)
            parent, leaf = new.rsplit(".", 1)
            if moves.has_name_moves(new):
                warnings.append(f"{where}: {sub} imported as a module; its moved names are not followed")
            groups.setdefault(parent, []).append((leaf, alias or (name if leaf != name else None)))
            continue
        new_mod, new_name = moves.name(mod, name)
        groups.setdefault(new_mod, []).append((new_name, alias or (name if new_name != name else None)))
    if list(groups) == [mod] and groups[mod] == names:
        return m.group(0)
    sep = "  " if comment else ""
    first_comment = comment
    if inner:
        first_comment = (
            "  # " + " ".join(c.lstrip("#").strip() for c in inner) + (" " + comment if comment else "")
        )
    lines = []
    for i, (target, listed) in enumerate(groups.items()):
        c = (first_comment if i == 0 else (sep + comment.strip() if comment else "")) or ""
        if c and not c.startswith(" "):
            c = "  " + c
        lines.append(_render(m.group("indent"), target, listed, c))
    # a statement inside a one-line program stays on its line
    at_line_start = m.start() == 0 or m.string[m.start() - 1] == "\n"
    return ("\n" if at_line_start else "; ").join(lines)


def _rewrite_dotted(m: re.Match[str], moves: Moves) -> str:
    chain, attr = m.group("chain"), m.group("attr")
    if chain.split(".", 1)[0] not in moves.roots:
        return m.group(0)
    parts = chain.split(".")
    # the longest prefix that is a module (old or new); what follows it is attributes
    for k in range(len(parts), 1, -1):
        prefix = ".".join(parts[:k])
        # a new module's name is final (its names may still have moved on)
        if prefix in moves.modules or prefix in moves.new_modules() or moves.has_name_moves(prefix):
            rest = parts[k:]
            module = moves.module(prefix)
            if rest:
                module, first = moves.name(prefix, rest[0])
                new = ".".join([module, first, *rest[1:]])
                return new + (f":{attr}" if attr else "")
            if attr:
                module, attr = moves.name(prefix, attr)
                return f"{module}:{attr}"
            return module
    return m.group(0)


def _rewrite_path(m: re.Match[str], moves: Moves) -> str:
    path = m.group("path")
    dotted = path.replace("/", ".")
    if dotted.split(".", 1)[0] not in moves.roots or dotted in moves.new_modules():
        return m.group(0)
    new = moves.module(dotted)
    return m.group(0) if new == dotted else new.replace(".", "/") + ".py"


def rewrite(text: str, moves: Moves, where: str = "") -> tuple[str, list[str]]:
    warnings: list[str] = []
    text = _FROM.sub(lambda m: _rewrite_from(m, moves, warnings, where), text)
    out: list[str] = []
    # dotted references outside the from-import statements just rewritten (theirs are final)
    last = 0
    for fm in _FROM.finditer(text):
        out.append(_DOTTED.sub(lambda d: _rewrite_dotted(d, moves), text[last : fm.start()]))
        out.append(fm.group(0))
        last = fm.end()
    out.append(_DOTTED.sub(lambda d: _rewrite_dotted(d, moves), text[last:]))
    text = "".join(out)
    text = _PATH.sub(lambda p: _rewrite_path(p, moves), text)
    return text, warnings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    ap.add_argument("--moves", type=Path, default=DEFAULT_MOVES, help="the moves file (%(default)s)")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args(argv)
    moves = Moves.load(args.moves)
    changed = 0
    for path in args.files:
        try:
            old = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"{path}: skipped ({exc})", file=sys.stderr)
            continue
        new, warnings = rewrite(old, moves, str(path))
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
        if new != old:
            changed += 1
            if args.check:
                print(f"would rewrite {path}")
            else:
                path.write_text(new, encoding="utf-8")
                print(f"rewrote {path}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
