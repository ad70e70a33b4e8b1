"""The slot-map dashboard: FastAPI + Jinja2 pages, a JSON API and Prometheus metrics over the manager's tables."""
