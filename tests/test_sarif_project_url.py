"""SARIF's links to the project (issue 41): `informationUri` and each shipped rule's `helpUri` come from the
installed package's metadata (pyproject's [project.urls], kernlint.report.sarif_format.project_url); with no
URL set (pyproject ships none: whoever publishes fills it) both are left out, never a placeholder. The wheel
side (a real install's metadata) is in tests/test_wheel_install.py."""
from __future__ import annotations

import importlib.metadata
import tomllib

import pytest

from conftest import REPO
from kernlint.report import sarif_format
from test_sarif_junit import ONLY_KL001, REGRESSED, sarif_of


@pytest.fixture
def project_urls(monkeypatch):
    """Set the Project-URL lines the installed kernlint's metadata holds (the cached URL read again)."""
    real = importlib.metadata.metadata

    def use(*lines: str) -> None:
        class Metadata:
            def get_all(self, key, failobj=None):
                return list(lines) if key == "Project-URL" and lines else failobj

        monkeypatch.setattr(importlib.metadata, "metadata",
                            lambda name: Metadata() if name == "kernlint" else real(name))
        sarif_format.project_url.cache_clear()

    yield use
    monkeypatch.undo()
    sarif_format.project_url.cache_clear()


def _driver(log: dict) -> dict:
    return log["runs"][0]["tool"]["driver"]


def test_the_project_url_from_the_metadata_is_the_information_and_help_uri(project_urls):
    project_urls("Issues, https://example.org/kl/issues", "Homepage, https://example.org/kl")
    _, log = sarif_of(REGRESSED, *ONLY_KL001, "--isolated")   # valid against the SARIF schema
    driver = _driver(log)
    assert driver["informationUri"] == "https://example.org/kl"
    assert driver["rules"] and all(r["helpUri"] == f"https://example.org/kl/blob/main/docs/rules/{r['id']}.md"
                                   for r in driver["rules"])


def test_repository_serves_when_there_is_no_homepage_and_a_url_that_is_not_https_is_not_used(project_urls):
    project_urls("Homepage, http://example.org/kl", "Repository, https://git.example.org/kl/")
    assert sarif_format.project_url() == "https://git.example.org/kl/"
    rules = _driver(sarif_of(REGRESSED, *ONLY_KL001, "--isolated")[1])["rules"]
    assert all(r["helpUri"] == f"https://git.example.org/kl/blob/main/docs/rules/{r['id']}.md" for r in rules)


@pytest.mark.parametrize("lines", [(), ("Issues, https://example.org/kl/issues",), ("Homepage, ftp://example.org",)])
def test_without_a_project_url_sarif_leaves_both_uris_out(project_urls, lines):
    project_urls(*lines)
    _, log = sarif_of(REGRESSED, *ONLY_KL001, "--isolated")
    driver = _driver(log)
    assert "informationUri" not in driver
    assert driver["rules"] and not any("helpUri" in r for r in driver["rules"])
    assert "your-org" not in str(log)


def test_without_an_installed_kernlint_sarif_leaves_both_uris_out(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "metadata", missing)
    sarif_format.project_url.cache_clear()
    try:
        assert sarif_format.project_url() is None
    finally:
        monkeypatch.undo()
        sarif_format.project_url.cache_clear()


def test_pyproject_ships_no_placeholder_project_url():
    """[project.urls] is there for whoever publishes kernlint to fill; until then it holds nothing."""
    text = (REPO / "pyproject.toml").read_text()
    urls = tomllib.loads(text)["project"].get("urls", {})
    assert not [u for u in urls.values() if "your-org" in u or "OWNER" in u or "example" in u], urls
    assert "your-org" not in text
