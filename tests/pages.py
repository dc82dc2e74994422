"""Opening a written page in the system Chromium at the book's two sizes (tools/site_check.VIEWPORTS).

The class report and feedback page tests share it; the site check itself launches Chromium the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tools import site_check


@contextmanager
def chromium() -> Iterator[object]:
    """Playwright's Chromium from ``site_check.find_browser``; skips the test where there is none (the
    site check, which CI runs, fails loudly instead)."""
    browser = site_check.find_browser()
    if browser is None:
        pytest.skip("no Chromium ($CHROMIUM, /usr/bin/chromium): the site check fails loudly instead")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=browser, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield launched
        finally:
            launched.close()


def at_both_widths(path: Path, check: Callable[[object, str, int], None], shots: Path | None = None) -> None:
    """Opens ``path`` at the desktop and the phone size and calls ``check(page, viewport, width)``; fails on
    a script error or a page that scrolls sideways."""
    with chromium() as browser:
        for viewport, (width, height) in site_check.VIEWPORTS.items():
            phone = viewport == "phone"
            context = browser.new_context(
                viewport={"width": width, "height": height}, is_mobile=phone, has_touch=phone
            )
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
            context.close()
