"""Architecture rules, read from the source with ``ast``: no import cycle inside ``lmk_rag`` (imports inside
functions and under ``TYPE_CHECKING`` count), trainers never import the eval harness, the Qdrant bindings
stay in their backend modules, and the public names are the list docs/architecture.md freezes, the only lmk_rag
names the LlamaIndex adapters import."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Every module of a package: dotted name -> file; a package is its ``__init__.py``.

    :param root: the folder holding the package folder.
    :param package: the top-level package name.
    """
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imported_names(name: str, path: Path) -> set[str]:
    """The absolute dotted names a module imports anywhere in its file: ``import X`` gives ``X`` and
    ``from X import Y`` gives ``X.Y`` (a module or a name defined in ``X``).

    :param name: the module's dotted name (relative imports are resolved against it).
    :param path: its file.
    """
    names = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".") if node.module else []
            if node.level:
                anchor = name.split(".")
                parts = anchor[: len(anchor) - node.level + (1 if is_package else 0)] + parts
            names.update(".".join([*parts, alias.name]) for alias in node.names)
    return names


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Which package modules each module imports: a dotted name resolves to the deepest module it names, so
    ``from X import Y`` points at module ``X.Y`` when there is one and at ``X`` (a package's ``__init__``)
    when ``Y`` is a name defined there.

    :param modules: the package's modules (from :func:`module_files`).
    """
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported in imported_names(name, path):
            parts = imported.split(".")
            while parts and ".".join(parts) not in modules:
                parts.pop()
            if parts and ".".join(parts) != name:
                targets.add(".".join(parts))
        graph[name] = targets
    return graph


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """A cycle of a directed graph by depth-first search, as a path that ends where it starts; None if acyclic.

    :param graph: node -> the nodes it points to.
    """
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for target in sorted(graph.get(node, ())):
            if target in on_path:
                return [*path[path.index(target):], target]
            if target not in done:
                cycle = visit(target)
                if cycle is not None:
                    return cycle
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done:
            cycle = visit(start)
            if cycle is not None:
                return cycle
    return None


def importers(modules: Mapping[str, Path], top_level: str) -> set[str]:
    """The files (relative to the repository) that import ``top_level`` or one of its submodules.

    :param modules: the package's modules.
    :param top_level: a top-level module name, e.g. ``qdrant_client``.
    """
    return {
        path.relative_to(ROOT).as_posix()
        for name, path in modules.items()
        if any(imported.split(".")[0] == top_level for imported in imported_names(name, path))
    }


def _write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)


def test_the_checker_finds_a_cycle_through_a_function_level_import(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "from pkg.a import run\n",
        "pkg/a.py": "def run():\n    from pkg.sub import b\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/b.py": "from ..a import run\n",
        "pkg/c.py": "import pkg.sub.b\n",
    })
    graph = import_graph(module_files(tmp_path, "pkg"))
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.sub.b"}, "pkg.sub": set(), "pkg.sub.b": {"pkg.a"},
                     "pkg.c": {"pkg.sub.b"}}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.a"]


def test_the_checker_resolves_a_package_to_its_init(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "def register():\n    from pkg import commands\n\napp = object()\n",
        "pkg/commands.py": "from pkg import app\n",
    })
    graph = import_graph(module_files(tmp_path, "pkg"))
    assert find_cycle(graph) == ["pkg", "pkg.commands", "pkg"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_lmk_rag_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph(module_files(ROOT, "lmk_rag")))
    assert cycle is None, "import cycle in lmk_rag: " + " -> ".join(cycle or [])


def test_trainers_never_import_the_eval_harness_and_eval_imports_no_torch_part_of_static() -> None:
    graph = import_graph(module_files(ROOT, "lmk_rag"))
    trainers = [name for name in graph if name.startswith(("lmk_rag.static", "lmk_rag.train"))]
    into_eval = sorted((name, target) for name in trainers for target in graph[name]
                       if target.startswith("lmk_rag.eval"))
    assert not into_eval, f"trainers (static, train) import the eval harness: {into_eval}"
    torch_parts = {"lmk_rag.static.mixer_torch", "lmk_rag.static.train"}
    into_torch = sorted((name, target) for name in graph if name.startswith("lmk_rag.eval")
                        for target in graph[name] if target in torch_parts)
    assert not into_torch, f"the eval harness imports torch modules of lmk_rag.static: {into_torch}"


def test_qdrant_bindings_stay_in_their_backend_modules() -> None:
    modules = module_files(ROOT, "lmk_rag")
    edge, client = importers(modules, "qdrant_edge"), importers(modules, "qdrant_client")
    assert not edge & client, f"modules importing both qdrant_edge and qdrant_client: {sorted(edge & client)}"
    # The store refactor of issue #14 keeps the Edge bindings in these two files and qdrant-client in the backend:
    # edge.py for the engine, bm25.py (in vectors.py from issue 45 to issue 62) for Qdrant's BM25 model alone,
    # imported inside its functions; filters.py reads qdrant-client's filter models alone (Filter.from_qdrant), inside
    # its function.
    assert edge <= {"lmk_rag/store/edge.py", "lmk_rag/store/bm25.py"}, (
        f"only lmk_rag/store/edge.py and lmk_rag/store/bm25.py may import qdrant_edge; found in {sorted(edge)}"
    )
    assert client <= {"lmk_rag/store/server.py", "lmk_rag/store/filters.py"}, (
        f"only lmk_rag/store/server.py and filters.py may import qdrant_client; found in {sorted(client)}"
    )


def store_class_bases(root: Path) -> dict[str, set[str]]:
    """Each class defined in ``lmk_rag/store``, with the names of its bases that are classes defined there too."""
    defined: dict[str, list[str]] = {}
    for path in sorted((root / "lmk_rag" / "store").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
            if isinstance(node, ast.ClassDef):
                defined[node.name] = [base.id for base in node.bases if isinstance(base, ast.Name)]
    return {name: {base for base in bases if base in defined} for name, bases in defined.items()}


def test_store_classes_compose_and_only_backends_inherit() -> None:
    """The store is built by composition: no store class inherits another store class but the backend ABC."""
    inheriting = {name: bases for name, bases in store_class_bases(ROOT).items() if bases - {"Backend"}}
    assert not inheriting, f"store classes inheriting store classes: {inheriting}"
    assert {name for name, bases in store_class_bases(ROOT).items() if bases == {"Backend"}} == {
        "EdgeBackend", "CopyBackend", "ServerBackend"}


PUBLIC_PACKAGES = ("lmk_rag", "lmk_rag.store", "lmk_rag.static", "lmk_rag.errors", "lmk_rag.adapters")


def frozen_public_names(architecture: Path) -> dict[str, list[str]]:
    """The public names each package exports, as docs/architecture.md freezes them ("Public names": one bullet per
    package, ``- `package`: `name`, `name`, ...``, continued on indented lines).

    :param architecture: the architecture document.
    """
    section = architecture.read_text(encoding="utf-8").split("\n## Public names\n", 1)[1].split("\n## ", 1)[0]
    names = {}
    for bullet in section.split("\n- ")[1:]:
        package, listed = bullet.split(":", 1)
        names[package.strip("`")] = re.findall(r"`([^`]+)`", listed)
    return names


def private_lmk_rag_imports(root: Path, public: Mapping[str, Sequence[str]]) -> list[str]:
    """The lmk_rag names the LlamaIndex adapters under ``root`` import that are not public: each as
    ``file: dotted name``. A public name is ``package.name`` with ``name`` in ``public[package]``.

    :param root: the folder holding the adapter distributions (``integrations/``).
    :param public: package -> the names it exports.
    """
    found = []
    for distribution in sorted(path for path in root.iterdir() if (path / "llama_index").is_dir()):
        for name, path in module_files(distribution, "llama_index").items():
            for imported in sorted(imported_names(name, path)):
                package, _, last = imported.rpartition(".")
                if imported.split(".")[0] == "lmk_rag" and last not in public.get(package, ()):
                    found.append(f"{path.relative_to(root).as_posix()}: {imported}")
    return found


def test_the_checker_finds_an_adapter_importing_a_private_name(tmp_path: Path) -> None:
    _write(tmp_path, {
        "llama-index-x/llama_index/x/base.py": (
            "from lmk_rag.store import Hit\nfrom lmk_rag.store.ingest import clean\nimport lmk_rag.checks\n\n"
            "def f():\n    from lmk_rag import group_chunks\n"
        ),
    })
    assert private_lmk_rag_imports(tmp_path, {"lmk_rag": ["group_chunks"], "lmk_rag.store": ["Hit"]}) == [
        "llama-index-x/llama_index/x/base.py: lmk_rag.checks",
        "llama-index-x/llama_index/x/base.py: lmk_rag.store.ingest.clean",
    ]


def test_public_names_are_the_frozen_list_and_the_adapters_import_only_them() -> None:
    frozen = frozen_public_names(ROOT / "docs" / "architecture.md")
    assert sorted(frozen) == sorted(PUBLIC_PACKAGES)
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        assert sorted(module.__all__) == sorted(frozen[package]), (
            f"{package}.__all__ differs from the public names in docs/architecture.md: change both, and CHANGELOG.md"
        )
        assert all(hasattr(module, name) for name in module.__all__), f"{package}.__all__ names a missing name"
    private = private_lmk_rag_imports(ROOT / "integrations", frozen)
    assert not private, f"integrations/ imports lmk_rag names that are not public (docs/architecture.md): {private}"


#: What benchmarks/ (the product benchmarks, the quality report, the studies, the stock LlamaIndex pipelines) may
#: import from lmk_rag: the names in these modules' ``__all__`` (docs/architecture.md, "What benchmarks/ may import").
RESEARCH_MODULES = (*PUBLIC_PACKAGES, "lmk_rag.encoder", "lmk_rag.train", "lmk_rag.eval", "lmk_rag.cli",
                    "lmk_rag.research")


def internal_lmk_rag_imports(root: Path, public: Mapping[str, Sequence[str]]) -> list[str]:
    """The lmk_rag imports of every Python file under ``root`` that are neither a listed module nor a name in its
    list: each as ``file: dotted name``.

    :param root: a folder of scripts (``benchmarks/``).
    :param public: module -> the names it exports.
    """
    found = []
    # not in hidden folders: benchmarks/st_baselines/.venv (build_venv.sh) holds a whole environment
    for path in sorted(path for path in root.rglob("*.py") if not any(part.startswith(".") for part in
                                                                    path.relative_to(root).parts)):
        name = ".".join(path.relative_to(root).with_suffix("").parts)
        for imported in sorted(imported_names(name, path)):
            package, _, last = imported.rpartition(".")
            if imported.split(".")[0] == "lmk_rag" and imported not in public and last not in public.get(package, ()):
                found.append(f"{path.relative_to(root).as_posix()}: {imported}")
    return found


def test_the_checker_finds_a_script_importing_an_internal_name(tmp_path: Path) -> None:
    _write(tmp_path, {
        "report.py": "import lmk_rag.cli\nfrom lmk_rag.eval import evaluate\nfrom lmk_rag.eval.cache import x\n",
        "studies/common.py": (
            "def f():\n    from lmk_rag.store.query import fuse\n    from lmk_rag.research import fuse\n"),
    })
    public = {"lmk_rag.cli": ["app"], "lmk_rag.eval": ["evaluate"], "lmk_rag.research": ["fuse"]}
    assert internal_lmk_rag_imports(tmp_path, public) == [
        "report.py: lmk_rag.eval.cache.x", "studies/common.py: lmk_rag.store.query.fuse"]


def test_benchmarks_import_only_the_declared_research_surface() -> None:
    """benchmarks/ measures the product through public names and the one research module, so the product can
    change inside without breaking a study; the modules are the list docs/architecture.md declares."""
    section = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").split(
        "\n## What benchmarks/ may import\n", 1)[1].split("\n## ", 1)[0]
    assert sorted(re.findall(r"^- `([\w.]+)`", section, flags=re.MULTILINE)) == sorted(RESEARCH_MODULES)
    public = {module: importlib.import_module(module).__all__ for module in RESEARCH_MODULES}
    for module, names in public.items():
        assert all(hasattr(importlib.import_module(module), name) for name in names), module
    internal = internal_lmk_rag_imports(ROOT / "benchmarks", public)
    assert not internal, f"benchmarks/ imports lmk_rag names outside the research surface: {internal}"


def test_nothing_in_the_package_imports_llamaindex() -> None:
    """LlamaIndex is the integrations' (integrations/) and the stock baselines' (benchmarks/stock_pipelines.py)
    dependency, never the package's: no module of lmk_rag imports it, even inside a function."""
    modules = module_files(ROOT, "lmk_rag")
    assert importers(modules, "llama_index") == set()
