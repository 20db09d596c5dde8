"""Issue 15's guard rail for the Cron Service: no module of ``tickwheel.cron`` imports, through
any chain, a module that imports it back. ``cron/apply.py`` (now ``app/cron_apply.py``) and
``cron/manual.py`` once reached ``cron/jobs.py`` (under ``TYPE_CHECKING``) while ``jobs.py``
imported them inside its methods; a lazy or type-only import is still an import, so the graph
counts them (grimp's default)."""

from __future__ import annotations

import grimp


def test_no_module_of_the_cron_service_is_part_of_an_import_cycle() -> None:
    graph = grimp.build_graph("tickwheel")
    cycles = []
    for module in sorted(m for m in graph.modules if m.startswith("tickwheel.cron")):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported.startswith("tickwheel.") and graph.chain_exists(
                importer=imported, imported=module
            ):
                chain = graph.find_shortest_chain(importer=imported, imported=module) or ()
                cycles.append(" -> ".join((module, *chain)))
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)
