"""The source of Letta's `run_code` and `run_code_with_tools` (letta/functions/function_sets/builtin.py) as they run
here: stored as these built-in tools' source and executed in the tool sandbox like any custom tool, never imported
by the server. Answers keep Letta's shapes (letta/services/tool_executor/builtin_tool_executor.py): run_code's
`{"results", "logs": {"stdout", "stderr"}, "error"?}`, run_code_with_tools' `{"status", "func_return", "stdout",
"stderr"}`. Python runs in the sandbox's own interpreter, with the value of a last bare expression as the result (as
a notebook cell); JavaScript runs on `node` when the sandbox has it; TypeScript, R and Java are not installed here.
"""

import ast
import contextlib
import io
import json
import shutil
import subprocess
import traceback

_OTHER_LANGUAGES = {"js": ["node", "-e"]}
_TIMEOUT_S = 60


def _agent_tool_sources(agent_state) -> str:
    """The agent's custom tools' source (the sandbox gives it as agent_state.tools), so the code can call them by
    name, as Letta prepends them."""
    tools = getattr(agent_state, "tools", None) or []
    return "".join(t["source_code"] + "\n\n" for t in tools if isinstance(t, dict) and t.get("source_code"))


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _run_python(code: str) -> dict:
    out, err = io.StringIO(), io.StringIO()
    results, error = [], None
    scope = {"__name__": "__main__"}
    try:
        tree = ast.parse(code)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            exec(compile(tree, "<code>", "exec"), scope)  # noqa: S102 - running the agent's code is this tool's job
            if last is not None:
                value = eval(compile(ast.Expression(last.value), "<code>", "eval"), scope)  # noqa: S307
                if value is not None:
                    results.append(repr(value))
    except Exception as exc:  # noqa: BLE001 - the code's own error is its answer
        error = {"name": type(exc).__name__, "value": str(exc), "traceback": traceback.format_exc()}
    doc = {"results": results, "logs": {"stdout": _lines(out.getvalue()), "stderr": _lines(err.getvalue())}}
    if error is not None:
        doc["error"] = error
    return doc


def _run_other(code: str, language: str) -> dict:
    command = _OTHER_LANGUAGES.get(language)
    if command is None or shutil.which(command[0]) is None:
        message = f"{language} is not installed in this sandbox; run_code runs python here, and js where node is"
        return {"results": [], "logs": {"stdout": [], "stderr": []}, "error": {"name": "Unsupported", "value": message}}
    try:
        done = subprocess.run([*command, code], capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)  # noqa: S603
    except subprocess.TimeoutExpired:
        error = {"name": "Timeout", "value": f"the code ran longer than {_TIMEOUT_S} s"}
        return {"results": [], "logs": {"stdout": [], "stderr": []}, "error": error}
    doc = {"results": [], "logs": {"stdout": _lines(done.stdout), "stderr": _lines(done.stderr)}}
    if done.returncode != 0:
        doc["error"] = {"name": "ExitCode", "value": f"exited with status {done.returncode}"}
    return doc


def run_code(code: str, language: str, agent_state=None) -> str:
    """
    Run code in a sandbox. Supports Python, Javascript, Typescript, R, and Java.

    Args:
        code (str): The code to run.
        language (str): The language of the code.
    Returns:
        str: The output of the code, the stdout, the stderr, and error traces (if any).
    """
    if language == "python":
        return json.dumps(_run_python(_agent_tool_sources(agent_state) + code), ensure_ascii=False)
    return json.dumps(_run_other(code, language), ensure_ascii=False)


def run_code_with_tools(code: str, agent_state=None) -> str:
    """
    Run code with access to the tools of the agent. Only support python. You can directly invoke the tools of the agent in the code.
    Args:
        code (str): The python code to run.
    Returns:
        str: The output of the code, the stdout, the stderr, and error traces (if any).
    """
    doc = _run_python(_agent_tool_sources(agent_state) + code)
    error = doc.get("error")
    if doc["results"]:
        func_return = doc["results"][0]
    elif error is not None:
        func_return = f"{error['name']}: {error['value']}"
        doc["logs"]["stderr"].append(error["traceback"])
    else:
        func_return = None
    return json.dumps(
        {
            "status": "error" if error is not None else "success",
            "func_return": func_return,
            "stdout": doc["logs"]["stdout"],
            "stderr": doc["logs"]["stderr"],
        },
        ensure_ascii=False,
    )
