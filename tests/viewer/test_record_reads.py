"""The viewer reads rollout records only through rollouts.record.Record: no `record["final"]`, no
`record.get("usage")`, no `final.get("grade")` of a record's final anywhere in viewer/.

The scan reads viewer/ with `ast`. A value is a record when its name says so (`record`, `rollout`, `finished`,
`*_record`, `record_*`), when it is an event's `["record"]`, a Record or a Record's JSON (`.data`), when it comes from the one door that loads a record
by id the old way (`load_record`, `records.get`), or when a name is assigned from one of these (or from a read of one: `final =
record.get("final") or {}` makes `final` a record's part). Any string-keyed subscript or `.get` on such a value is
a direct read. The made-up modules below show the scan finding each kind and leaving other dicts alone.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_RECORD_NAME = re.compile(r"^(record|rollout|finished)$|_record$|^record_|_rollout$")
_DOORS = ("load_record",)  # a call that hands back a record by id (viewer.records' `find` hands back a Found)


def _ident(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _keyed(node: ast.AST) -> tuple[ast.AST, str] | None:
    """(what is read, the key) of `x["key"]` or `x.get("key", ...)`."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.value, node.slice.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.func.value, node.args[0].value
    return None


def _is_door(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return _ident(func) in _DOORS or (isinstance(func, ast.Attribute) and func.attr == "get"
                                      and _ident(func.value) == "records")


class _Scope:
    def __init__(self, nodes: list[ast.AST]):
        self.nodes, self.records = nodes, set()
        for _ in range(3):  # names assigned from names assigned from a record
            for node in nodes:
                value = getattr(node, "value", None)
                if not isinstance(node, ast.Assign | ast.AnnAssign) or value is None:
                    continue
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    pairs = [(target, value)]
                    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
                            and len(target.elts) == len(value.elts):  # view, row = found.record, found.row
                        pairs = list(zip(target.elts, value.elts, strict=True))
                    elif isinstance(target, ast.Tuple) and _is_door(value):  # (record, index row)
                        pairs = [(target.elts[0], value)]
                    for name, source in pairs:
                        if self.is_record(source):
                            self.records.update(n.id for n in ast.walk(name) if isinstance(n, ast.Name))

    def is_record(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr == "data" and self.is_record(node.value):
            return True  # a Record's JSON: record.data["final"] is as direct as record["final"]
        if isinstance(node, ast.Call) and "Record" in ast.unparse(node.func):
            return True  # Record(...), Record.of(...), Record.from_events(...)
        if isinstance(node, ast.Name | ast.Attribute):
            name = _ident(node) or ""
            return bool(_RECORD_NAME.search(name)) or (isinstance(node, ast.Name) and name in self.records)
        if isinstance(node, ast.BoolOp):
            return any(self.is_record(v) for v in node.values)
        if isinstance(node, ast.IfExp):
            return self.is_record(node.body) or self.is_record(node.orelse)
        if isinstance(node, ast.Tuple):
            return any(self.is_record(e) for e in node.elts)
        if isinstance(node, ast.Call) and _ident(node.func) == "dict" and node.args:
            return self.is_record(node.args[0])
        if _is_door(node):
            return True
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) and _is_door(node.value):
            return True  # load_record(...)[0]: the record of (record, index row)
        keyed = _keyed(node)
        return keyed is not None and (keyed[1] == "record" or self.is_record(keyed[0]))

    def reads(self) -> list[ast.AST]:
        return [n for n in self.nodes if (k := _keyed(n)) is not None and k[1] != "record" and self.is_record(k[0])]


def _scopes(tree: ast.Module) -> list[list[ast.AST]]:
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)]
    inside = {id(n) for f in functions for n in ast.walk(f)}
    return [list(ast.walk(f)) for f in functions] + [[n for n in ast.walk(tree) if id(n) not in inside]]


def direct_reads(source: str, name: str = "<module>") -> list[str]:
    """Every direct read of a record's field in `source`, as `name:line: code`."""
    tree = ast.parse(source)
    found = {(n.lineno, ast.unparse(n)) for scope in _scopes(tree) for n in _Scope(scope).reads()}
    return [f"{name}:{line}: {code}" for line, code in sorted(found)]


def viewer_reads() -> list[str]:
    return [read for path in sorted((ROOT / "viewer").rglob("*.py"))
            for read in direct_reads(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]


def test_the_viewer_reads_records_only_through_record():
    reads = viewer_reads()
    assert not reads, "read these through rollouts.record.Record:\n" + "\n".join(reads)


def test_each_kind_of_direct_read_is_found():
    module = textwrap.dedent('''
        def header(record, event, ctx):
            a = record.get("model")
            b = record["final"]["grade"]
            final = record.get("final") or {}
            cost = final.get("grade")
            done = event["record"]["end_reason"]
            other = ctx.load_record("x")
            turns = other["turns"]
            left, row = ctx.records.get("y")
            picked = ctx.records.get("z")[0] if left else None
            return (left.get("usage"), self.record.get("steps"), run.record["messages"], row.get("source"),
                    picked.get("task_id"))

        def finished_line(finished, events, found):
            view = Record.of(finished)
            return (finished.get("reward"), view.data["final"], Record.from_events(events).data.get("usage"),
                    found.record.data["steps"])
    ''')
    found = {read.split(": ", 1)[1] for read in direct_reads(module)}
    assert found == {"record.get('model')", "record['final']['grade']", "record['final']", "record.get('final')",
                     "final.get('grade')", "event['record']['end_reason']", "other['turns']", "left.get('usage')",
                     "self.record.get('steps')", "run.record['messages']", "finished.get('reward')",
                     "picked.get('task_id')", "view.data['final']", "Record.from_events(events).data.get('usage')",
                     "found.record.data['steps']"}


def test_other_dicts_and_the_record_itself_are_not_reads():
    module = textwrap.dedent('''
        def fine(event, row, task, ctx):
            view = Record(event["record"])
            grade = view.grade
            return (event.get("turn"), row["model"], task.get("ships"), view.model, grade.get("cost"),
                    ctx.load_record("x").reward)
    ''')
    assert direct_reads(module) == []
