"""The documentation site builds: ``mkdocs build --strict`` over mkdocs.yml (Material theme).

Strict mode fails on any broken link, missing anchor or page named in the nav that does not
exist, so this also checks that every results file the pages link to has been written (by
``topicir reproduce NAME --write`` / ``topicir bench AREA --write``).
"""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("mkdocs")
pytest.importorskip("material")


def test_mkdocs_build_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    warnings = [line for line in proc.stderr.splitlines() if "WARNING" in line]
    assert proc.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(warnings or [proc.stderr[-3000:]])
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "models" / "lda" / "index.html").exists()
    # the home page is README.md, its links to docs/ pages rewritten to the site's pages
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for heading in re.findall(r"^## (.+)$", readme, re.M):
        assert f">{heading}<" in home, f"README's section {heading!r} is not on the home page"
    assert 'href="user-guide/"' in home and 'href="models/lda/"' in home
    assert 'href="docs/' not in home


def test_home_page_is_the_readme_included():
    """docs/index.md has nothing of its own but README.md (mkdocs-include-markdown-plugin), so the
    site's home page cannot drift from it."""
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert re.fullmatch(r'\s*\{%\s*include-markdown\s+"\.\./README\.md"\s*%\}\s*', text), text
    assert re.search(r"^\s*-\s*include-markdown\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)


def test_every_page_is_in_the_nav():
    """Every Markdown page under docs/ (results included) is reachable from the site's nav."""
    nav = set(re.findall(r":\s*([\w./-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M))
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert pages - nav == set(), f"pages missing from mkdocs.yml's nav: {sorted(pages - nav)}"


def test_readme_links_resolve():
    """README.md's relative links (read on GitHub, outside the site) point at existing files."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [link for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
               if not link.startswith(("http://", "https://")) and not (ROOT / link).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
