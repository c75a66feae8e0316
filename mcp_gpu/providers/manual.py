"""Platforms with no public meter-stop API (AutoDL, the Chinese rentals, bare SSH) and `local`.

No HTTP and no remote command: the answer is status `manual` with the exact console steps a human must do,
never a pretence of having done them. The teardown layer passes the steps from the platform profile;
the defaults below (platform-facts §1.1, §1.6, §1.7) cover a profile that has none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mcp_gpu.providers import ProviderResult

_ANY = frozenset({"terminate", "destroy", "delete", "release", "stop"})

DEFAULT_STEPS: dict[str, tuple[str, ...]] = {
    "autodl": (
        "Open https://www.autodl.com/console/instance/list and find instance {instance_id}.",
        "关机 (shut down) stops GPU billing; the disk survives but still bills, and AutoDL releases it after 15 days.",
        "释放 (release) stops all billing: irreversible, it deletes / and /root/autodl-tmp (only /root/autodl-fs survives).",
    ),
    "gpushare": (
        "Open the Gpushare (恒源云) console and find instance {instance_id}.",
        "关机 (shut down), then 释放 (release) to stop all billing; /hy-tmp is wiped 24 h after shutdown.",
        "A stopped instance is released automatically after 10 days.",
    ),
    "matpool": (
        "Open the Matpool (矩池云) console and find instance {instance_id}.",
        "停止并释放 (stop and release); only /mnt (the region's netdisk) survives.",
    ),
    "featurize": (
        "Open the Featurize console and find instance {instance_id}.",
        "实例归还 (return the instance); everything outside /home/featurize and /cloud is wiped.",
    ),
    "lanrui": (
        "Open the LanRui console (lanrui.co) and find workspace {instance_id}.",
        "停止 (stop) the workspace, then 销毁数据盘 (destroy the data disk): the 数据盘 keeps billing while stopped.",
    ),
    "china": (
        "Open the platform's console and find instance {instance_id}.",
        "Use its stop-and-release verb (关机 → 释放, 停止并释放, 实例归还 ...); shutting down alone may keep billing disk.",
    ),
    "ssh": (
        "There is no API for a bare SSH box: stop {instance_id} where it was rented (the seller's console or its owner).",
        "`sudo shutdown -h now` over SSH stops the OS but usually not the bill; confirm in the billing page.",
    ),
}
DEFAULT_STEPS["hengyuan"] = DEFAULT_STEPS["gpushare"]
DEFAULT_STEPS["generic-ssh"] = DEFAULT_STEPS["ssh"]


class ManualProvider:
    """A platform whose meter a human stops in a console. `act` returns the steps; it changes nothing."""

    actions: frozenset[str] = _ANY
    unsupported: Mapping[str, str] = {}

    def __init__(self, name: str, *, steps: Sequence[str] = ()) -> None:
        self.name = name
        self._steps = tuple(steps) or DEFAULT_STEPS.get(name, DEFAULT_STEPS["china"])

    async def act(self, action: str, instance_id: str) -> ProviderResult:
        steps = [s.replace("{instance_id}", instance_id) for s in self._steps]
        return ProviderResult(
            provider=self.name, action=action, instance_id=instance_id, status="manual", polls=0,
            message=f"{self.name} has no public API to {action} {instance_id}: nothing was done. "
                    f"A human must do these steps in the console.",
            hint="do the steps, then confirm in the platform's billing page that the meter has stopped",
            steps=steps,
        )


class LocalProvider:
    """This machine: no meter, nothing to stop. Remote or local files are never touched."""

    name = "local"
    actions: frozenset[str] = _ANY
    unsupported: Mapping[str, str] = {}

    async def act(self, action: str, instance_id: str) -> ProviderResult:
        return ProviderResult(provider="local", action=action, instance_id=instance_id, status="nothing_to_do",
                              message="local has no meter: there is nothing to stop.")
