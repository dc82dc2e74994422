"""Opening a written page in the system Chromium at the book's two sizes (tools/site_check.VIEWPORTS).

The class report, feedback page, table and site check tests share one Chromium per test process
(``in_chromium``): launched at its first use, closed when the session ends (tests/conftest.py), each
page in a context of its own that is closed however its test ends. A launch, with Playwright's driver,
costs about a second of CPU, and these tests launched one or two apiece (about 23 in all). The site
check's own launch path (a Chromium per viewport) keeps one test of its own in tests/test_site_check.py.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tools import site_check


class _Chromium:
    """A launched Chromium and the one thread that drives it. Playwright's sync API belongs to the thread
    that started it, and while it is started it marks that thread's asyncio loop as running: kept in the
    tests' own thread, it would break every later test that runs an event loop (nbclient's, grading in
    this process)."""

    def __init__(self, path: str):
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chromium")
        self.playwright: Any = None
        self.browser: Any = None
        try:
            self.thread.submit(self._start, path).result()
        except BaseException:
            self.close()
            raise

    def _start(self, path: str) -> None:
        from playwright.sync_api import sync_playwright

        self.playwright = sync_playwright().start()
        self.browser = site_check.launch(self.playwright, path)

    def alive(self) -> bool:
        """Whether its Chromium still answers (a crashed one is launched again, not reused)."""
        return self.browser is not None and self.thread.submit(self.browser.is_connected).result()

    def run[T](self, fn: Callable[[Any], T]) -> T:
        """``fn(browser)`` in the thread that drives it: its value, or its exception raised here."""
        return self.thread.submit(fn, self.browser).result()

    def close(self) -> None:
        """Closes the browser and Playwright's driver, then the thread."""

        def stop() -> None:
            try:
                if self.browser is not None:
                    self.browser.close()
            finally:
                if self.playwright is not None:
                    self.playwright.stop()

        try:
            self.thread.submit(stop).result()
        finally:
            self.thread.shutdown()


_shared: dict[str, _Chromium] = {}  # this process's Chromium, once a test asked for it


def in_chromium[T](fn: Callable[[Any], T]) -> T:
    """``fn(browser)`` with this test process's Chromium (Playwright's sync ``Browser``), launched at the
    first call, run in the thread that drives it; its value, or its exception. Skips the test where there
    is no Chromium (the site check, which CI runs, fails loudly instead)."""
    path = site_check.find_browser()
    if path is None:
        pytest.skip("no Chromium ($CHROMIUM, /usr/bin/chromium): the site check fails loudly instead")
    chromium = _shared.get("chromium")
    if chromium is None or not chromium.alive():
        close_chromium()
        chromium = _shared["chromium"] = _Chromium(path)
    return chromium.run(fn)


def close_chromium() -> None:
    """Closes this process's Chromium, if a test launched one (at the end of the session)."""
    if (chromium := _shared.pop("chromium", None)) is not None:
        chromium.close()


def at_both_widths(
    path: Path,
    check: Callable[[Any, str, int], None],
    shots: Path | None = None,
    console: list[str] | None = None,
) -> None:
    """Opens ``path`` at the desktop and the phone size and calls ``check(page, viewport, width)``; fails on
    a script error or a page that scrolls sideways. ``console``: gets every message Chromium's console
    printed."""

    def at_both(browser) -> None:
        for viewport, (width, height) in site_check.VIEWPORTS.items():
            phone = viewport == "phone"
            context = browser.new_context(
                viewport={"width": width, "height": height}, is_mobile=phone, has_touch=phone
            )
            try:
                if console is not None:
                    context.on("console", lambda message: console.append(message.text))
                page = context.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.goto(path.as_uri(), wait_until="load")
                check(page, viewport, width)
                overflow = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
                assert overflow <= 0, (viewport, f"the page scrolls sideways by {overflow} px")
                if shots is not None:
                    page.screenshot(path=shots / f"{path.stem}--{viewport}.png", full_page=True)
                assert errors == [], errors
            finally:
                context.close()

    in_chromium(at_both)


def shared_browser_check(*args: Any, **kwargs: Any) -> list[site_check.PageResult]:
    """``site_check.browser_check`` with the same arguments, in this process's Chromium (its viewports one
    after the other, each in a context of its own) instead of a Chromium per viewport."""
    return in_chromium(lambda browser: site_check.browser_check(*args, **kwargs | {"browser": browser}))
