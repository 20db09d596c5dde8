"""A small shop that submits its jobs in the same transaction as its orders (the recipes of
README's "From Python")."""
