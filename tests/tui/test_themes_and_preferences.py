"""Themes from files (a broken one is a notification), and remembered choices."""

from __future__ import annotations

import asyncio

import pytest

from kbtui.tui.preferences import Preferences, load_preferences, save_preferences
from kbtui.tui.theming import ThemeFileInvalid, bundled_theme_dir, load_themes, parse_theme
from tests.tui.conftest import fast_options, make_app, wait_until


def test_the_shipped_themes_are_dark_light_and_high_contrast():
    themes, problems = load_themes([bundled_theme_dir()])
    assert problems == []
    by_name = {t.name: t for t in themes}
    assert set(by_name) == {"kbtui-dark", "kbtui-light", "kbtui-high-contrast"}
    assert by_name["kbtui-dark"].dark and not by_name["kbtui-light"].dark
    assert by_name["kbtui-high-contrast"].background.upper() == "#000000"


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"primary": "#fff"}, "'name' must be a non-empty string"),
        ({"name": "x"}, "'primary' is required"),
        ({"name": "x", "primary": "not-a-colour"}, "'primary' is not a colour"),
        ({"name": "x", "primary": "#fff", "dark": "yes"}, "'dark' must be true or false"),
        ({"name": "x", "primary": "#fff", "sparkle": 1}, "unknown key(s): sparkle"),
        ({"name": "x", "primary": "#fff", "variables": {"a": 1}}, "'variables' must be a table of strings"),
    ],
)
def test_a_theme_is_validated_before_it_is_used(values, reason):
    with pytest.raises(ThemeFileInvalid, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse_theme(values)


def test_a_broken_theme_file_is_a_notification_and_the_app_runs(tui_node):
    themes = tui_node.config.home / "themes"
    themes.mkdir()
    (themes / "broken.toml").write_text("name = \n")
    (themes / "mine.toml").write_text('name = "mine"\nprimary = "#ff8800"\ndark = true\n')
    app = make_app(tui_node, fast_options(run_node=False))

    async def run() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: app.mode == "viewer")
            await pilot.pause()
            messages = [n.message for n in app._notifications]
            assert messages == ["Theme file broken.toml skipped: is not valid TOML"]
            assert "mine" in app.available_themes
            assert app.theme == "kbtui-dark"

    asyncio.run(run())


def test_the_theme_and_the_collection_are_remembered(tui_node):
    async def first_run() -> None:
        app = make_app(tui_node, fast_options(run_node=False, remember_preferences=True))
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(lambda: app.mode == "viewer")
            app.theme = "kbtui-light"
            app.switch_collection("RUNBOOKS")
            await wait_until(lambda: load_preferences(tui_node.config.home) == Preferences("kbtui-light", "RUNBOOKS"))
            await pilot.pause()

    async def second_run() -> tuple[str, str]:
        app = make_app(tui_node, fast_options(run_node=False, remember_preferences=True))
        async with app.run_test(size=(80, 24)):
            await wait_until(lambda: app.mode == "viewer")
            return app.theme, app.collection_id

    asyncio.run(first_run())
    assert asyncio.run(second_run()) == ("kbtui-light", "RUNBOOKS")


def test_damaged_preferences_mean_defaults(tmp_path):
    (tmp_path / "tui.json").write_text("{not json")
    assert load_preferences(tmp_path) == Preferences()
    save_preferences(tmp_path, Preferences("kbtui-dark", "DEFAULT"))
    assert load_preferences(tmp_path) == Preferences("kbtui-dark", "DEFAULT")
    assert (tmp_path / "tui.json").stat().st_mode & 0o077 == 0
