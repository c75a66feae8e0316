"""Kubernetes: a batch/v1 Job built by a pure function, applied with `kubectl apply -f -` over the host's transport.

The host is wherever `kubectl` is configured (often the user's laptop: `local`). The manifest travels on
stdin; so do secrets, as a Secret made with `kubectl create secret generic --from-env-file=/dev/stdin` and
referenced by `envFrom`: no secret value is ever in a manifest, an argv or a file. Kubernetes itself records
the exit code (container `terminated.exitCode`), so no wrapper runs inside the pod.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, ClassVar

from mcp_gpu.backends import LaunchSpec, Observation, RunLayout
from mcp_gpu.backends._env import check_env_name, exit_signal_of
from mcp_gpu.errors import CommandFailed, ConfigError
from mcp_gpu.models import JobHandle, JobState
from mcp_gpu.transport import Transport

MANAGED_BY = "mcp-gpu"
JOB_ID_LABEL = "mcp-gpu/job-id"
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$")
_PATH = re.compile(r"^/[^\0\n]*$")


def dns_name(name: str, job_id: str, *, limit: int = 63) -> str:
    """A DNS-1123 label from a free job name, unique per job id: `train-lr3e-4` → `train-lr3e-4-1a2b3c4d`."""
    slug = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    slug = re.sub(r"-{2,}", "-", slug)[: limit - 9].strip("-") or "job"
    return f"{slug}-{hashlib.sha256(job_id.encode()).hexdigest()[:8]}"


def label_value(value: str) -> str:
    if len(value) <= 63 and _LABEL_VALUE.fullmatch(value):
        return value
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def _quantity(key: str, value: Any) -> str:
    text = str(value)
    if isinstance(value, bool) or not _QUANTITY.fullmatch(text):
        raise ConfigError(f"kubernetes {key}={value!r} is not a quantity", hint="e.g. gpus 1, cpu '4', memory '32Gi'")
    return text


def _opt(options: dict[str, Any], key: str, pattern: re.Pattern[str], hint: str) -> str | None:
    value = options.get(key)
    if value in (None, ""):
        return None
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ConfigError(f"kubernetes option {key}={value!r} is not valid", hint=hint)
    return value


def build_job_manifest(spec: LaunchSpec, *, secret_name: str | None = None) -> dict[str, Any]:
    """The Job for `spec`: pure, so it is validated against the Kubernetes schema in tests.

    options: image (required), namespace, gpus, gpu_resource (nvidia.com/gpu), cpu, memory, restart_policy
    (Never | OnFailure), backoff_limit (0), time_limit_s → activeDeadlineSeconds, pvc (claimName) mounted at
    outputs_dir (default /outputs; an emptyDir without pvc), workdir (in the image), ttl_s, service_account,
    shm (default on: a Memory emptyDir on /dev/shm, which is 64 MiB in a pod otherwise).
    """
    o = spec.options
    image = _opt(o, "image", _IMAGE, "a container image reference, e.g. pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime")
    if image is None:
        raise ConfigError("the kubernetes backend needs an image", hint="pass options={'image': 'repo/image:tag'}")
    name = dns_name(spec.name, spec.job_id)
    restart = str(o.get("restart_policy", "Never"))
    if restart not in ("Never", "OnFailure"):
        raise ConfigError(f"restart_policy {restart!r}: a Job allows only Never or OnFailure (gotcha K8S2)")
    backoff = o.get("backoff_limit", 0)
    if isinstance(backoff, bool) or not isinstance(backoff, int) or backoff < 0:
        raise ConfigError(f"backoff_limit {backoff!r} must be a whole number >= 0")
    outputs = _opt(o, "outputs_dir", _PATH, "an absolute path inside the container") or "/outputs"
    gpu_resource = _opt(o, "gpu_resource", re.compile(r"^[a-z0-9.-]+/[a-z0-9.-]+$"), "e.g. nvidia.com/gpu") or "nvidia.com/gpu"

    limits: dict[str, str] = {}
    if o.get("gpus"):
        limits[gpu_resource] = _quantity("gpus", o["gpus"])
    for key in ("cpu", "memory"):
        if o.get(key) not in (None, ""):
            limits[key] = _quantity(key, o[key])
    labels = {"app.kubernetes.io/managed-by": MANAGED_BY, JOB_ID_LABEL: label_value(spec.job_id),
              "mcp-gpu/name": label_value(spec.name)}

    env = [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    env += [{"name": check_env_name(k), "value": v} for k, v in spec.env.items() if k != "PYTHONUNBUFFERED"]
    container: dict[str, Any] = {
        "name": "job", "image": image,
        # The user's command is the job's content by definition; it is one argv element, never spliced.
        "command": ["bash", "-c", spec.command],
        "env": env,
        "resources": {"limits": dict(limits), "requests": dict(limits)},
        "volumeMounts": [{"name": "outputs", "mountPath": outputs}],
    }
    workdir = _opt(o, "workdir", _PATH, "an absolute path inside the container")  # spec.workdir is the host's
    if workdir:
        container["workingDir"] = workdir
    if secret_name:
        container["envFrom"] = [{"secretRef": {"name": secret_name}}]
    pvc = _opt(o, "pvc", _DNS1123, "the name of an existing PersistentVolumeClaim")
    volumes: list[dict[str, Any]] = [
        {"name": "outputs", **({"persistentVolumeClaim": {"claimName": pvc}} if pvc else {"emptyDir": {}})}]
    if o.get("shm", True):
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory"}})
        container["volumeMounts"].append({"name": "dshm", "mountPath": "/dev/shm"})
    pod: dict[str, Any] = {"restartPolicy": restart, "containers": [container], "volumes": volumes}
    sa = _opt(o, "service_account", _DNS1123, "a ServiceAccount name")
    if sa:
        pod["serviceAccountName"] = sa
    job_spec: dict[str, Any] = {"backoffLimit": backoff,
                                "template": {"metadata": {"labels": dict(labels)}, "spec": pod}}
    if o.get("time_limit_s") is not None:
        job_spec["activeDeadlineSeconds"] = _positive(o["time_limit_s"], "time_limit_s")
    if o.get("ttl_s") is not None:
        job_spec["ttlSecondsAfterFinished"] = _positive(o["ttl_s"], "ttl_s")
    meta: dict[str, Any] = {"name": name, "labels": labels, "annotations": {"mcp-gpu/job-id": spec.job_id}}
    ns = _opt(o, "namespace", _DNS1123, "a namespace name")
    if ns:
        meta["namespace"] = ns
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job_spec}


def _positive(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{key}={value!r} must be a whole number of seconds >= 1")
    return value


def env_file(secrets: dict[str, str]) -> str:
    """kubectl's --from-env-file format: one NAME=value a line, taken literally."""
    for name, value in secrets.items():
        check_env_name(name)
        if "\n" in value or "\r" in value or "\0" in value:
            raise ConfigError(f"the value of secret {name} spans lines", hint="a Kubernetes env-file holds one line a value")
    return "".join(f"{k}={v}\n" for k, v in secrets.items())


def _pod_problems(pods: dict[str, Any]) -> tuple[list[str], int | None]:
    """Reasons worth telling (OOMKilled, Evicted, image pull, unschedulable) and the last exit code seen."""
    notes: list[str] = []
    code: int | None = None
    for pod in pods.get("items", []):
        status = pod.get("status", {})
        if status.get("reason") == "Evicted":
            notes.append(f"Evicted: {status.get('message', '')}".strip())
        for cond in status.get("conditions", []):
            if cond.get("reason") == "Unschedulable":
                notes.append(f"Unschedulable: {cond.get('message', '')}")
        for cs in status.get("containerStatuses", []):
            for key in ("state", "lastState"):
                term = cs.get(key, {}).get("terminated")
                if term:
                    code = term.get("exitCode", code)
                    if term.get("reason") in ("OOMKilled", "ContainerCannotRun", "DeadlineExceeded"):
                        notes.append(term["reason"])
            waiting = cs.get("state", {}).get("waiting", {})
            if waiting.get("reason") in ("ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
                                         "CrashLoopBackOff"):
                notes.append(f"{waiting['reason']}: {waiting.get('message', '')}".strip(": "))
    return list(dict.fromkeys(notes)), code


def parse_observation(job: dict[str, Any] | None, pods: dict[str, Any]) -> Observation:
    if job is None:
        return Observation(alive=None, scheduler_state="NotFound", detail="the Job is gone (deleted or TTL expired)")
    status = job.get("status", {})
    conds = {c.get("type"): c for c in status.get("conditions", []) if c.get("status") == "True"}
    notes, code = _pod_problems(pods)
    detail = "; ".join(notes)
    if "Complete" in conds or "SuccessCriteriaMet" in conds:
        return Observation(alive=False, exit_code=0, scheduler_state="Complete", detail=detail)
    failed = conds.get("Failed") or conds.get("FailureTarget")
    if failed:
        reason = failed.get("reason", "")
        why = "; ".join(x for x in (reason, failed.get("message", ""), detail) if x)
        return Observation(alive=False, exit_code=code, exit_signal=exit_signal_of(code),
                           scheduler_state="Evicted" if "Evicted" in detail else f"Failed:{reason}" if reason else "Failed",
                           detail=why)
    if status.get("active"):
        return Observation(alive=True, scheduler_state="Running" if status.get("ready") else "Active", detail=detail)
    if "Suspended" in conds:
        return Observation(alive=True, scheduler_state="Suspended", detail=detail)
    return Observation(alive=True, scheduler_state="Pending", detail=detail)


def job_state(obs: Observation) -> JobState | None:
    s = obs.scheduler_state or ""
    if s == "Complete":
        return JobState.succeeded
    if s == "Evicted":
        return JobState.preempted
    if s.startswith("Failed"):
        return JobState.failed
    if s in ("Running", "Active", "Suspended"):
        return JobState.running
    if s == "Pending":
        return JobState.launching
    return None


class KubernetesBackend:
    @staticmethod
    def state_of(obs: Observation) -> JobState | None:
        return job_state(obs)

    name: ClassVar[str] = "kubernetes"

    async def available(self, t: Transport) -> bool:
        res = await t.run(["kubectl", "version", "--client"], timeout=30)
        return res.ok

    @staticmethod
    def _base(handle_or_options: dict[str, Any]) -> list[str]:
        argv = ["kubectl"]
        ctx = _opt(handle_or_options, "context", re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,252}$"), "a kubeconfig context")
        if ctx:
            argv.append(f"--context={ctx}")
        ns = _opt(handle_or_options, "namespace", _DNS1123, "a namespace name")
        if ns:
            argv.append(f"--namespace={ns}")
        return argv

    async def launch(self, t: Transport, spec: LaunchSpec, layout: RunLayout, script_path: str) -> dict[str, Any]:
        name = dns_name(spec.name, spec.job_id)
        base = self._base(spec.options)
        secret = f"{name}-env" if spec.secrets else None
        manifest = build_job_manifest(spec, secret_name=secret)
        handle: dict[str, Any] = {"k8s_job": name, "secret": secret,
                                  **{k: spec.options[k] for k in ("namespace", "context") if spec.options.get(k)}}
        if secret:
            res = await t.run([*base, "create", "secret", "generic", secret, "--from-env-file=/dev/stdin"],
                              stdin=env_file(spec.secrets), timeout=60)
            _check(res.ok, "kubectl create secret", res.tail(3))
            await t.run([*base, "label", "secret", secret, f"app.kubernetes.io/managed-by={MANAGED_BY}",
                         f"{JOB_ID_LABEL}={label_value(spec.job_id)}"], timeout=60)
        res = await t.run([*base, "apply", "-f", "-", "-o", "json"], stdin=json.dumps(manifest), timeout=60)
        if not res.ok and secret:
            await t.run([*base, "delete", "secret", secret, "--ignore-not-found"], timeout=60)
        _check(res.ok, "kubectl apply", res.tail(3))
        try:
            uid = json.loads(res.stdout).get("metadata", {}).get("uid")
        except ValueError:
            uid = None
        if secret and uid:
            # The Secret is owned by the Job: Kubernetes deletes it with the Job (garbage collection).
            owner = {"metadata": {"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid}]}}
            await t.run([*base, "patch", "secret", secret, "--type=merge", "-p", json.dumps(owner)], timeout=60)
        handle["uid"] = uid
        return handle

    async def observe(self, t: Transport, handle: dict[str, Any], layout: RunLayout) -> Observation:
        from mcp_gpu.backends import observe

        _name(handle)
        jo, v = await observe.observe_one(t, observe.target_for(self.name, handle, layout.run_dir))
        if jo.scheduler is not None and v.kind == "unknown":
            return jo.scheduler
        return observe.to_observation(jo, v)

    async def cancel(self, t: Transport, handle: dict[str, Any], layout: RunLayout) -> None:
        base, name = self._base(handle), _name(handle)
        res = await t.run([*base, "delete", "job", name, "--wait=false", "--ignore-not-found", "--cascade=background"],
                          timeout=60)
        _check(res.ok, "kubectl delete job", res.tail(3))
        secret = JobHandle.of(handle).secret
        if secret:
            await t.run([*base, "delete", "secret", _dns(secret), "--ignore-not-found", "--wait=false"],
                        timeout=60)


def _dns(value: str) -> str:
    if not _DNS1123.fullmatch(value) or len(value) > 253:
        raise ConfigError(f"{value!r} is not a Kubernetes object name")
    return value


def _name(handle: dict[str, Any]) -> str:
    return _dns(JobHandle.of(handle).k8s_job or "")


def _check(ok: bool, what: str, tail: list[str]) -> None:
    if not ok:
        raise CommandFailed(f"{what} failed: {' | '.join(tail) or 'no output'}",
                            hint="check the kubectl context, namespace and permissions (kubectl auth can-i create jobs)")


BACKEND = KubernetesBackend()  # found by backends.registry
