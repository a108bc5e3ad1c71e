"""The playground page is served where it should be and nowhere else, and depends on nothing off the server.

The page itself is tested in a real browser against real Kokoro in ``test_playground_browser.py``; here the
server side: the ``playground`` setting (on by default only on loopback, so the containers do not expose
it), the routes, the headers that keep the page offline, and the files' own references.
"""

from __future__ import annotations

import re

import httpx
import pytest
from tone_backend import ToneBackend

from reference_server import playground
from reference_server.settings import Settings, SettingsError, load_settings


def test_served_by_default_on_loopback_only():
    assert Settings().serves_playground  # python -m reference_server: 127.0.0.1
    assert Settings(host="localhost").serves_playground
    assert not Settings(host="0.0.0.0").serves_playground  # the containers
    assert not Settings(host="10.0.0.5").serves_playground


@pytest.mark.parametrize(
    ("argv", "environ", "served"),
    [
        (["--host", "0.0.0.0"], {"KOKORO_PLAYGROUND": "1"}, True),  # a container asked for it
        (["--host", "0.0.0.0", "--playground", "on"], {}, True),
        (["--playground", "off"], {}, False),
        ([], {"KOKORO_PLAYGROUND": "false"}, False),
        (["--playground", "auto"], {"KOKORO_PLAYGROUND": "0"}, True),  # a flag wins over the environment
        (["--host", "0.0.0.0"], {"KOKORO_PLAYGROUND": "auto"}, False),
    ],
)
def test_the_setting_turns_it_on_and_off(argv, environ, served):
    assert load_settings(argv, environ=environ).serves_playground is served


def test_a_bad_value_is_refused_by_name():
    with pytest.raises(SettingsError, match="KOKORO_PLAYGROUND"):
        load_settings([], environ={"KOKORO_PLAYGROUND": "sometimes"})
    with pytest.raises(SettingsError, match="playground"):
        Settings(playground="maybe")


def test_the_page_and_its_files_are_served_with_a_policy_that_keeps_them_offline(serve):
    server = serve(ToneBackend())
    with httpx.Client(base_url=server.http_url, timeout=10) as client:
        for path in ("/", "/playground"):
            response = client.get(path)
            assert (response.status_code, response.headers["location"]) == (307, "/playground/")
        page = client.get("/playground/")
        assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
        assert "<title>Kokoro TTS playground</title>" in page.text
        for name, media_type in playground.FILES.items():
            response = client.get(f"/playground/{name}")
            assert response.status_code == 200, name
            assert response.headers["content-type"] == media_type
            csp = response.headers["content-security-policy"]
            assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "https:" not in csp
            assert response.headers["x-content-type-options"] == "nosniff"
        assert client.get("/playground/../app.py").status_code == 404
        assert client.get("/playground/settings.py").status_code == 404
        # The protocol routes are unchanged beside it.
        assert client.get("/ping").status_code == 200


def test_not_served_when_off(serve):
    server = serve(ToneBackend(), host="0.0.0.0")  # auto: not loopback, so off (the test binds loopback)
    with httpx.Client(base_url=server.http_url, timeout=10) as client:
        assert client.get("/playground/").status_code == 404
        assert client.get("/").status_code == 404
        assert client.get("/ping").status_code == 200


def test_the_files_load_nothing_from_another_origin():
    """No CDN, no web fonts, no absolute URL at all: everything the page loads is its own file."""
    files = {name: playground._load()[name].decode("utf-8") for name in playground.FILES}
    for name, text in files.items():
        assert not re.search(r"\b(?:https?:|wss?:)//", text), f"{name} names another origin"
        assert "@import" not in text and "url(" not in text, f"{name} loads a stylesheet resource"
    html = files["index.html"]
    references = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert set(references) == {"playground.css", "playground.js", "data:,"}
    for name in ("playground.js", "bidi.js", "player.js"):
        for imported in re.findall(r'from "([^"]+)"', files[name]):
            assert imported.startswith("./") and imported[2:] in playground.FILES, (name, imported)
