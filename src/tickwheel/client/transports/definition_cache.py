"""The submit path's definition cache now lives with the rules that use it
(``tickwheel.app.definition_cache``); this name stays for code that imported it here."""

from tickwheel.app.definition_cache import MAX_ENTRIES, TTL, DefinitionCache, definition_cache

__all__ = ["MAX_ENTRIES", "TTL", "DefinitionCache", "definition_cache"]
