"""Report writers for a ``VerifyResult``: JSON first (self-describing, schema_version 1), then
JUnit XML and Markdown rendered from the same result.

``write_json`` is called repeatedly while a run streams partial results, so the parts that do not
change during a run (tool version, machine, package versions, git commit) are computed once per
working directory and cached; every write is atomic (temp file beside the target + ``os.replace``).

>>> from conformance._result import VerifyResult
>>> render_markdown(VerifyResult(target="m:p", examples=3)).splitlines()[0]
'# fx-conformance verify: m:p'
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import functools
import importlib
import importlib.metadata
import json
import math
import os
import pathlib
import platform
import re
import socket
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

__all__ = ["render_markdown", "report_dict", "static_info", "write_json", "write_junit", "write_markdown"]

SCHEMA_VERSION = 1
TOOL = "fx-conformance"
_GIT_TIMEOUT_S = 5
# (key in "versions", distribution name, module name); the module's own version wins when it is
# already imported, otherwise the installed distribution's metadata (importing torch costs ~1 s).
_PACKAGES = (("torch", "torch", "torch"), ("triton", "triton", "triton"),
             ("hypothesis", "hypothesis", "hypothesis"), ("numpy", "numpy", "numpy"))
# Everything XML 1.0 cannot hold: control characters other than \t \n \r, surrogates, U+FFFE/FFFF.
_XML_BAD = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _package_version(dist: str, module: str) -> str | None:
    mod = sys.modules.get(module)
    if mod is not None and isinstance(getattr(mod, "__version__", None), str):
        return mod.__version__
    try:
        return importlib.metadata.version(dist)
    except Exception:  # not installed, or broken metadata: the report still gets written
        return None


def _z3_version() -> str | None:
    try:
        return importlib.import_module("z3").get_version_string()
    except Exception:  # absent, or a broken native library: z3 is optional
        return None


def _git(args: list, cwd: str) -> str | None:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=_GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):  # git missing, hung, or cwd gone
        return None
    return proc.stdout if proc.returncode == 0 else None


@functools.lru_cache(maxsize=8)
def _commit(cwd: str) -> dict:
    head = _git(["rev-parse", "HEAD"], cwd)
    if head is None:
        return {"sha": None, "dirty": None}
    status = _git(["status", "--porcelain"], cwd)
    return {"sha": head.strip() or None, "dirty": None if status is None else bool(status.strip())}


@functools.lru_cache(maxsize=1)
def _machine_and_versions() -> dict:
    try:
        tool_version = importlib.metadata.version(TOOL)
    except Exception:
        tool_version = "unknown"
    machine = {"hostname": socket.gethostname(), "platform": platform.platform(),
               "machine": platform.machine(), "processor": platform.processor(),
               "cpu_count": os.cpu_count(), "python": platform.python_version()}
    versions = {key: _package_version(dist, module) for key, dist, module in _PACKAGES}
    versions["z3"] = _z3_version()
    return {"tool": {"name": TOOL, "version": tool_version}, "machine": machine, "versions": versions}


def static_info() -> dict:
    """The parts of a report that do not change during a run: tool, machine, versions, commit.

    Cached (git runs once per working directory); pass the result to ``write_json(static=...)``.
    """
    # Copies, so a caller editing its dict cannot change what later reports say.
    return copy.deepcopy({**_machine_and_versions(), "commit": _commit(os.getcwd())})


def _json_safe(value):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # NaN/inf are not valid JSON
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return str(value)


def _count(value) -> tuple:
    if isinstance(value, dict):
        return int(value.get("checked", 0)), bool(value.get("violated", False))
    return int(getattr(value, "checked", 0)), bool(getattr(value, "violated", False))


def _rows(result) -> list:
    """``(property, checked, violations)`` per reported property, then violated ones not counted."""
    by_prop: dict = {}
    for v in result.violations:
        by_prop.setdefault(v.property, []).append(v)
    rows = [(name, _count(c)[0], by_prop.get(name, [])) for name, c in result.properties.items()]
    rows += [(name, None, vs) for name, vs in by_prop.items() if name not in result.properties]
    return rows


def _failed(result, name: str, violations: list) -> bool:
    return bool(violations) or (name in result.properties and _count(result.properties[name])[1])


def report_dict(result, *, static: dict | None = None) -> dict:
    """The JSON report of ``result`` as a plain dict (``static`` defaults to ``static_info()``)."""
    static = static_info() if static is None else static
    now = datetime.datetime.now(datetime.timezone.utc)
    return {
        "schema_version": SCHEMA_VERSION, "tool": static["tool"],
        "generated_at": now.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "started": result.started, "duration_s": result.duration_s,
        "machine": static["machine"], "versions": static["versions"],
        "device": _json_safe(result.options.get("device", "cpu")), "commit": static["commit"],
        "target": result.target, "ok": result.ok, "interrupted": result.interrupted,
        "isolated": result.isolated, "seed": result.seed, "examples": result.examples,
        "shrink_runs": result.shrink_runs, "changed": result.changed,
        "changed_dead_code_only": result.changed_dead_code_only, "rewrites": result.rewrites,
        "dce_pass": result.dce_pass, "vacuous": result.vacuous,
        "focus": _json_safe(result.focus),
        "options": _json_safe(result.options),
        "properties": {name: dict(zip(("checked", "violated"), _count(c)))
                       for name, c in result.properties.items()},
        "violations": [_json_safe(v.to_dict()) for v in result.violations],
        "generator_crashes": _json_safe(result.generator_crashes),
        "user_ops": _json_safe(result.user_ops),
        "database": _json_safe(result.database),
        # raised while graphs were drawn and run (counted, not printed; "where" in _warning_log.WHERES),
        # and by the pass itself, each with the first example that raised it
        "warnings": _json_safe(result.warnings),
        "pass_warnings": _json_safe(result.pass_warnings),
    }


def _atomic_write(path, text: str) -> pathlib.Path:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)  # readers see the old file or the new one, never half of either
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def write_json(result, path, *, static: dict | None = None) -> pathlib.Path:
    """Write ``report_dict(result)`` to ``path`` atomically; cheap enough to call after every example."""
    return _atomic_write(path, json.dumps(report_dict(result, static=static), indent=2) + "\n")


def _x(value) -> str:
    return _XML_BAD.sub("", str(value))


def _failure_text(violations: list) -> str:
    parts = []
    for v in violations:
        parts.append(f"{v.property}: {v.message}\n\nrepro: {v.repro_path or '(none written)'}\n"
                     f"\ninputs:\n{v.inputs or '(none)'}\n\ngraph before:\n{v.graph_before or '(none)'}\n"
                     f"\ngraph after:\n{v.graph_after or '(none)'}\n")
    return "\n".join(parts)


def write_junit(result, path) -> pathlib.Path:
    """Write ``result`` as JUnit XML: one testcase per property, a failure per violated one."""
    versions = static_info()["versions"]
    rows = _rows(result)
    failures = sum(_failed(result, name, vs) for name, _, vs in rows)
    suites = ET.Element("testsuites")
    suite = ET.SubElement(suites, "testsuite", {
        "name": _x(f"{TOOL} verify {result.target}"), "tests": str(len(rows) + 1 + result.interrupted),
        "failures": str(failures), "errors": str(int(result.interrupted)), "skipped": str(int(result.vacuous)),
        "time": f"{result.duration_s:.3f}", "timestamp": _x(result.started)})
    props = ET.SubElement(suite, "properties")
    for name, value in (("torch", versions["torch"]), ("triton", versions["triton"]),
                        ("seed", result.seed), ("device", result.options.get("device", "cpu")),
                        ("specials", result.options.get("specials", "strict")),
                        ("examples", result.examples), ("shrink_runs", result.shrink_runs),
                        ("changed", result.changed)):
        ET.SubElement(props, "property", {"name": name, "value": _x("" if value is None else value)})
    classname = _x(f"{TOOL}.{result.target}")
    for name, _, vs in rows:
        case = ET.SubElement(suite, "testcase", {"classname": classname, "name": _x(name), "time": "0"})
        if _failed(result, name, vs):
            # "contracts" is counted as one property but reported per contract ("contracts:<name>").
            parts = [v.property for v in result.violations if v.property.startswith(name + ":")]
            headline = vs[0].headline if vs else f"{name} violated" + (f"; see {', '.join(parts)}" if parts else "")
            failure = ET.SubElement(case, "failure", {"message": _x(headline), "type": _x(name)})
            failure.text = _x(_failure_text(vs) if vs else headline)
    fired = ET.SubElement(suite, "testcase", {"classname": classname, "name": "pass changed graphs", "time": "0"})
    if result.vacuous:
        ET.SubElement(fired, "skipped", {"message": _x(f"vacuous: {result.vacuous_text}")})
    if result.interrupted:
        case = ET.SubElement(suite, "testcase", {"classname": classname, "name": "run", "time": "0"})
        ET.SubElement(case, "error", {"message": _x(f"interrupted after {result.examples} examples"),
                                      "type": "interrupted"})
    ET.indent(suites)
    return _atomic_write(path, ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n")


def _cell(value) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def _fence(text: str, lang: str = "") -> str:
    # A fence longer than any backtick run inside, so code containing ``` cannot close it early.
    ticks = "`" * max(3, 1 + max((len(m) for m in re.findall("`+", text)), default=0))
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def render_markdown(result) -> str:
    """``result`` as a Markdown report: status line, property table, one section per violation."""
    rows = _rows(result)
    failed = sum(_failed(result, name, vs) for name, _, vs in rows)
    if result.interrupted:
        status = f"**INTERRUPTED** after {result.examples} examples"
        status += f"; {failed} properties violated" if failed else ""
    elif failed or result.violations:
        status = f"**FAIL**: {failed} properties violated in {result.graphs_text}"
    elif result.vacuous:
        status = f"**VACUOUS**: {result.vacuous_text}"
    else:
        status = f"**PASS**: no counterexample in {result.examples} examples"
    lines = [f"# {TOOL} verify: {_cell(result.target)}", "", status, "",
             f"seed {result.seed}, {result.duration_s:.2f} s, device {result.options.get('device', 'cpu')}, "
             f"specials {result.options.get('specials', 'strict')}", "",
             result.fire_text,
             "", "| property | examples checked | result |", "| --- | ---: | --- |"]
    for name, checked, vs in rows:
        verdict = "FAIL" if _failed(result, name, vs) else "pass" if checked else "not checked"
        lines.append(f"| {_cell(name)} | {'-' if checked is None else checked} | {verdict} |")
    for v in result.violations:
        lines += ["", f"## {v.property}: {_cell(v.headline)}", "", _fence(v.message), "",
                  f"repro: `{v.repro_path}`" if v.repro_path else "repro: (none written)"]
        if v.inputs:
            lines += ["", "inputs:", "", _fence(v.inputs)]
        lines += ["", "graph before:", "", _fence(v.graph_before or "# (none)", "python"),
                  "", "graph after:", "", _fence(v.graph_after or "# (none)", "python")]
    return _x("\n".join(lines)) + "\n"  # no raw control characters (terminal escapes) either


def write_markdown(result, path) -> pathlib.Path:
    """Write ``render_markdown(result)`` to ``path`` atomically."""
    return _atomic_write(path, render_markdown(result))
