"""Source files: one code element per top-level definition, carrying its symbol and language."""

from __future__ import annotations

import pytest

from kbtui.extract import extract

PYTHON = '''"""Module docs."""
import os


# Cache the lookup.
@functools.cache
def resolve(name):
    return os.environ[name]


class Store:
    def get(self, key):
        def inner():
            pass
        return key


async def serve():
    pass
'''


def _symbols(source: str, fmt: str) -> list[str | None]:
    return [e.symbol for e in extract(source.encode(), fmt)]


def test_python_symbols_with_their_decorators_and_comments():
    elements = extract(PYTHON.encode(), "code:python")
    assert [e.symbol for e in elements] == [None, "resolve", "Store", "serve"]
    assert all(e.kind == "code" and e.language == "python" for e in elements)
    resolve = elements[1]
    assert resolve.text.startswith("# Cache the lookup.\n@functools.cache\ndef resolve")
    assert PYTHON[resolve.start:resolve.end] == resolve.text
    # Nested definitions stay inside their top-level one.
    assert "def inner" in elements[2].text


@pytest.mark.parametrize(
    ("fmt", "source", "expected"),
    [
        (
            "code:javascript",
            "import x from 'y';\n\nexport function load(a) {\n  return a;\n}\n\n"
            "export default class Cache {}\n\nconst handler = async (req) => {\n  return 1;\n};\n",
            [None, "load", "Cache", "handler"],
        ),
        (
            "code:typescript",
            "export interface Options {\n  size: number;\n}\n\nexport type Id = string;\n\n"
            "export const build = (o: Options): Id => {\n  return 'x';\n};\n",
            ["Options", "Id", "build"],
        ),
        (
            "code:go",
            "package main\n\n// Server serves.\ntype Server struct{}\n\n"
            "func (s *Server) Start() error {\n\treturn nil\n}\n\nfunc main() {\n}\n",
            [None, "Server", "Server.Start", "main"],
        ),
        (
            "code:rust",
            "use std::io;\n\n/// A point.\n#[derive(Debug)]\npub struct Point { x: i32 }\n\n"
            "impl Display for Point {\n}\n\npub(crate) async fn run() {}\n",
            [None, "Point", "Point", "run"],
        ),
        (
            "code:java",
            "package a;\n\nimport b.C;\n\n@Service\npublic final class Billing {\n  void charge() {}\n}\n",
            [None, "Billing"],
        ),
        (
            "code:c",
            "#include <stdio.h>\n\nstruct node {\n  int v;\n};\n\nint helper(int x);\n\n"
            "static int\nsum(int a,\n    int b)\n{\n  return a + b;\n}\n\nint main(void) {\n  if (x) {}\n}\n",
            [None, "node", "sum", "main"],
        ),
        (
            "code:cpp",
            "#include <vector>\n\nnamespace kb {\n}\n\ntemplate <typename T>\nclass Box {\n};\n\n"
            "void Box::open() const {\n}\n",
            [None, "kb", "Box", "Box::open"],
        ),
    ],
)
def test_top_level_symbols_per_language(fmt, source, expected):
    assert _symbols(source, fmt) == expected


def test_languages_without_symbol_rules_keep_their_language():
    [element] = extract(b"key: value\nlist:\n  - a\n", "code:yaml")
    assert (element.kind, element.language, element.symbol) == ("code", "yaml", None)


def test_a_forward_declaration_is_not_a_definition():
    assert _symbols("int helper(int x);\nstruct node;\n", "code:c") == [None]
