"""A real headless Chromium for the HTML report tests (selenium, the Debian chromium and chromium-driver).

`make browser` installs the browser (scripts/install_browser.sh, as root); `make test` never does: where it is
missing, the browser tests skip with the reason `missing()` gives. Selenium is always given the driver and the
browser's paths, so selenium-manager never tries to download anything (the test machines have no network).
"""
from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = os.environ.get("KERNLINT_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("KERNLINT_CHROMEDRIVER", "/usr/bin/chromedriver")
WINDOW = (1400, 1000)

# Runs before any script of every page (CDP, so the page's own CSP does not apply to it): records CSP
# violations and uncaught errors, which a page could otherwise swallow without a console line.
_WATCH = """
window.__klViolations = [];
window.__klErrors = [];
document.addEventListener('securitypolicyviolation', function (e) {
  window.__klViolations.push(e.violatedDirective + ' blocked ' + (e.blockedURI || 'inline') +
                             ' at line ' + e.lineNumber);
});
window.addEventListener('error', function (e) { window.__klErrors.push(String(e.message)); });
"""


def missing() -> str | None:
    """Why the browser cannot start here, or None."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not (Path(path).is_file() and os.access(path, os.X_OK)):
            return (f"{path} is missing: run `make browser` (as root: apt-get installs {package}), "
                    "or point KERNLINT_CHROMIUM and KERNLINT_CHROMEDRIVER at your own")
    return None


@dataclass
class Problems:
    """What went wrong on a page: SEVERE console lines, CSP violations, uncaught errors."""

    console: list[str]
    violations: list[str]
    errors: list[str]

    def __bool__(self) -> bool:
        return bool(self.console or self.violations or self.errors)


class Browser:
    """One headless Chromium session; open() loads a local file and returns the page's problems."""

    def __init__(self):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        why = missing()
        if why:
            raise RuntimeError(why)
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    f"--window-size={WINDOW[0]},{WINDOW[1]}", "--hide-scrollbars", "--force-device-scale-factor=1",
                    "--no-first-run", "--disable-extensions", "--disable-background-networking"):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        # Chromium's own output goes nowhere; a failure to start still raises with chromedriver's message.
        service = Service(executable_path=CHROMEDRIVER, log_output=os.devnull)
        self.driver = webdriver.Chrome(service=service, options=options)
        self.driver.set_window_size(*WINDOW)
        # The viewport itself at WINDOW (the window size includes the browser's frame): stable screenshots.
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                    {"width": WINDOW[0], "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False})
        self.driver.set_page_load_timeout(60)
        self.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _WATCH})

    def open(self, path: Path) -> Problems:
        """Load a local file and wait for it; the problems are the ones of this page only."""
        self.driver.get_log("browser")  # drain what earlier pages logged
        self.driver.get("about:blank")
        self.driver.get(Path(path).resolve().as_uri())
        self.driver.execute_script("return document.readyState")
        return self.problems()

    def problems(self) -> Problems:
        """Problems since the last call (the console log is drained; the page's lists are cumulative)."""
        console = [f"{e.get('source')}: {e.get('message')}" for e in self.driver.get_log("browser")
                   if e.get("level") == "SEVERE"]
        watched = self.driver.execute_script(
            "return [window.__klViolations || [], window.__klErrors || []]")
        return Problems(console, list(watched[0]), list(watched[1]))

    def css(self, selector: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def box(self, element) -> tuple[float, float]:
        """Rendered width and height of an element (works for SVG shapes too), after scrolling to it."""
        return tuple(self.driver.execute_script(
            "arguments[0].scrollIntoView({block: 'center'});"
            "var r = arguments[0].getBoundingClientRect(); return [r.width, r.height];", element))

    def text_content(self, element) -> str:
        """All the text of an element, collapsed parts (<details>) included."""
        return self.driver.execute_script("return arguments[0].textContent", element) or ""

    def visible_text(self) -> str:
        return self.driver.execute_script("return document.body ? document.body.innerText : ''") or ""

    def screenshot(self) -> Screenshot:
        self.driver.execute_script("window.scrollTo(0, 0)")
        return Screenshot.from_png(self.driver.get_screenshot_as_png())

    def close(self):
        self.driver.quit()


@dataclass
class Screenshot:
    width: int
    height: int
    colours: int          # distinct RGB colours
    ink: float            # fraction of pixels that differ from the most common (background) colour

    @classmethod
    def from_png(cls, png: bytes) -> Screenshot:
        from PIL import Image

        image = Image.open(io.BytesIO(png)).convert("RGB")
        counts = image.getcolors(maxcolors=image.width * image.height)
        background = max(counts)[0]
        total = image.width * image.height
        return cls(image.width, image.height, len(counts), 1 - background / total)

    def blank(self, min_colours: int = 16, min_ink: float = 0.01) -> bool:
        """A page that rendered nothing (or a single flat colour, or a line of text) counts as blank."""
        return self.colours < min_colours or self.ink < min_ink


def opened(browser: Browser, path) -> Browser:
    """Open a report; any console error, CSP violation or uncaught exception fails the test."""
    problems = browser.open(path)
    assert not problems, f"{path.name}: {problems}"
    return browser
