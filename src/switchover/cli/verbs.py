"""Verbs loaded on demand: the root command knows each verb's name and module, and imports a module only when its
verb runs or shows its help, so `switchover --version` or `switchover plan ...` never imports bench, gateway or
alerts machinery (pandas, scipy, aiohttp...)."""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import importlib.util
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import typer
import typer.core
import typer.main

# keyword arguments of a `.command(...)` / `.callback(...)` / `typer.Typer(...)` call that change what the root help
# lists beyond the docstring; a verb using one is read by importing it (correct, only slower)
_LISTING_KEYWORDS = frozenset({"help", "short_help", "hidden", "deprecated", "rich_help_panel", "epilog", "cls"})


@dataclass(frozen=True)
class Verb:
    """One top-level word: `module.register(root)` adds it (`group=False`), or `module.app` is its sub-group."""

    name: str
    module: str
    group: bool = False


def build(verb: Verb, settings: dict[str, Any]) -> dict[str, Any]:
    """The click commands a verb's module adds to a root app made with `settings`, by name (one module may add
    several, e.g. `diff-model` and `cachekey`)."""
    module = importlib.import_module(verb.module)
    holder = typer.Typer(**settings)
    if verb.group:
        holder.add_typer(module.app, name=verb.name)
    else:
        module.register(holder)
    commands = dict(typer.main.get_group(holder).commands)
    for command in commands.values():
        name_metavars(command, help_names(settings))
    return commands


def help_names(settings: dict[str, Any]) -> list[str]:
    """The names of the help option in `settings` (`-h`, `--help`)."""
    return list(settings.get("context_settings", {}).get("help_option_names", ["--help"]))


class VerbCommands(MutableMapping[str, Any]):
    """The root's commands by name: every name known up front, each command built the first time it is read."""

    def __init__(self, built: MutableMapping[str, Any], verbs: dict[str, Verb], load: Callable[[Verb], dict[str, Any]]):
        self._built = dict(built)
        self._verbs = verbs
        self._load = load

    def loaded(self, name: str) -> bool:
        """Whether `name` is built already (reading it would not import anything)."""
        return name in self._built

    def __getitem__(self, name: str) -> Any:
        if name not in self._built and name in self._verbs:
            for added, command in self._load(self._verbs[name]).items():
                self._built.setdefault(added, command)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        self._built.pop(name)
        self._verbs.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        # the names fixed before the first is read: reading one may build others of its module
        return iter([*self._verbs, *(name for name in self._built if name not in self._verbs)])

    def __len__(self) -> int:
        return len(set(self._built) | set(self._verbs))

    def __contains__(self, name: object) -> bool:
        return name in self._built or name in self._verbs


class VerbGroup(typer.core.TyperGroup):
    """The root group: commands come from `verbs` on demand; the root help lists them from their modules' source
    (docstrings read, not run) so that `switchover --help` imports no verb."""

    verbs: ClassVar[tuple[Verb, ...]] = ()
    settings: ClassVar[dict[str, Any]] = {}

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        name_metavars(self, help_names(self.settings))  # the root's own options; each verb's when built
        table = {v.name: v for v in self.verbs}
        self.commands = VerbCommands(self.commands, table, functools.partial(build, settings=self.settings))
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        commands = self.commands
        if self._listing and isinstance(commands, VerbCommands) and not commands.loaded(cmd_name):
            table = {v.name: v for v in self.verbs}
            if cmd_name in table:
                text = summary(table[cmd_name])
                if text is not None:
                    return typer.core.TyperCommand(name=cmd_name, help=text)
        return commands.get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


@functools.cache
def _tree(module: str) -> ast.Module | None:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    with open(spec.origin, encoding="utf-8") as f:
        return ast.parse(f.read(), spec.origin)


def _name_of(call: ast.Call, attr: str) -> tuple[bool, str | None]:
    """Whether `call` is `<x>.<attr>(...)` with no listing keyword, and the name given (first argument or name=)."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == attr):
        return False, None
    if any(k.arg in _LISTING_KEYWORDS or k.arg is None for k in call.keywords):
        return False, None
    named = [k.value for k in call.keywords if k.arg == "name"]
    first = call.args[0] if call.args else (named[0] if named else None)
    if first is None:
        return True, None
    return (True, first.value) if isinstance(first, ast.Constant) and isinstance(first.value, str) else (False, None)


def _statements(tree: ast.Module) -> list[ast.stmt]:
    """The module's statements and those one function deep (`register(app)` defines its commands inside)."""
    out: list[ast.stmt] = []
    for node in tree.body:
        out.append(node)
        if isinstance(node, ast.FunctionDef):
            out.extend(node.body)
    return out


def _command_doc(tree: ast.Module, name: str) -> str | None:
    """The docstring of the function a module registers as command `name` (decorated, or `x.command(name)(fn)`)."""
    statements = _statements(tree)
    functions = {n.name: n for n in statements if isinstance(n, ast.FunctionDef)}
    for fn in functions.values():
        for deco in fn.decorator_list:
            if isinstance(deco, ast.Call):
                ok, given = _name_of(deco, "command")
                if ok and (given or fn.name.lower().replace("_", "-")) == name:  # typer's default name
                    return ast.get_docstring(fn)
    for node in statements:
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Call) and len(call.args) == 1:
            ok, given = _name_of(call.func, "command")
            target = call.args[0]
            if ok and given == name and isinstance(target, ast.Name) and target.id in functions:
                return ast.get_docstring(functions[target.id])
    return None


def _group_doc(tree: ast.Module) -> str | None:
    """A sub-group's help: `app = typer.Typer(help="...")`, else the docstring of its `@app.callback()`."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["app"]
            and isinstance(node.value, ast.Call)
        ):
            for k in node.value.keywords:
                if k.arg == "help":
                    return (
                        k.value.value if isinstance(k.value, ast.Constant) and isinstance(k.value.value, str) else None
                    )
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and _name_of(deco, "callback") == (True, None) and not deco.args:
                    return ast.get_docstring(node)
    return None


def summary(verb: Verb) -> str | None:
    """The help text the root listing shows for `verb`, read from its module's source without importing it; None
    when the source does not say it plainly (the caller then builds the real command)."""
    tree = _tree(verb.module)
    if tree is None:
        return None
    return _group_doc(tree) if verb.group else _command_doc(tree, verb.name)


def literal(module: str, name: str) -> Any:
    """The value of `module`'s top-level `NAME = <literal>` (a tuple of names, say), read from its source without
    importing it or its parent packages, for help texts that list what a heavy module knows (imported after all
    when the source cannot say)."""
    top, _, rest = module.partition(".")
    package = importlib.import_module(top)
    for root in getattr(package, "__path__", []):
        path = Path(root, *rest.split(".")).with_suffix(".py")
        if not path.is_file():
            continue
        for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            if value is not None and [t.id for t in targets if isinstance(t, ast.Name)] == [name]:
                with contextlib.suppress(ValueError):
                    return ast.literal_eval(value)
    return getattr(importlib.import_module(module), name)


# an option's value named by its unit (`--timeout-s SECONDS`) rather than its Python type (typer shows `<float>`)
_UNIT_METAVARS = {"s": "SECONDS", "ms": "MS", "gib": "GIB", "mib": "MIB", "url": "URL"}
# the shared option words (docs/cli.md) whose value is not what their name says
_WORD_METAVARS = {
    "old": "URL",
    "new": "URL",
    "config": "FILE",
    "output": "PATH",
    "out": "PATH",
    "api-key-env": "VAR",
    "engine": "ENGINE[@VERSION]",
    "old-engine": "ENGINE[@VERSION]",
    "new-engine": "ENGINE[@VERSION]",
}


class _NamedArgument(typer.core.TyperArgument):
    """An argument whose help shows its name (`RULES`) and no Python type (`<path>`) beside it."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


def _metavar(option: Any) -> str:
    """The word a value of `option` is shown as: its unit, else its long name (`--max-tokens MAX_TOKENS`)."""
    names = [o for o in option.opts if o.startswith("--")] or list(option.opts)
    word = max(names, key=len).lstrip("-").lower()
    if word in _WORD_METAVARS:
        return _WORD_METAVARS[word]
    return _UNIT_METAVARS.get(word.rsplit("-", 1)[-1], word.upper().replace("-", "_"))


def name_metavars(command: Any, help_names: list[str], nested: bool = True) -> None:
    """Give every option and argument of `command` (and of its sub-commands) a word for its value in the help,
    instead of typer's Python types (`<bool>`, `<list[str]>`, `<path>`): a flag shows none, a value its unit or
    name, an argument its name; a metavar set by the option itself is kept."""
    help_option = command.get_help_option(_HelpNames(help_names)) if hasattr(command, "get_help_option") else None
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if type(param) is typer.core.TyperArgument:
            param.__class__ = _NamedArgument
            param.metavar = param.metavar or param.name.upper()
        elif isinstance(param, typer.core.TyperOption) and param.metavar is None:
            choice = param.type_descriptor.is_choice if hasattr(param, "type_descriptor") else False
            param.metavar = "" if param.is_flag or param.count else None if choice else _metavar(param)
    for sub in (getattr(command, "commands", None) or {}).values() if nested else ():
        name_metavars(sub, help_names)


class _HelpNames:
    """The one field of a click context that `get_help_option` reads (the names `-h`, `--help`)."""

    def __init__(self, names: list[str]) -> None:
        self.help_option_names = names
