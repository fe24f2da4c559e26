"""Storage: SQLAlchemy 2 async over SQLite or PostgreSQL, migrated with Alembic."""
