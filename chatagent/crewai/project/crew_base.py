"""`@CrewBase`: a class that defines a crew from `config/agents.yaml` and `config/tasks.yaml` beside its module.

    @CrewBase
    class Research:
        agents_config = "config/agents.yaml"      # the defaults
        tasks_config = "config/tasks.yaml"

        @agent
        def researcher(self) -> Agent:
            return Agent(config=self.agents_config["researcher"], tools=[search])

        @task
        def research_task(self) -> Task:
            return Task(config=self.tasks_config["research_task"])   # its `agent: researcher` is resolved

        @crew
        def crew(self) -> Crew:
            return Crew(agents=self.agents, tasks=self.tasks, process=Process.sequential)

    Research().crew().kickoff(inputs={"topic": "rivers"})

In the YAML, a task's `agent` names an `@agent` method, its `context` names `@task` methods, `tools` name `@tool`
methods, `output_json`/`output_pydantic` name classes marked so, and `callbacks` name `@callback` methods; an
agent's `llm` names an `@llm` method (else it is a model name) and its `tools` name `@tool` methods. `self.agents`
and `self.tasks` are the `@agent` and `@task` methods' objects in the order they are defined; the crew that
`@crew` returns runs the `@before_kickoff` methods on its inputs and the `@after_kickoff` ones on its output.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

from chatagent.crewai.project.annotations import MARK
from chatagent.errors import ChatAgentError, MissingDependencyError


def load_yaml(path: Path) -> dict[str, Any]:
    """A YAML file's mapping ({} for an empty file); a clear error for a missing file or another shape."""
    try:
        import yaml  # function-level: only projects read YAML (the crewai extra installs it)
    except ModuleNotFoundError:
        raise MissingDependencyError(
            "CrewBase's YAML configuration needs the yaml package, which is not installed: pip install "
            "'chatagent[crewai]'", name="yaml") from None  # fmt: skip
    if not path.is_file():
        raise FileNotFoundError(f"the crew's configuration is missing: {path}")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ChatAgentError(f"{path} must hold a mapping of names to entries")
    return data


def CrewBase(cls: type) -> type:  # noqa: N802 (CrewAI's name)
    """Make `cls` a crew definition (see the module docstring)."""
    module = sys.modules.get(cls.__module__)
    base_dir = Path(inspect.getfile(module)).parent if module is not None and hasattr(module, "__file__") \
        else Path.cwd()  # fmt: skip
    original_init = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if original_init is not object.__init__:
            original_init(self, *args, **kwargs)
        self.base_directory = base_dir
        self.agents_config = _config(self, base_dir, getattr(cls, "agents_config", "config/agents.yaml"))
        self.tasks_config = _config(self, base_dir, getattr(cls, "tasks_config", "config/tasks.yaml"))
        _resolve(self)

    cls.__init__ = __init__  # type: ignore[method-assign]
    cls.agents = property(lambda self: [getattr(self, n)() for n in _methods(type(self), "agent")])  # type: ignore[attr-defined]
    cls.tasks = property(lambda self: [getattr(self, n)() for n in _methods(type(self), "task")])  # type: ignore[attr-defined]
    for name in _methods(cls, "crew"):
        setattr(cls, name, _crew_method(getattr(cls, name)))
    cls.is_crew_class = True  # type: ignore[attr-defined]
    return cls


def _config(self: Any, base: Path, given: Any) -> dict[str, Any]:
    if isinstance(given, dict):
        return {k: dict(v) for k, v in given.items()}
    path = Path(str(given))
    path = path if path.is_absolute() else base / path
    if not path.is_file() and str(given) in ("config/agents.yaml", "config/tasks.yaml"):
        return {}
    return load_yaml(path)


def _methods(cls: type, role: str) -> list[str]:
    """The names of the methods marked `role`, in the order the class (and its bases) define them."""
    seen: dict[str, None] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if getattr(value, MARK, None) == role:
                seen[name] = None
    return list(seen)


def _marked_classes(self: Any, role: str) -> dict[str, Any]:
    module = sys.modules.get(type(self).__module__)
    found = {n: v for n, v in vars(module).items() if isinstance(v, type) and getattr(v, MARK, None) == role} \
        if module is not None else {}  # fmt: skip
    for name in dir(type(self)):
        value = getattr(type(self), name, None)
        if isinstance(value, type) and getattr(value, MARK, None) == role:
            found[name] = value
    return found


def _resolve(self: Any) -> None:
    """Names in the YAML entries as the objects they name (see the module docstring)."""
    cls = type(self)
    agents = {n: getattr(self, n) for n in _methods(cls, "agent")}
    tasks = {n: getattr(self, n) for n in _methods(cls, "task")}
    tools = {n: getattr(self, n) for n in _methods(cls, "tool")}
    llms = {n: getattr(self, n) for n in _methods(cls, "llm")}
    callbacks = {n: getattr(self, n) for n in _methods(cls, "callback")}
    jsons, models = _marked_classes(self, "output_json"), _marked_classes(self, "output_pydantic")
    for name, entry in self.agents_config.items():
        if not isinstance(entry, dict):
            raise ChatAgentError(f"agents.yaml: the entry {name!r} must be a mapping (role, goal, backstory, ...)")
        if isinstance(entry.get("llm"), str) and entry["llm"] in llms:
            entry["llm"] = llms[entry["llm"]]()
        if entry.get("tools"):
            entry["tools"] = [_named(tools, t, "@tool", name)() if isinstance(t, str) else t for t in entry["tools"]]
    for name, entry in self.tasks_config.items():
        if not isinstance(entry, dict):
            raise ChatAgentError(
                f"tasks.yaml: the entry {name!r} must be a mapping (description, expected_output, ...)"
            )
        if isinstance(entry.get("agent"), str):
            entry["agent"] = _named(agents, entry["agent"], "@agent", name)()
        if entry.get("context"):
            entry["context"] = [
                _named(tasks, t, "@task", name)() if isinstance(t, str) else t for t in entry["context"]
            ]
        if entry.get("tools"):
            entry["tools"] = [_named(tools, t, "@tool", name)() if isinstance(t, str) else t for t in entry["tools"]]
        if isinstance(entry.get("output_json"), str):
            entry["output_json"] = _named(jsons, entry["output_json"], "@output_json class", name)
        if isinstance(entry.get("output_pydantic"), str):
            entry["output_pydantic"] = _named(models, entry["output_pydantic"], "@output_pydantic class", name)
        if entry.get("callbacks"):
            made = [_named(callbacks, c, "@callback", name)() for c in entry.pop("callbacks")]
            if made:
                entry["callback"] = made[0] if len(made) == 1 else _all(made)
        entry.setdefault("name", name)


def _named(found: dict[str, Any], name: str, what: str, entry: str) -> Any:
    if name not in found:
        raise ChatAgentError(f"{entry!r} names {name!r}, which is no {what} of the crew class")
    return found[name]


def _all(callbacks: list[Any]) -> Any:
    def call(output: Any) -> None:
        for callback in callbacks:
            callback(output)

    return call


def _crew_method(fn: Any) -> Any:
    """`@crew`: the crew it returns runs the class's @before_kickoff and @after_kickoff methods."""

    def made(self: Any, *args: Any, **kwargs: Any) -> Any:
        built = fn(self, *args, **kwargs)
        cls = type(self)
        before = [getattr(self, n) for n in _methods(cls, "before_kickoff")]
        after = [getattr(self, n) for n in _methods(cls, "after_kickoff")]
        if hasattr(built, "crew_before_kickoff"):
            built.crew_before_kickoff = [*before, *built.crew_before_kickoff]
            built.crew_after_kickoff = [*built.crew_after_kickoff, *after]
        return built

    setattr(made, MARK, "crew")
    made.__name__ = getattr(fn, "__name__", "crew")
    made.__doc__ = fn.__doc__
    return made


__all__ = ["CrewBase", "load_yaml"]
