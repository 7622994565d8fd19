"""The docs' code blocks, read and checked: every fenced block of README.md and docs/*.md is one of
the kinds below, and each kind has its check (tests/test_docs.py runs them in `make test`).

- ```python / ```py: Python. A block whose first line is ``# NAME.py`` is a file: it is written to
  the document's working directory (where the document's commands run) and imported there. Any
  other block is a program, run as ``__main__``. A document's blocks run in order, in one fresh
  process of their own (forked from one that has only imported torch and the packages), so they may
  share that process's state, as a reader pasting them in order would. A ```text block right after
  a program (nothing but blank lines between) is what the program prints, compared exactly.
- ```text whose first line starts with ``$ ``: a transcript: each ``$ command`` (``\\`` continues
  it on the next line) and what it prints. The command must parse (as below); an ``fx-conformance``
  command is then rerun in the document's working directory (``prove`` in this process, the others
  as a process) and what it prints to stdout must be the lines shown, times masked; its exit status
  must be what they say (1 for a violation or a refutation, 3 for unknown, else 0), and a
  ``repro: python PATH`` it shows must exist afterwards. A directive on the line before the fence,
  ``<!-- docs-check: ITEM[; ITEM] -->``, changes that: ``trimmed`` (the lines shown are some of the
  output, in order) and ``not rerun: REASON`` (too slow for make test: the command is parsed, and a
  ``verify`` target is loaded with its options in the document's process, but it is not run).
- ```text otherwise: not code: the output of the program above it, or a record (a tree, a table,
  a measured log), checked only as that program's output.
- ```bash / ```sh: commands a reader types, one a line (``#`` starts a comment), never run here
  (``make test`` is one of them); each must be real: ``fx-conformance ...`` parsed by the CLI's own
  argparse parser, ``make ...`` by ``make -n`` (and every ``VAR=value`` a variable of the Makefile),
  ``pytest ...`` by this pytest run's own parser, with every plugin's options.
- Anything else (no language, another language, a directive elsewhere) is a problem, so a new
  block cannot go unchecked.

Problems are strings ``DOC:LINE: what is wrong``. This module imports nothing heavy at import time:
it is also the runner of the documents' Python (``python -m tests._doc_blocks REQUEST.json``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import importlib
import io
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYTHON = ("python", "py")
SHELL = ("bash", "sh")
LANGUAGES = (*PYTHON, "text", *SHELL)

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*docs-check:(.*?)-->\s*$")
_FILE = re.compile(r"^# ([A-Za-z_]\w*\.py)\b")


@dataclasses.dataclass
class Block:
    doc: str  # the document's path relative to ROOT, or its name
    line: int  # the opening fence's line, 1-based
    lang: str
    text: str
    kind: str = ""  # file, program, output, transcript, record, commands
    trimmed: bool = False
    not_rerun: str | None = None  # the reason
    expected: str | None = None  # a program's output block
    end: int = 0  # the closing fence's index in the document's lines
    where: str = ""

    def __post_init__(self):
        self.where = f"{self.doc}:{self.line}"

    @property
    def file_name(self) -> str | None:
        match = _FILE.match(self.text)
        return match.group(1) if match else None


def read(path: pathlib.Path, name: str | None = None) -> tuple[list, list]:
    """The blocks of one Markdown file, classified, and the problems of its fences and directives."""
    name = name or str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    lines = path.read_text().splitlines()
    blocks, problems, directive, i = [], [], None, 0
    while i < len(lines):
        d = _DIRECTIVE.match(lines[i])
        if d:
            if directive is not None:
                problems.append(f"{name}:{directive[0]}: a docs-check directive not followed by a fence")
            directive = (i + 1, d.group(1).strip())
            i += 1
            continue
        fence = _FENCE.match(lines[i])
        if not fence:
            if directive is not None:
                problems.append(f"{name}:{directive[0]}: a docs-check directive not followed by a fence")
                directive = None
            i += 1
            continue
        indent, marks, info = fence.groups()
        end = next((j for j in range(i + 1, len(lines))
                    if re.fullmatch(rf"\s*{marks[0]}{{{len(marks)},}}\s*", lines[j])), None)
        if end is None:
            problems.append(f"{name}:{i + 1}: a fence that is never closed")
            break
        body = "\n".join(line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[i + 1:end])
        block = Block(name, i + 1, info.strip().split(" ")[0] if info.strip() else "", body + "\n", end=end)
        if block.lang not in LANGUAGES:
            what = f"the language {block.lang!r}" if block.lang else "no language"
            problems.append(f"{block.where}: a fence with {what}, but should be one of {', '.join(LANGUAGES)} "
                            f"(tests/_doc_blocks.py says what each means and how it is checked)")
        if directive is not None:
            problems += _apply_directive(block, *directive)
            directive = None
        blocks.append(block)
        i = end + 1
    if directive is not None:
        problems.append(f"{name}:{directive[0]}: a docs-check directive not followed by a fence")
    _classify(blocks, lines)
    return blocks, problems


def _apply_directive(block: Block, line: int, text: str) -> list:
    problems = []
    if not (block.lang == "text" and block.text.startswith("$ ")):
        return [f"{block.doc}:{line}: a docs-check directive on a {block.lang or 'untagged'} block, but directives "
                f"apply to transcripts (```text blocks starting with '$ ')"]
    for item in (part.strip() for part in text.split(";")):
        if item == "trimmed":
            block.trimmed = True
        elif item.startswith("not rerun:") and item[len("not rerun:"):].strip():
            block.not_rerun = item[len("not rerun:"):].strip()
        else:
            problems.append(f"{block.doc}:{line}: docs-check item {item!r}, but should be 'trimmed' or "
                            f"'not rerun: REASON' (a reason is required)")
    return problems


def _classify(blocks: list, lines: list) -> None:
    for k, block in enumerate(blocks):
        if block.lang in PYTHON:
            block.kind = "file" if block.file_name else "program"
        elif block.lang in SHELL:
            block.kind = "commands"
        elif block.lang == "text" and block.text.startswith("$ "):
            block.kind = "transcript"
        elif block.lang == "text":
            before = blocks[k - 1] if k else None
            right_after = before is not None and before.kind == "program" and not any(
                line.strip() for line in lines[before.end + 1:block.line - 1])
            block.kind = "output" if right_after else "record"
            if right_after:
                before.expected = block.text


def commands(text: str, *, transcript: bool) -> list:
    """(command line, output shown) pairs: a transcript's ``$`` commands, or a shell block's lines."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if transcript and not line.startswith("$ "):
            i += 1  # only the lines before the first '$' (none: a transcript starts with one)
            continue
        command = line[2:] if transcript else line
        while command.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        shown = []
        while transcript and i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i])
            i += 1
        if shlex.split(command, comments=True):
            out.append((command, "\n".join(shown)))
    return out


# --- commands: proved real without running them -------------------------------------------------

def command_problems(command: str, *, pytest_parser=None) -> list:
    """Why a shown command would not run as written ([] when it parses), by the program's own parser."""
    argv = shlex.split(command, comments=True)
    if argv[0] == "fx-conformance":
        return _cli_problems(argv[1:])
    if argv[0] == "make":
        return _make_problems(argv[1:])
    if argv[0] == "pytest" or argv[:3] == ["python", "-m", "pytest"]:
        return _pytest_problems(argv[1 if argv[0] == "pytest" else 3:], pytest_parser)
    return [f"a command {argv[0]!r} that tests/_doc_blocks.py cannot check: say how it is checked there, "
            f"or show it in a ```text block as a record"]


def parse_cli(args: list):
    """The namespace the CLI's argparse parser makes of ``args``; SystemExit with its message if it refuses."""
    from conformance.cli import build_parser

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return build_parser().parse_args(args)
        except SystemExit:
            raise SystemExit(err.getvalue().strip().splitlines()[-1]) from None


def _cli_problems(args: list) -> list:
    try:
        parse_cli(args)
    except SystemExit as exc:
        return [str(exc)]
    return []


def _make_problems(args: list) -> list:
    makefile = (ROOT / "Makefile").read_text()
    problems = [f"make variable {a.split('=')[0]!r}, but the Makefile has no such variable"
                for a in args if "=" in a and not re.search(rf"\b{re.escape(a.split('=')[0])}\b", makefile)]
    proc = subprocess.run(["make", "-n", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=60)
    if proc.returncode:
        problems.append(f"make -n {shlex.join(args)}: {proc.stderr.strip().splitlines()[-1]}")
    return problems


def _pytest_problems(args: list, parser) -> list:
    if parser is None:
        return ["a pytest command, but no pytest parser to check it with"]
    import pytest

    try:
        parser.parse(args)
    except pytest.UsageError as exc:
        return [f"pytest {shlex.join(args)}: {str(exc).splitlines()[0]}"]
    return []


# --- transcripts: rerun and compared ---------------------------------------------------------------

def timeless(text: str) -> list:
    """The lines of a command's output with its times masked (``16.0 s`` -> ``T s``, ``9.5 ms`` -> ``T ms``)."""
    return re.sub(r"\b\d+(?:\.\d+)? (m?s)\b", r"T \1", text).strip().splitlines()


def expected_exit(shown: str) -> int:
    """The exit status the output shown implies (fx-conformance's codes)."""
    if re.search(r"^(FAIL:|refuted:)|violated by a minimal graph:", shown, re.M):
        return 1
    if re.search(r"^unknown:", shown, re.M):
        return 3
    return 0


def compare(shown: str, printed: str, *, trimmed: bool) -> str | None:
    """None if ``printed`` shows what ``shown`` says it does, else what differs."""
    want, got = timeless(shown), timeless(printed)
    if not trimmed:
        if want == got:
            return None
        return "\n".join(difflib.unified_diff(want, got, "shown", "printed now", lineterm="", n=1))
    at = 0
    for line in want:
        try:
            at = got.index(line, at) + 1
        except ValueError:
            return (f"the shown line {line!r} is not in what it prints now (after line {at}), in order:\n"
                    + "\n".join(got))
    return None


def working_dir(blocks: list, where: pathlib.Path) -> pathlib.Path:
    """A directory like the repository root for the document's transcripts: its file blocks written
    there, and the top folders of repository files its commands name (``tests/passes/dynamic.py``)
    linked in. Whatever the commands write (``reports/repro/``) stays in it."""
    where.mkdir(parents=True, exist_ok=True)
    for block in blocks:
        if block.kind == "file":
            (where / block.file_name).write_text(block.text)
    for block in blocks:
        if block.kind == "transcript":
            for command, _ in commands(block.text, transcript=True):
                for token in re.findall(r"[\w.-]+/[\w./-]*", command):
                    head = token.split("/")[0]
                    if (ROOT / token).is_file() and not (where / head).exists():
                        (where / head).symlink_to(ROOT / head)
    return where


def run_transcript(block: Block, cwd: pathlib.Path, *, pytest_parser=None) -> list:
    """The problems of a transcript: each command parses; unless not rerun, it prints what is shown."""
    problems = []
    for command, shown in commands(block.text, transcript=True):
        found = command_problems(command, pytest_parser=pytest_parser)
        if found or block.not_rerun:
            problems += [f"{block.where}: $ {command}: {p}" for p in found]
            continue
        argv = shlex.split(command)
        if argv[0] != "fx-conformance":
            problems.append(f"{block.where}: $ {command}: only fx-conformance commands are rerun; say "
                            f"'<!-- docs-check: not rerun: REASON -->' before the block")
            continue
        if argv[1] == "prove":  # z3 in this process: milliseconds
            from conformance.cli import main

            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = main(argv[1:])
            printed, err = out.getvalue(), ""
        else:
            proc = subprocess.run([sys.executable, "-m", "conformance.cli", *argv[1:]], capture_output=True,
                                  text=True, cwd=cwd, timeout=600)
            code, printed, err = proc.returncode, proc.stdout, proc.stderr
        differs = compare(shown, printed, trimmed=block.trimmed)
        if differs:
            problems.append(f"{block.where}: $ {command}: prints other lines than the block shows (if the change "
                            f"is on purpose, show what it prints now):\n{differs}")
        if code != expected_exit(shown):
            problems.append(f"{block.where}: $ {command}: exit status={code}, but should be {expected_exit(shown)} "
                            f"(what the output shown says)\n{err[-2000:]}")
        for path in re.findall(r"^\s*repro: python (\S+)$", shown, re.M):
            if not (cwd / path).exists():
                problems.append(f"{block.where}: $ {command}: repro script {path} was not written")
    return problems


# --- Python: one fresh process per document ---------------------------------------------------------

def python_request(blocks: list, cwd: pathlib.Path) -> dict:
    """What a document's process runs: its Python blocks in order, then the targets of its verify
    commands that are not rerun, loaded with their options."""
    steps = [{"where": b.where, "kind": b.kind, "source": b.text, "name": b.file_name}
             for b in blocks if b.kind in ("file", "program")]
    for b in blocks:
        if b.kind == "transcript" and b.not_rerun:
            for command, _ in commands(b.text, transcript=True):
                argv = shlex.split(command)
                if argv[:2] == ["fx-conformance", "verify"]:
                    steps.append({"where": b.where, "kind": "load", "argv": argv[1:]})
    return {"cwd": str(cwd), "steps": steps}


def run_python(requests: dict, out_dir: pathlib.Path, *, profile: str | None, preload: bool = True) -> dict:
    """Run each document's request (name -> python_request()) in a process of its own; returns
    name -> one result per step (``stdout``, ``error``)."""
    request = out_dir / "python-request.json"
    results = out_dir / "python-results.json"
    request.write_text(json.dumps({"docs": requests, "profile": profile, "preload": preload,
                                   "results": str(results)}))
    proc = subprocess.run([sys.executable, "-m", "tests._doc_blocks", str(request)], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)
    if proc.returncode or not results.exists():
        raise RuntimeError(f"the docs' Python runner failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(results.read_text())


_STEPS = {"file": "importing the file", "program": "the program", "load": "loading the verify command's pass"}


def python_problems(blocks: list, results: list) -> list:
    problems = []
    expected = {b.where: b.expected for b in blocks if b.kind == "program"}
    for step in results:
        if step["error"]:
            problems.append(f"{step['where']}: {_STEPS[step['kind']]} raised:\n{step['error']}")
        elif step["kind"] == "program" and expected.get(step["where"]) is not None:
            want, got = expected[step["where"]].strip(), step["stdout"].strip()
            if want != got:
                diff = "\n".join(difflib.unified_diff(want.splitlines(), got.splitlines(), "shown", "printed now",
                                                      lineterm="", n=1))
                problems.append(f"{step['where']}: the program prints other lines than the text block after it "
                                f"shows:\n{diff}")
    return problems


def _serve(request_path: str) -> None:
    """The runner: import once, then fork a fresh process per document (no kernel ran before the fork)."""
    request = json.loads(pathlib.Path(request_path).read_text())
    if request["preload"]:
        import hypothesis
        import torch  # noqa: F401
        import torch.fx.experimental.proxy_tensor  # noqa: F401

        import conformance  # noqa: F401
        import conformance.cli  # noqa: F401
        import reference_lowering  # noqa: F401
        import strategies  # noqa: F401
        from conformance import profiles  # noqa: F401  (registers the fx- profiles)

        if request["profile"]:
            hypothesis.settings.load_profile(request["profile"])
    results = {}
    for name, doc in request["docs"].items():
        out = pathlib.Path(doc["cwd"]) / ".python-results.json"
        pid = os.fork()
        if pid == 0:
            try:
                _run_document(doc, out)
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        done = json.loads(out.read_text()) if out.exists() else []
        if len(done) < len(doc["steps"]):
            step = doc["steps"][len(done)]
            done.append({"where": step["where"], "kind": step["kind"], "stdout": "",
                         "error": f"the document's process died (wait status {status})"})
        results[name] = done
    pathlib.Path(request["results"]).write_text(json.dumps(results))


def _run_document(doc: dict, out: pathlib.Path) -> None:
    os.chdir(doc["cwd"])
    sys.path.insert(0, doc["cwd"])
    done = []
    for step in doc["steps"]:
        stdout, error = io.StringIO(), None
        try:
            with contextlib.redirect_stdout(stdout):
                if step["kind"] == "file":
                    importlib.import_module(step["name"][:-3])
                elif step["kind"] == "program":
                    exec(compile(step["source"], step["where"], "exec"), {"__name__": "__main__"})
                else:
                    _load(step["argv"])
        except BaseException:  # noqa: B036  (a block's SystemExit is a finding too)
            error = traceback.format_exc(limit=-3)
        done.append({"where": step["where"], "kind": step["kind"], "stdout": stdout.getvalue(), "error": error})
        out.write_text(json.dumps(done))  # after every step: a crash still reports the steps before it


def _load(argv: list) -> None:
    """A verify command's target, loaded as the command would load it (calling form, settings, context)."""
    from conformance import load_pass
    from conformance.adapters import parse_pass_args

    args = parse_cli(argv)
    load_pass(args.target, signature=args.signature, settings_factory=args.settings_factory,
              pass_kwargs=parse_pass_args(args.pass_arg), context=args.context)


if __name__ == "__main__":
    _serve(sys.argv[1])
