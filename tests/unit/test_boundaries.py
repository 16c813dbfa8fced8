"""The engine stays pure: no Kubernetes client, kopf or asyncio anywhere in it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "caldera"
ENGINE = ("api", "framework", "actions", "plugins", "cache", "models", "simulate", "devices")
FORBIDDEN = ("kopf", "kubernetes_asyncio", "asyncio", "aiohttp")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("part", ENGINE)
def test_engine_modules_import_no_io_library(part: str) -> None:
    files = sorted((PACKAGE / part).rglob("*.py"))
    assert files, f"no modules found under {part}"
    offenders = {
        str(f.relative_to(PACKAGE)): sorted(_imports(f) & set(FORBIDDEN))
        for f in files
        if _imports(f) & set(FORBIDDEN)
    }
    assert offenders == {}


def test_operator_directory_is_not_a_package() -> None:
    assert not (PACKAGE.parent / "__init__.py").exists()


def test_every_module_says_why_it_exists() -> None:
    missing = [
        str(f.relative_to(PACKAGE))
        for f in sorted(PACKAGE.rglob("*.py"))
        if not ast.get_docstring(ast.parse(f.read_text(encoding="utf-8")))
    ]
    assert missing == []
