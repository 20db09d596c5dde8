"""Everything that speaks SQL. Layers above see only ``store.protocol.Store``."""
