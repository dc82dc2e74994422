"""The project's tools: CI checks (`notebooks`, `site_check`, `learner_path`, run as scripts from the
Makefile) and the book build's Sphinx extensions (`execution_cache`, `chapter_sources`, `api_links`).

Importable as a package from the repository root (`from tools import notebooks`); each script also
runs as `python tools/<name>.py`.
"""
