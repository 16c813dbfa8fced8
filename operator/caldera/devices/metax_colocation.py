"""Who may share a MetaX sGPU card: app classes and QoS policies (HAMi v2.10.0
``pkg/device/metax/``: ``checkAppClass``, ``checkDeviceQos``, ``JitteryQosCache`` of ``qos.go``,
``prioritizeOnlineDevices`` and ``scoreOnlineDevices`` of ``sdevice.go``).

A card runs with one QoS policy at a time (``best-effort``, ``fixed-share``, ``burst-share``), so a
share goes only to a card that is idle, unset, or already on the pod's policy; a whole card needs
none. Pods of an app class (``online`` services, ``offline`` batch work that online work preempts)
share cards only with each other, offline work never where online work runs, and online pods go
where the fewest online pods and no lone offline work are.

HAMi reads the pods on a card from its usage (``PodInfos``, one entry per container) and keeps in
memory the policy it last switched a card to until the device plugin reports it
(``JitteryQosCache``). Both are rebuilt here from the pods holding the card (:func:`card_holders`,
:func:`device_qos`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from caldera.devices.model import Grant

__all__ = [
    "APP_CLASS",
    "BEST_EFFORT",
    "BURST_SHARE",
    "FIXED_SHARE",
    "OFFLINE",
    "ONLINE",
    "PREDICATE_TIME",
    "QOS_POLICY",
    "WHOLE_CARD",
    "Holder",
    "app_class_fits",
    "card_holders",
    "device_qos",
    "expected_qos",
    "prioritize_online",
    "qos_fits",
    "score_online",
]

APP_CLASS = "metax-tech.com/sgpu-app-class"
QOS_POLICY = "metax-tech.com/sgpu-qos-policy"
PREDICATE_TIME = "metax-tech.com/predicate-time"
"""When the pod was given its cards (ns), written at bind."""
BEST_EFFORT, FIXED_SHARE, BURST_SHARE = "best-effort", "fixed-share", "burst-share"
ONLINE, OFFLINE = "online", "offline"
WHOLE_CARD = 100
"""``Coresreq == 100``: the card exclusively (its QoS then does not matter)."""


class Holder(NamedTuple):
    """One container of another pod on a card (HAMi's ``PodInfos`` hold a pod per container)."""

    app_class: str
    """The pod's ``sgpu-app-class`` ("" when it names none)."""
    qos: str
    cores: int
    """The cores the container holds on the card."""
    since: int
    """When it was placed (``metax-tech.com/predicate-time``, ns; 0 unknown)."""


def card_holders(
    pods: Iterable[tuple[Mapping[str, str], Sequence[Sequence[Grant]]]],
) -> dict[str, list[Holder]]:
    """Per card, the containers of ``pods`` (annotations, grants per container) holding it, one
    entry per container as HAMi's usage rebuild appends ``PodInfos``. A pod naming no QoS policy
    has the ``best-effort`` HAMi's webhook writes (online pods excepted)."""
    out: dict[str, list[Holder]] = {}
    for notes, containers in pods:
        app_class = notes.get(APP_CLASS, "")
        qos = notes.get(QOS_POLICY, BEST_EFFORT if app_class != ONLINE else "")
        raw = notes.get(PREDICATE_TIME, "")
        since = int(raw) if raw.isascii() and raw.isdigit() else 0
        for grants in containers:
            for g in grants:
                out.setdefault(g.uuid, []).append(Holder(app_class, qos, g.cores, since))
    return out


def app_class_fits(request_class: str, used: int, holders: Sequence[Holder]) -> bool:
    """``checkAppClass``: an idle card takes anyone; a card of online/offline pods takes only
    online/offline pods (offline ones not where an online pod runs), a card of plain pods only
    plain pods."""
    if used == 0:
        return True
    online = any(h.app_class == ONLINE for h in holders)
    offline = any(h.app_class == OFFLINE for h in holders)
    if (online or offline) == (request_class in (ONLINE, OFFLINE)):
        return not (online and request_class == OFFLINE)
    return False


def qos_fits(request_qos: str, used: int, coresreq: int, card_qos: str) -> bool:
    """``checkDeviceQos``: an idle card switches to any policy, a whole-card request needs none;
    else the card's policy is unset or the pod's."""
    if used == 0 or coresreq == WHOLE_CARD:
        return True
    return card_qos in ("", request_qos)


def expected_qos(qos: str, cores: int) -> str:
    """``addJitteryQos``/``AddResourceUsage``: the policy a card is switched to for a share of
    ``cores`` (none for a whole card)."""
    return "" if cores == WHOLE_CARD else qos


def device_qos(registered: str, holders: Sequence[Holder], placed: str | None = None) -> str:
    """The card's policy as ``checkDeviceQos`` reads it: the policy its latest share (not an
    online one) switched it to, while the card still reports another (``JitteryQosCache``); else
    ``placed``, what the pod's earlier container switched it to (``AddResourceUsage``); else the
    ``registered`` policy."""
    shares = [h for h in holders if h.app_class != ONLINE]
    latest = max(shares, key=lambda h: h.since, default=None)
    if latest is not None:
        expected = expected_qos(latest.qos, latest.cores)
        if expected != registered:
            return expected
    return registered if placed is None else placed


def _classes(holders: Sequence[Holder]) -> tuple[int, int]:
    """(online, offline) containers on a card."""
    classes = [h.app_class for h in holders]
    return classes.count(ONLINE), classes.count(OFFLINE)


def prioritize_online(
    candidates: Sequence[str], require: int, holders: Mapping[str, Sequence[Holder]]
) -> list[str]:
    """``prioritizeOnlineDevices``: the cards with the fewest online pods, then the fewest
    offline ones; cards running only offline pods last, fewest first (a stable sort where Go's
    is not)."""
    if len(candidates) <= require:
        return list(candidates)

    def key(uuid: str) -> tuple[bool, int, int]:
        online, offline = _classes(holders.get(uuid, ()))
        only_offline = online == 0 and offline > 0
        return only_offline, (0 if only_offline else online), offline

    return sorted(candidates, key=key)[:require]


def score_online(
    containers: Sequence[Sequence[Grant]], holders: Mapping[str, Sequence[Holder]]
) -> int:
    """``scoreOnlineDevices``: per card the pod takes, -100 per offline pod on a card of only
    offline pods, else -20 per online and -2 per offline pod."""
    total = 0
    for uuid in {g.uuid for grants in containers for g in grants}:
        online, offline = _classes(holders.get(uuid, ()))
        total += -100 * offline if offline > 0 and online == 0 else -20 * online - 2 * offline
    return total
