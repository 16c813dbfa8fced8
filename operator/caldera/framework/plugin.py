"""What a plugin and an action are.

A plugin is a class with a ``name``, an ``Args`` model (validated when the policy loads, so a typo
in an argument fails at start-up, not in the middle of a session) and two hooks. A fresh instance
is made for every session, as Volcano does, so plugins may keep per-session state on ``self``.
Actions are the same shape with one ``execute`` hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from caldera.framework.policy import PluginOption
    from caldera.framework.session import Session

__all__ = ["Action", "Args", "NoArgs", "Plugin"]


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

    def on_session_open(self, ssn: Session) -> None:
        """Register extension-point functions on ``ssn``."""

    def on_session_close(self, ssn: Session) -> None:
        """Write back per-session results (conditions, metrics)."""


class Action(Generic[A]):
    name: ClassVar[str]
    Args: ClassVar[type[Args]] = NoArgs

    def __init__(self, args: A) -> None:
        self.args = args

    def execute(self, ssn: Session) -> None:
        raise NotImplementedError
