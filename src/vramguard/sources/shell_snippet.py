"""A pasted shell snippet, read the way a shell would read it, down to the vLLM launch in it.

What people paste is often more than one line: a recipe's `export VAR=...` lines and
comments, a `$ ` prompt, a Makefile target, a Dockerfile's `ENTRYPOINT`, flags commented out
in the middle of a `\\`-continued command, a trailing `&`. `launch_words(text)` splits the
snippet into commands as a POSIX shell does (quotes, `\\`-newline continuations, `#`
comments, `;` `&` `&&` `|` `||` and newlines between commands, redirections dropped) and
returns the words of the first command that starts vLLM, after the `VAR=value` words of the
variables the snippet exported before it. `${VAR:-default}`, `${VAR:+word}`, `${VAR}` and
`$VAR` are expanded from those assignments (an unset variable with a default takes the
default; one without stays as written, so its flag's error names it); `$(...)` and a
template's `<placeholder>` are kept as written. Nothing is executed.
"""

from __future__ import annotations

import re

from ..errors import UsageError

__all__ = ["launch_words", "commands"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_DOCKERFILE = ("ENTRYPOINT", "CMD", "RUN")
_BREAK = " \t\r\n;&|<>"
# NOTE: documentation templates write values as `<decode_http_port>`: kept as words
_PLACEHOLDER = re.compile(r"<[A-Za-z0-9_.:/-]+>(?=[\s;&|]|$)")


# NOTE: a pasted launch is a few KiB; expansions nest a few levels at most.
MAX_SNIPPET_CHARS = 256 << 10
_MAX_DEPTH = 8


class _Lexer:
    """Words and command boundaries of a POSIX shell snippet (no execution)."""

    def __init__(self, text: str, env: dict[str, str], depth: int = 0):
        self.text, self.n, self.i = text, len(text), 0
        self.env, self.depth = env, depth
        self.commands: list[list[str]] = []
        self.exported: set[str] = set()
        self.env_before: list[dict[str, str]] = []     # exported before each command
        self.words: list[str] = []
        self.word: list[str] | None = None

    def run(self) -> list[list[str]]:
        while self.i < self.n:
            self._step()
        self._end_command()
        return self.commands

    # -- words and commands --
    def _add(self, s: str) -> None:
        if self.word is None:
            self.word = []
        self.word.append(s)

    def _end_word(self) -> None:
        if self.word is not None:
            self.words.append("".join(self.word))
            self.word = None

    def _end_command(self) -> None:
        self._end_word()
        if self.words:
            self.commands.append(self.words)
            self.env_before.append({k: v for k, v in self.env.items() if k in self.exported})
            # NOTE: a command of assignments only (or `export`) sets variables for the lines
            # after it, only exported ones reach the launch's environment; `VAR=value cmd`
            # sets it for that command alone (as in a shell)
            export = self.words[0] == "export"
            head = self.words[1:] if export else self.words
            if export:
                self.exported.update(w.partition("=")[0] for w in head if _NAME.fullmatch(
                    w.partition("=")[0]))
            if head and all(_ASSIGN.match(w) for w in head):
                for w in head:
                    key, _, val = w.partition("=")
                    self.env[key] = val
        self.words = []

    # -- characters --
    def _step(self) -> None:
        c, t = self.text[self.i], self.text
        nxt = t[self.i + 1] if self.i + 1 < self.n else ""
        if c == "\\":
            if nxt == "\n" or (nxt == "\r" and t[self.i + 2:self.i + 3] == "\n"):
                self.i += 3 if nxt == "\r" else 2          # NOTE: a line continuation
                return
            if nxt:
                self._add(nxt)
            self.i += 2
            return
        if c == "#" and self.word is None:
            while self.i < self.n and t[self.i] != "\n":  # NOTE: `\` inside does not continue
                self.i += 1
            return
        if c in " \t\r":
            self._end_word()
        elif c in "\n;":
            self._end_command()
        elif c in "&|":
            if c == "&" and nxt == ">":
                self.i += 1
                self._redirect()
                return
            self._end_command()
            if nxt == c:
                self.i += 1
        elif c == "<" and (m := _PLACEHOLDER.match(t, self.i)):
            self._add(m.group(0))       # NOTE: a template's `<port>`, not a redirection
            self.i = m.end()
            return
        elif c in "<>":
            self._redirect()
            return
        elif c == "'":
            end = t.find("'", self.i + 1)
            if end < 0:
                raise UsageError("cannot split the pasted command: No closing quotation",
                                 where="command line", fix="Check the quotes.")
            self._add(t[self.i + 1:end])
            self.i = end + 1
            return
        elif c == '"':
            self._double()
            return
        elif c == "$":
            self._dollar(quoted=False)
            return
        else:
            self._add(c)
        self.i += 1

    def _redirect(self) -> None:
        """`> file`, `2>&1`, `>> log`, `< in`: dropped with their target (and fd number)."""
        if self.word is not None and "".join(self.word).isdigit():
            self.word = None
        self._end_word()
        t = self.text
        self.i += 1
        while self.i < self.n and t[self.i] in ">&":
            self.i += 1
        while self.i < self.n and t[self.i] in " \t":
            self.i += 1
        while self.i < self.n and t[self.i] not in _BREAK:
            self.i += 1

    def _double(self) -> None:
        t = self.text
        self.i += 1
        self._add("")
        while self.i < self.n and t[self.i] != '"':
            c = t[self.i]
            if c == "\\" and self.i + 1 < self.n and t[self.i + 1] in '$`"\\\n':
                if t[self.i + 1] != "\n":
                    self._add(t[self.i + 1])
                self.i += 2
            elif c == "$":
                self._dollar(quoted=True)
            else:
                self._add(c)
                self.i += 1
        if self.i >= self.n:
            raise UsageError("cannot split the pasted command: No closing quotation",
                             where="command line", fix="Check the quotes.")
        self.i += 1

    def _dollar(self, quoted: bool) -> None:
        """`$NAME`, `${NAME...}` expanded where the snippet set NAME (or gives a default);
        `$(...)` and unknown variables kept as written."""
        t, start = self.text, self.i
        if t.startswith("$(", start):
            end = _closing(t, start + 1, "(", ")")
            self._add(t[start:end])
            self.i = end
            return
        if t.startswith("${", start):
            end = _closing(t, start + 1, "{", "}")
            value = self._brace(t[start + 2:end - 1], t[start:end])
            self.i = end
        else:
            m = _NAME.match(t, start + 1)
            if not m:
                self._add("$")
                self.i += 1
                return
            value = self.env.get(m.group(0), t[start:m.end()])
            self.i = m.end()
        if quoted:
            self._add(value)
            return
        parts = value.split()       # NOTE: an unquoted expansion splits into words
        if not parts:
            return
        for k, part in enumerate(parts):
            if k:
                self._end_word()
            self._add(part)

    def _brace(self, inner: str, written: str) -> str:
        m = _NAME.match(inner)
        if not m or self.depth >= _MAX_DEPTH:
            return written
        name, op = m.group(0), inner[m.end():]
        value = self.env.get(name)
        if op == "":
            return written if value is None else value
        for sym in (":-", "-"):
            if op.startswith(sym):
                word = op[len(sym):]
                unset = value is None or (sym == ":-" and value == "")
                return _words_text(word, self.env, self.depth + 1) if unset else value
        for sym in (":+", "+"):
            if op.startswith(sym):
                word = op[len(sym):]
                is_set = value is not None and (sym == "+" or value != "")
                return _words_text(word, self.env, self.depth + 1) if is_set else ""
        return written


def _closing(text: str, open_at: int, opening: str, closing: str) -> int:
    """The index after the bracket that closes the one at `open_at` (quotes skipped)."""
    depth, i, quote = 0, open_at, None
    while i < len(text):
        c = text[i]
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def _words_text(word: str, env: dict[str, str], depth: int) -> str:
    """A `${VAR:-word}` word as the shell gives it (its own quotes and expansions applied),
    joined by spaces (the caller splits it into words)."""
    lexer = _Lexer(word, dict(env), depth)
    return " ".join(w for cmd in lexer.run() for w in cmd)


def commands(text: str) -> tuple[list[list[str]], list[dict[str, str]]]:
    """The snippet's commands as word lists, and the variables exported before each one."""
    if len(text) > MAX_SNIPPET_CHARS:
        raise UsageError(f"the pasted command is {len(text) >> 10} KiB; a launch command is a "
                         f"few KiB (at most {MAX_SNIPPET_CHARS >> 10} KiB is read)",
                         where="command line", fix="Paste the vllm serve line (and the "
                                                   "export lines before it) only.")
    lexer = _Lexer(text, {})
    return lexer.run(), lexer.env_before


def _unprompted(words: list[str]) -> list[str]:
    """Without a `$ ` prompt or a Dockerfile keyword in front."""
    return words[1:] if words and (words[0] == "$" or words[0] in _DOCKERFILE) else words


def _is_launch(words: list[str]) -> bool:
    from .vllm_launch import CONTAINER_TOOLS, strip_env
    rest = strip_env(_unprompted(words), {})
    if not rest:
        return False
    head = rest[0].rsplit("/", 1)[-1]
    if head in ("uv", "uvx", "pipx") and len(rest) > 1:
        return _is_launch(rest[2:] if rest[1] == "run" else rest[1:])
    if head == "vllm":
        return rest[1:2] == ["serve"]
    if head in CONTAINER_TOOLS:
        return rest[1:2] in (["run"], ["create"])
    if re.fullmatch(r"python(\d(\.\d+)?)?", head):
        return any(w.startswith("vllm.entrypoints") for w in rest[1:4])
    return False


def launch_words(text: str) -> tuple[list[str], list[str]]:
    """(the words of the snippet's vLLM launch, led by the `VAR=value` words of the variables
    the snippet exported before it; notes). Without a launch command, every command's words in order (a list of
    flags written one per line)."""
    cmds, envs = commands(text)
    launches = [k for k, words in enumerate(cmds) if _is_launch(words)]
    if not launches:
        words = [w for cmd in cmds for w in cmd]
        return (words[1:] if words[:1] == ["$"] else words), []
    k = launches[0]
    notes = []
    if len(launches) > 1:
        notes.append(f"the pasted snippet has {len(launches)} vLLM launch commands; the first "
                     "is read")
    return [f"{key}={val}" for key, val in envs[k].items()] + _unprompted(cmds[k]), notes
