"""The Kubernetes backend: manifests checked against the real Kubernetes 1.32 schema (kubernetes-validate), plus
the rules the schema cannot check; kubectl calls checked against a recording `kubectl` stand-in on the remote
PATH of a real sshd. No API server can run here, so the stand-in answers with recorded-shape JSON
(tests/fixtures/kubectl) — it tests our calls and our reading of the answers, not Kubernetes' behaviour.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_gpu.backends import LaunchSpec, RunLayout
from mcp_gpu.backends.kubernetes import KubernetesBackend, build_job_manifest, dns_name, job_state, parse_observation
from mcp_gpu.errors import ConfigError
from mcp_gpu.models import JobState
from mcp_gpu.transport.ssh import SSHTransport
from tests.sshd import FAKEBIN, Sshd

kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate (test extra)")

pytestmark = pytest.mark.anyio
FIX = Path(__file__).parent / "fixtures" / "kubectl"
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
SECRET = "hf_s3cr3t $(touch /tmp/k8s-pwned) `id`"


def spec(name: str = "train-a", secrets: dict[str, str] | None = None, **options: Any) -> LaunchSpec:
    return LaunchSpec(job_id="j-1", name=name, command="python train.py --epochs 3", workdir="/home/me/proj",
                      env={"LR": "3e-4"}, secrets=secrets or {}, options={"image": "pytorch/pytorch:2.4.0", **options})


VARIANTS = [
    {},
    {"gpus": 2, "cpu": "8", "memory": "64Gi", "pvc": "ckpt-claim", "outputs_dir": "/ckpt", "time_limit_s": 7200,
     "restart_policy": "OnFailure", "backoff_limit": 3, "namespace": "ml", "ttl_s": 86400, "workdir": "/workspace"},
    {"gpus": 1, "shm": False, "service_account": "trainer"},
]


def check_semantics(m: dict[str, Any]) -> None:
    """What the schema does not check (test-infra.md §4): enums, ranges, names, quantity strings, requests == limits."""
    assert DNS1123.match(m["metadata"]["name"]) and len(m["metadata"]["name"]) <= 63
    pod = m["spec"]["template"]["spec"]
    assert pod["restartPolicy"] in ("Never", "OnFailure")
    assert isinstance(m["spec"]["backoffLimit"], int) and m["spec"]["backoffLimit"] >= 0
    for c in pod["containers"]:
        res = c["resources"]
        assert res["requests"] == res["limits"]
        for value in res["limits"].values():
            assert isinstance(value, str) and QUANTITY.match(value)
        assert c["command"][:2] == ["bash", "-c"]
    labels = m["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "mcp-gpu" and labels["mcp-gpu/job-id"] == "j-1"
    assert m["spec"]["template"]["metadata"]["labels"] == labels


@pytest.mark.parametrize("options", VARIANTS)
def test_job_manifests_pass_the_kubernetes_1_32_schema_strictly_and_the_semantic_rules(options: dict[str, Any]) -> None:
    m = build_job_manifest(spec(**options), secret_name="train-a-0c5b8f9e-env")
    kubernetes_validate.validate(m, "1.32.0", strict=True)
    check_semantics(m)


def test_gpus_checkpoint_volume_and_deadline_land_where_kubernetes_reads_them() -> None:
    m = build_job_manifest(spec(**VARIANTS[1]))
    pod = m["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "2", "cpu": "8", "memory": "64Gi"}
    assert {"name": "outputs", "persistentVolumeClaim": {"claimName": "ckpt-claim"}} in pod["volumes"]
    assert {"name": "outputs", "mountPath": "/ckpt"} in c["volumeMounts"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    assert m["spec"]["activeDeadlineSeconds"] == 7200 and m["spec"]["backoffLimit"] == 3
    assert m["metadata"]["namespace"] == "ml" and c["workingDir"] == "/workspace"
    assert c["command"] == ["bash", "-c", "python train.py --epochs 3"]
    assert {"name": "LR", "value": "3e-4"} in c["env"]
    assert build_job_manifest(spec())["spec"]["backoffLimit"] == 0  # a failed paid run is not silently retried


def test_secret_values_never_appear_in_the_manifest_only_a_secret_reference() -> None:
    m = build_job_manifest(spec(secrets={"HF_TOKEN": SECRET}), secret_name="train-a-0c5b8f9e-env")
    text = json.dumps(m)
    assert "s3cr3t" not in text and "HF_TOKEN" not in text
    assert m["spec"]["template"]["spec"]["containers"][0]["envFrom"] == [{"secretRef": {"name": "train-a-0c5b8f9e-env"}}]


@pytest.mark.parametrize("name", ["Train LR=3e-4; rm -rf /", "--delete-all", "$(reboot)", "日本語-run", "x" * 200, "___"])
def test_any_job_name_becomes_a_valid_unique_dns_1123_name(name: str) -> None:
    out = dns_name(name, "j-1")
    assert DNS1123.match(out) and len(out) <= 63
    assert out != dns_name(name, "j-2")
    kubernetes_validate.validate(build_job_manifest(spec(name=name)), "1.32.0", strict=True)


@pytest.mark.parametrize("options", [{"restart_policy": "Always"}, {"backoff_limit": -1}, {"gpus": "one"},
                                     {"gpus": "1; rm -rf /"}, {"image": ""}, {"image": "-x"}, {"pvc": "Bad_Claim"},
                                     {"namespace": "$(id)"}, {"time_limit_s": 0}, {"memory": "lots"}])
def test_invalid_kubernetes_options_are_refused_with_a_config_error(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        build_job_manifest(spec(**options))


def _fx(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIX / name).read_text())
    return data


def test_job_and_pod_status_map_to_observations_and_registry_states() -> None:
    running = parse_observation(_fx("job-running.json"), {"items": []})
    assert (running.alive, job_state(running)) == (True, JobState.running)
    done = parse_observation(_fx("job-complete.json"), {"items": []})
    assert (done.alive, done.exit_code, job_state(done)) == (False, 0, JobState.succeeded)
    oom = parse_observation(_fx("job-failed.json"), _fx("pods-oomkilled.json"))
    assert (oom.alive, oom.exit_code, oom.exit_signal) == (False, 137, "KILL")
    assert "OOMKilled" in oom.detail and "BackoffLimitExceeded" in oom.detail and job_state(oom) is JobState.failed
    evicted = parse_observation(_fx("job-failed.json"), _fx("pods-evicted.json"))
    assert job_state(evicted) is JobState.preempted and "ephemeral-storage" in evicted.detail
    assert job_state(parse_observation({"status": {}}, {})) is JobState.launching
    assert parse_observation(None, {}).alive is None


# --- kubectl over the real sshd, against a recording stand-in ---------------------------------------------------

STANDIN = r"""#!/bin/bash
# kubectl stand-in: records argv (NUL-separated) and stdin per call, answers from $KUBECTL_STANDIN/answers.
d=$KUBECTL_STANDIN
n=$(ls "$d/calls" | grep -c '\.argv$')
printf '%s\0' "$@" > "$d/calls/$n.argv"
args=" $* "
case $args in *" -f - "*|*"--from-env-file=/dev/stdin"*) cat > "$d/calls/$n.stdin";; esac
case $args in
  *" apply "*) echo '{"apiVersion":"batch/v1","kind":"Job","metadata":{"uid":"6f1d2c3b-7a8e-4b0f-9d1c-2e3f4a5b6c7d"}}';;
  *" get job "*) if [ -f "$d/answers/job.json" ]; then cat "$d/answers/job.json"
                 else echo 'Error from server (NotFound): jobs.batch "x" not found' >&2; exit 1; fi;;
  *" get pods "*) cat "$d/answers/pods.json" 2>/dev/null || echo '{"apiVersion":"v1","kind":"List","items":[]}';;
  *" create secret "*) echo "secret/$5 created";;
esac
exit 0
"""


@pytest.fixture(scope="module")
def kube_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sshd, Path]]:
    root = tmp_path_factory.mktemp("kubectl")
    (root / "bin").mkdir()
    (root / "calls").mkdir()
    (root / "answers").mkdir()
    kubectl = root / "bin" / "kubectl"
    kubectl.write_text(STANDIN)
    kubectl.chmod(0o755)
    path = f"{root / 'bin'}:{FAKEBIN}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
    server = Sshd(root / "sshd", extra_env={"PATH": path, "KUBECTL_STANDIN": str(root)}).start()
    try:
        yield server, root
    finally:
        server.stop()


@pytest.fixture
async def kube(kube_sshd: tuple[Sshd, Path]) -> AsyncIterator[tuple[SSHTransport, Path]]:
    server, root = kube_sshd
    for f in [*(root / "calls").iterdir(), *(root / "answers").iterdir()]:
        f.unlink()
    t = SSHTransport("kube-box", server.alias, config_paths=[str(server.ssh_config)], connect_timeout=5)
    try:
        yield t, root
    finally:
        await t.aclose()


def calls(root: Path) -> list[tuple[list[str], str | None]]:
    out = []
    for i in range(len(list((root / "calls").glob("*.argv")))):
        argv = (root / "calls" / f"{i}.argv").read_bytes().decode().split("\0")[:-1]
        stdin = root / "calls" / f"{i}.stdin"
        out.append((argv, stdin.read_text() if stdin.exists() else None))
    return out


async def test_launch_sends_the_secret_and_the_manifest_over_stdin_and_cancel_deletes_both(
        kube: tuple[SSHTransport, Path]) -> None:
    t, root = kube
    backend = KubernetesBackend()
    s = spec(secrets={"HF_TOKEN": SECRET, "WANDB_API_KEY": "wb-123"}, gpus=1, namespace="ml")
    handle = await backend.launch(t, s, RunLayout("/unused"), "/unused/run.sh")
    name = handle["k8s_job"]
    assert DNS1123.match(name) and handle["secret"] == f"{name}-env"

    made = calls(root)
    create = next(c for c in made if "create" in c[0])
    assert create[0] == ["--namespace=ml", "create", "secret", "generic", f"{name}-env", "--from-env-file=/dev/stdin"]
    assert create[1] == f"HF_TOKEN={SECRET}\nWANDB_API_KEY=wb-123\n"
    apply = next(c for c in made if "apply" in c[0])
    assert apply[0] == ["--namespace=ml", "apply", "-f", "-", "-o", "json"]
    assert apply[1] is not None and json.loads(apply[1]) == build_job_manifest(s, secret_name=f"{name}-env")
    patch = next(c for c in made if "patch" in c[0])
    assert "6f1d2c3b-7a8e-4b0f-9d1c-2e3f4a5b6c7d" in patch[0][-1]  # the Secret is owned by (deleted with) the Job
    for argv, stdin in made:
        assert not any("s3cr3t" in a or "wb-123" in a for a in argv)
        if stdin is not None and "apply" in argv:
            assert "s3cr3t" not in stdin
    assert not Path("/tmp/k8s-pwned").exists()

    await backend.cancel(t, handle, RunLayout("/unused"))
    deletes = [c[0] for c in calls(root) if "delete" in c[0]]
    assert ["--namespace=ml", "delete", "job", name, "--wait=false", "--ignore-not-found",
            "--cascade=background"] in deletes
    assert any(d[1:4] == ["delete", "secret", f"{name}-env"] for d in deletes)


async def test_observe_reads_kubectl_get_job_and_pods_json(kube: tuple[SSHTransport, Path]) -> None:
    t, root = kube
    backend = KubernetesBackend()
    handle = {"k8s_job": "train-a-0c5b8f9e", "namespace": "ml"}
    assert (await backend.observe(t, handle, RunLayout("/unused"))).scheduler_state == "NotFound"
    (root / "answers" / "job.json").write_text((FIX / "job-running.json").read_text())
    assert (await backend.observe(t, handle, RunLayout("/unused"))).alive is True
    (root / "answers" / "job.json").write_text((FIX / "job-failed.json").read_text())
    (root / "answers" / "pods.json").write_text((FIX / "pods-oomkilled.json").read_text())
    obs = await backend.observe(t, handle, RunLayout("/unused"))
    assert (obs.alive, obs.exit_code) == (False, 137) and "OOMKilled" in obs.detail
    gets = [c[0] for c in calls(root)]
    assert ["--namespace=ml", "get", "job", "train-a-0c5b8f9e", "-o", "json"] in gets
    assert ["--namespace=ml", "get", "pods", "-l", "job-name=train-a-0c5b8f9e", "-o", "json"] in gets
    assert await backend.available(t)


async def test_patrol_reads_a_kubernetes_job_in_its_one_probe_and_an_eviction_is_preempted(
        kube_sshd: tuple[Sshd, Path], settings: Any, tmp_path: Path) -> None:
    from dataclasses import replace

    from mcp_gpu.app import App
    from mcp_gpu.lifecycle.patrol import patrol
    from mcp_gpu.models import JobRecord, JobState, iso
    from mcp_gpu.store import jobs as jobs_repo

    server, root = kube_sshd
    for f in [*(root / "calls").iterdir(), *(root / "answers").iterdir()]:
        f.unlink()
    app = App.open(replace(settings, ssh_config=(str(server.ssh_config),)))
    try:
        now = iso()
        rd = tmp_path / "run"
        rd.mkdir()
        jobs_repo.insert(app.store, JobRecord(
            id="job_k8s0000001", host=server.alias, name="kjob", backend="kubernetes", state=JobState.running,
            command="python train.py\n", workdir=str(tmp_path), run_dir=str(rd), created_at=now, updated_at=now,
            handle={"k8s_job": "train-a-0c5b8f9e", "namespace": "ml"}))
        (root / "answers" / "job.json").write_text((FIX / "job-running.json").read_text())
        first = (await patrol(app, ["job_k8s0000001"])).jobs[0]
        assert first.state == "running"
        gets = [c[0] for c in calls(root)]
        assert ["--namespace=ml", "get", "job", "train-a-0c5b8f9e", "-o", "json"] in gets
        (root / "answers" / "job.json").write_text((FIX / "job-failed.json").read_text())
        (root / "answers" / "pods.json").write_text((FIX / "pods-evicted.json").read_text())
        second = (await patrol(app, ["job_k8s0000001"])).jobs[0]
        assert second.state == "preempted" and second.changed
        assert jobs_repo.get(app.store, "job_k8s0000001").state is JobState.preempted
    finally:
        await app.aclose()
