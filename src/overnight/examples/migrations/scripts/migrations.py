"""The example's migrations: what each one writes into schema/."""

MIGRATIONS = {
    "0001": "CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT NOT NULL);\n",
    "0002": "CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, total_cents INTEGER);\n",
    "0003": "CREATE INDEX orders_by_user ON orders(user_id);\n",
    "0004": "CREATE TABLE search_events (id INTEGER PRIMARY KEY, created_at TEXT);\n",
}
