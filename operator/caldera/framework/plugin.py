"""What a plugin and an action are.

A plugin is a class with a ``name``, an ``Args`` model (validated when the policy loads, so a typo
in an argument fails at start-up, not in the middle of a session) and two hooks. A fresh instance
is made for every session, as Volcano does, so plugins may keep per-session state on ``self``.
Actions are the same shape with one ``execute`` hook. Both see the session they are handed as
:class:`~caldera.framework.interfaces.SessionView`. A :class:`PluginOption` is one plugin entry
of the policy, as the loader validated it, and what each instance is made with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from caldera.framework.interfaces import SessionView

__all__ = ["Action", "Args", "NoArgs", "Plugin", "PluginOption"]


class Args(BaseModel):
    """Base for plugin and action arguments: keys as Volcano spells them (via aliases), unknown
    keys rejected, no silent type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True, frozen=True)

    def passed_over(self) -> list[tuple[str, str, str]]:
        """Values Volcano passes over and the plugin ignores too (a strategy it does not have):
        (where, below the arguments; what is wrong; what loading does), each a policy warning."""
        return []


class NoArgs(Args):
    """For plugins and actions that take no arguments."""


@dataclass(frozen=True, slots=True)
class PluginOption:
    name: str
    args: Args
    disabled: frozenset[str] = frozenset()
    """Extension points this plugin's ``enableXxx: false`` switches turn off."""
    hierarchy: bool = False
    managed: frozenset[str] = frozenset()
    """Resources the plugin accounts for itself (kept out of the generic resource fit)."""
    reads: frozenset[tuple[str, str]] = frozenset()
    """Objects the plugin reads by name (kind, ``namespace/name``): :meth:`Plugin.read_objects`."""
    key: str = ""
    """The entry's name in the tier layout: the plugin's name, or for a second entry of a
    repeatable plugin ``<name>#2`` (and so on)."""

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.name)

    def enabled(self, point: str) -> bool:
        return point not in self.disabled


A = TypeVar("A", bound=Args)
_AnyArgs = Args  # ``Args`` inside the plugin class means the plugin's own argument model


class Plugin(Generic[A]):
    name: ClassVar[str]
    Args: ClassVar[type[Args]] = NoArgs
    repeatable: ClassVar[bool] = False
    """Whether a policy may list the plugin more than once (each entry its own instance: one
    ``extender`` per server); registrations then use :attr:`PluginOption.key`."""
    supports_hierarchy: ClassVar[bool] = False
    """Whether the plugin implements Volcano's ``enableHierarchy`` option; setting the option on a
    plugin that does not is a policy error rather than a silent no-op."""

    def __init__(self, args: A, option: PluginOption) -> None:
        self.args = args
        self.option = option

    @classmethod
    def managed_resources(cls, args: _AnyArgs) -> frozenset[str]:
        """Resource names this plugin, with these arguments, accounts for itself (device
        shares): the generic resource fit leaves them alone, as Volcano's ignored device
        resources."""
        return frozenset()

    @classmethod
    def read_objects(cls, args: _AnyArgs) -> frozenset[tuple[str, str]]:
        """Objects this plugin, with these arguments, reads by name (kind, ``namespace/name``:
        the device ConfigMap ``deviceshare`` is pointed at), where the kind is otherwise read
        only by label: the operator watches each of them too."""
        return frozenset()

    def on_session_open(self, ssn: SessionView) -> None:
        """Register extension-point functions on ``ssn``."""

    def on_session_close(self, ssn: SessionView) -> None:
        """Write back per-session results (conditions, metrics)."""


class Action(Generic[A]):
    name: ClassVar[str]
    Args: ClassVar[type[Args]] = NoArgs

    def __init__(self, args: A) -> None:
        self.args = args

    def execute(self, ssn: SessionView) -> None:
        raise NotImplementedError
