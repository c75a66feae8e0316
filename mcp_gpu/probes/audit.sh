# mcp-gpu audit probe: ONE round trip gathers everything audit_env needs. Static text: values arrive
# as positional arguments ($1 run/checkpoint dir, $2 python, $3... profile paths to measure), never spliced in.
# Each section starts with a line "@@<name>" so the parser can split the output.
run_dir=${1:-}
py=${2:-python3}
shift 2 2>/dev/null || shift $#
extra=("$@")
export LC_ALL=C
sec() { printf '\n@@%s\n' "$1"; }

sec meta
printf 'hostname=%s\nkernel=%s\nuser=%s\nhome=%s\nnproc=%s\n' "$(hostname 2>/dev/null)" "$(uname -r)" "$(id -un)" "$HOME" "$(nproc 2>/dev/null)"
printf 'uptime_s=%s\n' "$(cut -d' ' -f1 /proc/uptime 2>/dev/null)"

sec nvidia
fields=index,name,uuid,driver_version,memory.total,memory.used,utilization.gpu,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.max.sm,ecc.errors.uncorrected.volatile.total,retired_pages.pending,clocks_throttle_reasons.active,pci.bus_id
if command -v nvidia-smi >/dev/null 2>&1; then
  out=$(timeout 20 nvidia-smi --query-gpu=$fields --format=csv,noheader,nounits 2>&1); rc=$?
  printf 'rc=%s\n%s\n' "$rc" "$out"
else
  printf 'rc=127\n'
fi

sec remapped
command -v nvidia-smi >/dev/null 2>&1 && timeout 10 nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv,noheader,nounits 2>/dev/null

sec xid
if k=$(dmesg 2>/dev/null) || k=$(journalctl -k --no-pager -q 2>/dev/null); then
  echo readable=1; printf '%s\n' "$k" | grep -E 'NVRM: Xid' | tail -n 20
else
  echo readable=0
fi

sec df
# the run dir may not exist yet: measure the nearest existing parent
probe_dir=$run_dir
while [ -n "$probe_dir" ] && [ ! -e "$probe_dir" ]; do probe_dir=$(dirname "$probe_dir"); done
printf 'run_dir=%s\nrun_probe=%s\nrun_exists=%s\n' "$run_dir" "$probe_dir" "$([ -n "$run_dir" ] && [ -d "$run_dir" ] && echo 1 || echo 0)"
for p in / "$HOME" ${probe_dir:+"$probe_dir"} /dev/shm; do
  [ -e "$p" ] || continue
  b=$(df -P -B1 -- "$p" 2>/dev/null | tail -n 1)
  i=$(df -P -i -- "$p" 2>/dev/null | tail -n 1)
  printf 'path=%s\tbytes=%s\tinodes=%s\n' "$p" "$b" "$i"
done
# the platform profile's data/durable dirs: measured only where they exist (keyed by the profile's spelling)
for orig in "${extra[@]}"; do
  case $orig in "~") p=$HOME;; "~/"*) p=$HOME/${orig#"~/"};; '$HOME/'*) p=$HOME/${orig#'$HOME/'};; *) p=$orig;; esac
  [ -e "$p" ] || continue
  b=$(df -P -B1 -- "$p" 2>/dev/null | tail -n 1)
  i=$(df -P -i -- "$p" 2>/dev/null | tail -n 1)
  printf 'path=%s\tbytes=%s\tinodes=%s\torig=%s\n' "$p" "$b" "$i" "$orig"
done

sec cgroup
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  cg=$(awk -F: '$1=="0"{print $3}' /proc/self/cgroup); d=/sys/fs/cgroup$cg; [ -f "$d/memory.max" ] || d=/sys/fs/cgroup
  echo version=2
  echo "memory_max=$(cat "$d/memory.max" 2>/dev/null)"
  echo "memory_current=$(cat "$d/memory.current" 2>/dev/null)"
  echo "oom_kill=$(awk '$1=="oom_kill"{print $2}' "$d/memory.events" 2>/dev/null)"
  echo "cpu_max=$(cat "$d/cpu.max" 2>/dev/null)"
elif [ -d /sys/fs/cgroup/memory ]; then
  cg=$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup); d=/sys/fs/cgroup/memory$cg; [ -f "$d/memory.limit_in_bytes" ] || d=/sys/fs/cgroup/memory
  echo version=1
  echo "memory_max=$(cat "$d/memory.limit_in_bytes" 2>/dev/null)"
  echo "memory_current=$(cat "$d/memory.usage_in_bytes" 2>/dev/null)"
  echo "oom_kill=$(awk '$1=="oom_kill"{print $2}' "$d/memory.oom_control" 2>/dev/null)"
  c=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/{print $3}' /proc/self/cgroup); cd_=/sys/fs/cgroup/cpu$c; [ -f "$cd_/cpu.cfs_quota_us" ] || cd_=/sys/fs/cgroup/cpu
  echo "cpu_max=$(cat "$cd_/cpu.cfs_quota_us" 2>/dev/null) $(cat "$cd_/cpu.cfs_period_us" 2>/dev/null)"
else
  echo version=0
fi

sec meminfo
grep -E '^(MemTotal|MemAvailable):' /proc/meminfo

sec python
if command -v "$py" >/dev/null 2>&1; then
  timeout 45 "$py" - <<'PY' 2>&1
import json, platform, sys
out = {"python": platform.python_version(), "executable": sys.executable}
try:
    import torch
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())
        out["device_count"] = torch.cuda.device_count() if out["cuda_available"] else 0
    except Exception as exc:  # a broken driver raises here
        out["cuda_error"] = str(exc)[:200]
    out["threads"] = torch.get_num_threads()
except ImportError as exc:
    out["torch_error"] = str(exc)[:200]
except Exception as exc:
    out["torch_error"] = f"{type(exc).__name__}: {exc}"[:200]
print("PYJSON " + json.dumps(out))
PY
  echo "rc=$?"
else
  echo "rc=127"
fi
sec end
