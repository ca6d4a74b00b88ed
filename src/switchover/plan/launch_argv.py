"""A launch as text, reduced to the words an engine's parser sees: shell scripts (`NAME=value` variables, `export`,
heredocs that write a config file, `bash -c '...'`, `sudo`, `&&` chains), `KEY=value` prefixes, `docker run` options
and the image, and Kubernetes container `command:` / `args:` / `env:` lists. Which words start an engine is the
caller's (the profiles'); this module only knows shells and container runtimes."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from switchover.errors import BadInput

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_ASSIGN = re.compile(rf"^({_NAME})=(.*)$", re.S)
_VAR = re.compile(rf"\$(?:\{{({_NAME})\}}|({_NAME}))")
_HEREDOC = re.compile(rf"<<-?\s*(['\"]?)({_NAME})\1")
_CONTROL = {"&&", "||", ";", "|", "&", ";;"}
_WRAPPERS = {"sudo", "nohup", "exec", "time", "stdbuf", "nice", "command"}
_SUDO_VALUE = {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}
# Runners that start a command in a Python environment: `uv run [OPTIONS] CMD`
# (https://docs.astral.sh/uv/reference/cli/#uv-run), `uvx CMD`, `conda run -n ENV CMD`
# (https://docs.conda.io/projects/conda/en/latest/commands/run.html), `pipx run CMD`; options that take a value
_RUNNERS = {("uv", "run"), ("uvx",), ("conda", "run"), ("pipx", "run")}
_RUNNER_VALUE = {
    "--with",
    "-w",
    "--with-requirements",
    "--python",
    "-p",
    "--project",
    "--directory",
    "--env-file",
    "--extra",
    "--group",
    "--index",
    "--index-url",
    "--from",
    "-n",
    "--name",
    "--prefix",
    "--cwd",
}
_SHELLS = {"sh", "bash", "dash", "zsh"}
RUNTIMES = ("docker", "podman", "nvidia-docker")
# `docker run` options that take a value (https://docs.docker.com/reference/cli/docker/container/run/); every other
# option is a switch. Short switches combine (`-it`, `-dit`).
_DOCKER_VALUE = frozenset(
    {
        "-a",
        "--attach",
        "--add-host",
        "--annotation",
        "--blkio-weight",
        "--blkio-weight-device",
        "--cap-add",
        "--cap-drop",
        "--cgroup-parent",
        "--cgroupns",
        "--cidfile",
        "--cpu-count",
        "--cpu-percent",
        "--cpu-period",
        "--cpu-quota",
        "--cpu-rt-period",
        "--cpu-rt-runtime",
        "-c",
        "--cpu-shares",
        "--cpus",
        "--cpuset-cpus",
        "--cpuset-mems",
        "--detach-keys",
        "--device",
        "--device-cgroup-rule",
        "--device-read-bps",
        "--device-read-iops",
        "--device-write-bps",
        "--device-write-iops",
        "--dns",
        "--dns-option",
        "--dns-search",
        "--domainname",
        "--entrypoint",
        "-e",
        "--env",
        "--env-file",
        "--expose",
        "--gpus",
        "--group-add",
        "--health-cmd",
        "--health-interval",
        "--health-retries",
        "--health-start-interval",
        "--health-start-period",
        "--health-timeout",
        "-h",
        "--hostname",
        "--ip",
        "--ip6",
        "--ipc",
        "--isolation",
        "--kernel-memory",
        "-l",
        "--label",
        "--label-file",
        "--link",
        "--link-local-ip",
        "--log-driver",
        "--log-opt",
        "--mac-address",
        "-m",
        "--memory",
        "--memory-reservation",
        "--memory-swap",
        "--memory-swappiness",
        "--mount",
        "--name",
        "--network",
        "--net",
        "--network-alias",
        "--oom-score-adj",
        "--pid",
        "--pids-limit",
        "--platform",
        "-p",
        "--publish",
        "--pull",
        "--restart",
        "--runtime",
        "--security-opt",
        "--shm-size",
        "--stop-signal",
        "--stop-timeout",
        "--storage-opt",
        "--sysctl",
        "--tmpfs",
        "--ulimit",
        "-u",
        "--user",
        "--userns",
        "--uts",
        "-v",
        "--volume",
        "--volume-driver",
        "--volumes-from",
        "-w",
        "--workdir",
    }
)
MAX_DEPTH = 4  # bash -c inside a Kubernetes sh -c ... : deeper nesting is not a launch anyone writes
# A Windows launch (llama.cpp ships llama-server.exe): a program given as X.exe, .\X or C:\...\X. cmd.exe and
# PowerShell have no backslash escape (a path keeps its backslashes) and continue a line with ^ (cmd.exe,
# https://learn.microsoft.com/en-us/windows-server/administration/windows-commands/cmd) or a backtick (PowerShell,
# https://learn.microsoft.com/en-us/powershell/module/microsoft.powershell.core/about/about_special_characters).
_WINDOWS_PROGRAM = re.compile(r"^(?:[A-Za-z]:\\|\.{1,2}\\)|\.exe$", re.I)
_WINDOWS_CONTINUATION = ("^", "`")


@dataclass
class EnvSetting:
    """One environment variable the engine process gets, and how it was set."""

    name: str
    value: str
    how: str  # "prefix", "export", "docker -e", "docker --env-file NAME", "kubernetes env"


@dataclass
class RawLaunch:
    """What the shell or the container runtime hands the engine: its words (from the command on), its environment,
    and what the runtime said about GPUs and the image."""

    words: list[str] = field(default_factory=list)
    env: list[EnvSetting] = field(default_factory=list)
    image: str | None = None
    gpus: str | None = None  # docker --gpus value
    files: dict[str, str] = field(default_factory=dict)  # files the script itself writes (heredocs)
    env_files: list[str] = field(default_factory=list)  # docker --env-file names
    notes: list[str] = field(default_factory=list)


IsCommand = Callable[[list[str]], bool]


def program_name(word: str) -> str:
    """The program a command word runs, without its directory (`/` or `\\`) or Windows `.exe` suffix."""
    base = re.split(r"[/\\]", word)[-1]
    return base[:-4] if base.lower().endswith(".exe") else base


def is_windows(text: str) -> bool:
    """Whether a launch is a Windows command line: its first word is a Windows program path."""
    first = next((ln.split()[0] for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), "")
    return bool(_WINDOWS_PROGRAM.search(first))


def _expand(text: str, variables: dict[str, str]) -> str:
    """Shell variables defined earlier in the script substituted outside single quotes (unknown ones kept)."""

    def sub(part: str) -> str:
        return _VAR.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), part)

    out: list[str] = []
    single = double = escaped = False
    start = 0
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\" and not single:
            escaped = True
        elif ch == '"' and not single:
            double = not double
        elif ch == "'" and not double:
            out.append(text[start:i] if single else sub(text[start:i]))
            start = i
            single = not single
    out.append(text[start:] if single else sub(text[start:]))
    return "".join(out)


def _continued(line: str, windows: bool) -> bool:
    end = line.rstrip()
    if windows:
        return end.endswith(_WINDOWS_CONTINUATION)
    return end.endswith("\\") and not end.endswith("\\\\")


def _logical_lines(text: str, variables: dict[str, str], files: dict[str, str], windows: bool = False) -> Iterator[str]:
    """Lines with continuations joined (backslash; ^ or a backtick on Windows) and heredoc bodies taken out (into
    `files` when redirected to a file: `cat << EOF > config.yml`); lazily, so variables set by earlier lines expand
    in later heredocs."""
    raw = text.replace("\r\n", "\n").split("\n")
    i = 0
    pending = ""
    while i < len(raw):
        line = raw[i]
        i += 1
        if _continued(line, windows):
            pending += line.rstrip()[:-1] + " "
            continue
        line = pending + line
        pending = ""
        while i < len(raw) and _open_quote(line, windows):  # a quoted value that spans lines (JSON)
            line += "\n" + raw[i]
            i += 1
        doc = _HEREDOC.search(line) if "<<" in line else None
        if doc is None:
            yield line
            continue
        body: list[str] = []
        while i < len(raw) and raw[i].strip() != doc.group(2):
            body.append(raw[i])
            i += 1
        i += 1  # the delimiter line
        content = "\n".join(body) + "\n"
        content = content if doc.group(1) else _expand(content, variables)
        target = re.search(r">\s*(\S+)", line[: doc.start()] + " " + line[doc.end() :])
        if target:
            files[_expand(target.group(1), variables).strip("'\"")] = content
        yield line[: doc.start()]
    if pending:
        yield pending


def _lexer(line: str, windows: bool) -> shlex.shlex:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    if windows:
        lexer.escape = ""  # a backslash is a path separator, not an escape
    return lexer


def _open_quote(line: str, windows: bool = False) -> bool:
    try:
        list(_lexer(line, windows))
    except ValueError:
        return True
    return False


def _tokens(line: str, windows: bool = False) -> list[str]:
    try:
        return list(_lexer(line, windows))
    except ValueError as exc:
        raise BadInput(f"cannot split the launch command: {exc}") from None


def _segments(tokens: list[str]) -> list[list[str]]:
    """Commands of a line, split at `&&`, `;`, `|` ...; redirections (`> log`, `2>&1`) dropped."""
    segments: list[list[str]] = [[]]
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in _CONTROL:
            segments.append([])
        elif tok and set(tok) <= set("<>&|") and ("<" in tok or ">" in tok):
            i += 1  # the redirection's target
        elif tok.isdigit() and i + 1 < len(tokens) and tokens[i + 1][:1] in "<>":
            pass  # the fd of `2>&1`
        else:
            segments[-1].append(tok)
        i += 1
    return [s for s in segments if s]


def parse_script(text: str, is_command: IsCommand, depth: int = 0) -> RawLaunch | None:
    """The engine launch in a shell text (one command or a script), or None when no segment starts an engine."""
    if depth > MAX_DEPTH:
        raise BadInput("launch nests shells too deeply (bash -c inside bash -c ...)")
    variables: dict[str, str] = {}
    exported: list[EnvSetting] = []
    files: dict[str, str] = {}
    windows = is_windows(text)
    for line in _logical_lines(text, variables, files, windows):
        for segment in _segments(_tokens(line if windows else _expand(line, variables), windows)):
            found = _segment(segment, variables, exported, is_command, depth)
            if found is not None:
                found.files = {**files, **found.files}
                return found
    return None


def _strip_prefixes(words: list[str]) -> list[EnvSetting]:
    """Take `NAME=value` prefixes, wrappers (sudo, nohup, env ...) and environment runners (uv run ...) off the
    front of a command, in place; the prefixes are the command's environment."""
    env: list[EnvSetting] = []
    while words:
        m = _ASSIGN.match(words[0])
        if m:
            env.append(EnvSetting(m.group(1), m.group(2), "prefix"))
            words.pop(0)
        elif words[0] in _WRAPPERS or words[0] == "env":
            words.pop(0)
            while words and words[0].startswith("-"):  # sudo -E, sudo -u user, env -i
                flag = words.pop(0)
                if flag in _SUDO_VALUE and words:
                    words.pop(0)
        elif runner := next((r for r in _RUNNERS if tuple(words[: len(r)]) == r), None):
            del words[: len(runner)]
            while words and words[0].startswith("-"):  # uv run --with x, conda run -n env
                flag, eq, _ = words.pop(0).partition("=")
                if flag in _RUNNER_VALUE and not eq and words:
                    words.pop(0)
        else:
            break
    return env


def _segment(
    words: list[str], variables: dict[str, str], exported: list[EnvSetting], is_command: IsCommand, depth: int
) -> RawLaunch | None:
    """One command: assignments and `export` remembered; a launch (direct, docker run, sh -c) returned."""
    words = list(words)
    if words[0] == "export":
        for word in words[1:]:
            m = _ASSIGN.match(word)
            if m:
                variables[m.group(1)] = m.group(2)
                exported.append(EnvSetting(m.group(1), m.group(2), "export"))
        return None
    env = _strip_prefixes(words)
    if not words:
        variables.update({e.name: e.value for e in env})  # `model=x` alone: a shell variable
        return None
    base = program_name(words[0])
    if base in _SHELLS:
        return _shell_c(words, [*exported, *env], is_command, depth)
    if base in RUNTIMES and len(words) > 1 and words[1] == "run":
        return _docker_run(words[2:], [*exported, *env], is_command, depth)
    if base in RUNTIMES and len(words) > 2 and words[1] == "container" and words[2] == "run":
        return _docker_run(words[3:], [*exported, *env], is_command, depth)
    if is_command(words):
        return RawLaunch(words=words, env=[*exported, *env])
    return None


def _shell_c(words: list[str], env: list[EnvSetting], is_command: IsCommand, depth: int) -> RawLaunch | None:
    """`bash -c 'script'` (also -lc, -ec ...): the script parsed in turn."""
    for i, word in enumerate(words[1:], start=1):
        if word.startswith("-") and "c" in word[1:] and not word.startswith("--") and i + 1 < len(words):
            inner = parse_script(words[i + 1], is_command, depth + 1)
            if inner is not None:
                inner.env = [*env, *inner.env]
            return inner
    return None


def _docker_run(words: list[str], env: list[EnvSetting], is_command: IsCommand, depth: int) -> RawLaunch:
    """`docker run [OPTIONS] IMAGE [ARGS]`: -e/--env and --env-file kept as the container's environment, --gpus kept,
    --entrypoint put in front of the arguments; every other runtime option is the runtime's, not the engine's."""
    out = RawLaunch(env=[e for e in env if e.how != "prefix"])  # a prefix sets the docker client's environment
    entrypoint: list[str] = []
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "--":
        name, eq, inline = words[i].partition("=")
        takes = name in _DOCKER_VALUE
        value = inline if eq else (words[i + 1] if takes and i + 1 < len(words) else None)
        i += 1 + (1 if takes and not eq else 0)
        if not takes or value is None:
            continue
        if name in ("-e", "--env"):
            key, has, val = value.partition("=")
            out.env.append(EnvSetting(key, val if has else "", "docker -e"))
        elif name == "--env-file":
            out.env_files.append(value)
        elif name == "--gpus":
            out.gpus = value.strip("'\"")
        elif name == "--entrypoint":
            entrypoint = shlex.split(value)
    if i < len(words) and words[i] == "--":
        i += 1
    if i >= len(words):
        raise BadInput("docker run has no image")
    out.image = words[i]
    out.words = [*entrypoint, *words[i + 1 :]]
    if len(out.words) > 1 and program_name(out.words[0]) in _SHELLS:
        inner = _shell_c(out.words, out.env, is_command, depth)
        if inner is not None:
            inner.image, inner.gpus, inner.env_files = out.image, out.gpus, out.env_files
            return inner
    return out


def _container(node: Any) -> dict[str, Any] | None:
    """The first mapping in a Kubernetes manifest (or a compose/Helm fragment) with a `command` or `args` list."""
    if isinstance(node, dict):
        if isinstance(node.get("args"), list | str) or isinstance(node.get("command"), list | str):
            return node
        for value in node.values():
            found = _container(value)
            if found is not None:
                return found
    elif isinstance(node, list):
        for item in node:
            found = _container(item)
            if found is not None:
                return found
    return None


def _as_words(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return shlex.split(str(value))


def _kubernetes_env(items: Any) -> list[EnvSetting]:
    """A Kubernetes container's `env:` list of {name, value} (valueFrom: no value known here)."""
    out: list[EnvSetting] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and "name" in item:
            value = item.get("value")
            out.append(EnvSetting(str(item["name"]), "" if value is None else str(value), "kubernetes env"))
    return out


def _compose_env(items: Any) -> list[EnvSetting]:
    """A compose service's `environment:`, a list of KEY=VALUE or a mapping
    (https://docs.docker.com/reference/compose-file/services/#environment)."""
    pairs: list[tuple[str, Any]] = []
    if isinstance(items, dict):
        pairs = list(items.items())
    elif isinstance(items, list):
        pairs = [(k, v) for k, _, v in (str(x).partition("=") for x in items if isinstance(x, str | int | float))]
    return [
        EnvSetting(str(k), "" if v is None else str(v), "compose environment")
        for k, v in pairs
        if re.fullmatch(_NAME, str(k))
    ]


def parse_manifest(data: Any, is_command: IsCommand) -> RawLaunch | None:
    """A Kubernetes container (`command` + `args` + `env`, image) or a bare `args:` list as a launch; None when the
    mapping holds no container."""
    if isinstance(data, list) and all(isinstance(x, str | int | float) for x in data):
        return RawLaunch(words=[str(x) for x in data])
    node = _container(data)
    if node is None:
        return None
    env = _kubernetes_env(node.get("env")) + _compose_env(node.get("environment"))
    words = [*_as_words(node.get("command")), *_as_words(node.get("args"))]
    image = str(node["image"]) if node.get("image") else None
    if len(words) > 2 and program_name(words[0]) in _SHELLS:
        inner = _shell_c(words, env, is_command, 0)
        if inner is not None:
            inner.image = image
            return inner
    return RawLaunch(words=words, env=env, image=image)


def image_parts(image: str) -> tuple[str, str | None]:
    """`registry/repo:tag@digest` as (repository, tag or None)."""
    name = image.split("@", 1)[0]
    head, sep, tag = name.rpartition(":")
    if sep and "/" not in tag:
        return head, tag
    return name, None


def env_file(text: str, name: str) -> list[EnvSetting]:
    """A docker --env-file: `KEY=value` lines (no quoting, # comments)."""
    out: list[EnvSetting] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, has, value = line.partition("=")
        if has and re.fullmatch(_NAME, key.strip()):
            out.append(EnvSetting(key.strip(), value, f"docker --env-file {name}"))
    return out
