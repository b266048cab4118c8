"""runner.ansible.hooks.templates: compiled Jinja templates kept, and only when safe."""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jinja2
import pytest
from jinja2 import nodes
from jinja2.sandbox import SandboxedEnvironment

from runner.ansible.hooks import templates


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "templates"
    directory.mkdir()
    templates.install(str(directory))
    try:
        yield directory
    finally:
        templates.uninstall()


def _compilations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources Jinja itself compiles (below the cache) from now on."""
    seen: list[str] = []
    real = jinja2.Environment._generate

    def generate(self: Any, source: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(type(source).__name__)
        return real(self, source, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "_generate", generate)
    return seen


def test_a_template_is_compiled_once_and_renders_the_same(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled = _compilations(monkeypatch)
    env = jinja2.Environment()
    source = "{% for x in items %}{{ x | upper }}-{% endfor %}{{ name | default('none') }}"
    first = env.from_string(source).render(items=["a", "b"], name="n")
    second = jinja2.Environment().from_string(source).render(items=["c"])
    assert (first, second) == ("A-B-n", "C-none")
    assert len(compiled) == 1
    assert templates.stats()["hits"] == 1


def test_an_expression_is_compiled_once(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = _compilations(monkeypatch)
    env = SandboxedEnvironment()
    for value, expected in ((3, True), (1, False)):
        expression = env.compile_expression("size | int > 2 and name is defined")
        assert expression(size=value, name="x") is expected
    assert env.compile_expression("missing", undefined_to_none=False)() is not None
    assert env.compile_expression("missing")() is None
    assert len(compiled) == 3


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"trim_blocks": True}, id="trim_blocks"),
        pytest.param({"variable_start_string": "[[", "variable_end_string": "]]"}, id="delims"),
        pytest.param({"keep_trailing_newline": True}, id="newline"),
        pytest.param({"finalize": lambda value: value}, id="finalize"),
        pytest.param({"autoescape": True}, id="autoescape"),
    ],
)
def test_environment_settings_are_part_of_the_key(
    cache: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, Any]
) -> None:
    compiled = _compilations(monkeypatch)
    source = "{% if x %}\n[[x]]{{ x }}\n{% endif %}\n"
    jinja2.Environment().from_string(source).render(x="<")
    changed = jinja2.Environment(**change).from_string(source).render(x="<")
    assert len(compiled) == 2  # not the first one's code
    templates.clear()
    assert jinja2.Environment(**change).from_string(source).render(x="<") == changed


def test_a_filter_that_changed_how_it_is_called_is_compiled_again(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled = _compilations(monkeypatch)
    source = "{{ value | mark }}"
    plain = jinja2.Environment()
    plain.filters["mark"] = lambda value: f"<{value}>"
    assert plain.from_string(source).render(value=1) == "<1>"

    with_env = jinja2.Environment()
    with_env.filters["mark"] = jinja2.pass_environment(lambda env, value: f"[{value}]")
    assert with_env.from_string(source).render(value=1) == "[1]"

    again = jinja2.Environment()
    again.filters["mark"] = lambda value: f"({value})"
    assert again.from_string(source).render(value=1) == "(1)"
    assert len(compiled) == 2  # the third found the first's entry valid


def test_a_missing_filter_fails_as_before(cache: Path) -> None:
    env = jinja2.Environment()
    env.filters["mark"] = lambda value: value
    env.from_string("{{ value | mark }}")
    with pytest.raises(jinja2.TemplateAssertionError, match="No filter named 'mark'"):
        jinja2.Environment().from_string("{{ value | mark }}")
    with pytest.raises(jinja2.TemplateSyntaxError):
        jinja2.Environment().from_string("{{ 1 + }}")
    assert templates.cached() == 1


def test_a_template_folded_at_compile_time_is_not_kept(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jinja's optimizer calls a filter on constants while compiling (`strftime` with no
    time, `random`): the result would be frozen in the kept code."""
    compiled = _compilations(monkeypatch)
    calls: list[int] = []

    def stamp(fmt: str) -> str:
        calls.append(1)
        return datetime.datetime.now().strftime(fmt) + str(len(calls))

    env = jinja2.Environment(optimized=True)
    env.filters["stamp"] = stamp
    first = env.from_string("{{ '%Y' | stamp }}").render()
    second = env.from_string("{{ '%Y' | stamp }}").render()
    assert first != second
    assert len(compiled) == 2
    assert templates.cached() == 0


def test_template_debugging_keeps_nothing(cache: Path) -> None:
    env = jinja2.Environment()
    env._debuggable_template_source = True  # type: ignore[attr-defined]
    env.from_string("{{ 1 }}")
    assert templates.cached() == 0


def test_runs_hand_their_templates_to_the_zygote(cache: Path) -> None:
    env = jinja2.Environment()
    env.from_string("{{ a ~ b }}")
    env.compile_expression("a == b")
    path = templates.export()
    assert path is not None and Path(path).parent == cache
    assert templates.export() is None  # nothing new since
    templates.clear()
    assert templates.absorb() == 2
    assert list(cache.iterdir()) == []
    assert env.from_string("{{ a ~ b }}").render(a=1, b=2) == "12"
    assert env.compile_expression("a == b")(a=1, b=1) is True
    assert templates.stats()["hits"] == 2


def test_a_damaged_export_is_ignored(cache: Path) -> None:
    (cache / "1.templates").write_bytes(b"not marshal")
    (cache / "2.templates").write_bytes(b"\x00")
    assert templates.absorb() == 0
    assert list(cache.iterdir()) == []


def test_the_cache_is_bounded(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(templates, "MAX_ENTRIES", 2)
    env = jinja2.Environment()
    for index in range(4):
        assert env.from_string(f"{{{{ {index} }}}}").render() == str(index)
    assert templates.cached() == 2


def test_a_template_tree_passed_in_is_compiled_as_before(cache: Path) -> None:
    env = jinja2.Environment()
    tree = nodes.Template([nodes.Output([nodes.Const("x")])])
    assert env.from_string(tree).render() == "x"
    assert templates.cached() == 0


ANSIBLE_TEMPLATES = [
    "{{ name | upper }}-{{ items | length }}",
    "{{ spec | combine({'b': 2}) | to_json }}",
    "{{ '%Y' | strftime }}",
    "{% for i in items %}{{ i }}{% endfor %}",
    "{{ text | regex_replace('^(a)', '\\\\1x') }}",
    "{{ lookup('ansible.builtin.env', 'HOME') }}",
    "{{ (size | int) + 1 }}",
]


def _render_with_ansible() -> list[Any]:
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import init_plugin_loader
    from ansible.template import Templar

    with warnings.catch_warnings():  # another test of this process may have done it
        warnings.simplefilter("ignore")
        init_plugin_loader([])

    try:
        from ansible.template import trust_as_template  # 2.19: only trusted templates render
    except ImportError:

        def trust_as_template(value: str) -> str:  # type: ignore[misc]
            return value

    variables = {"name": "n", "items": [1, 2], "spec": {"a": 1}, "text": "abc", "size": "3"}
    templar = Templar(loader=DataLoader(), variables=variables)
    rendered = [templar.template(trust_as_template(source)) for source in ANSIBLE_TEMPLATES]
    return rendered


def test_ansible_renders_the_same_with_kept_templates(tmp_path: Path) -> None:
    without = _render_with_ansible()
    templates.install(str(tmp_path))
    try:
        first = _render_with_ansible()
        kept = templates.cached()
        second = _render_with_ansible()
        assert templates.stats()["hits"] >= kept > 0
    finally:
        templates.uninstall()
    assert without == first == second


def test_string_subclasses_in_a_key_are_handed_to_the_zygote(cache: Path) -> None:
    """2.18's unsafe and YAML strings are `str` subclasses, which marshal refuses."""

    class Unsafe(str):
        def __str__(self) -> str:
            return self

    env = jinja2.Environment()
    env.from_string(Unsafe("{{ a }}-{{ b }}"))
    env.variable_start_string = Unsafe("{{")
    env.from_string(Unsafe("{{ a }}+{{ b }}"))
    assert templates.export() is not None
    templates.clear()
    assert templates.absorb() == 2
