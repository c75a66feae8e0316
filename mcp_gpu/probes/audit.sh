# mcp-gpu audit probe: ONE round trip gathers everything audit_env needs. Static text: values arrive
# as positional arguments ($1 run/checkpoint dir, $2 python, $3 nvidia-smi timeout in seconds, $4... profile
# paths to measure), never spliced in.
# Framing no remote output can imitate: each section is ONE line `@@<name> <base64 of its whole output>`, so
# whatever a command prints (`@@meta`, CR, NUL, escapes) stays inside its own section's payload. Every
# section's output is capped on this side (`head -c`), and `@@end` closes a complete probe.
run_dir=${1:-}
py=${2:-python3}
smi_t=${3:-20}
case $smi_t in ''|*[!0-9]*) smi_t=20 ;; esac
shift 3 2>/dev/null || shift $#
extra=("$@")
export LC_ALL=C
CAP=262144
emit() {
  # emit NAME FUNCTION: run FUNCTION, cap its output at CAP bytes, print it as one base64 line
  local name=$1
  printf '@@%s ' "$name"
  "$2" 2>&1 | head -c "$CAP" | base64 | tr -d '\n'
  printf '\n'
}

sec_meta() {
printf 'hostname=%s\nkernel=%s\nuser=%s\nhome=%s\nnproc=%s\n' "$(hostname 2>/dev/null)" "$(uname -r)" "$(id -un)" "$HOME" "$(nproc 2>/dev/null)"
printf 'uptime_s=%s\n' "$(cut -d' ' -f1 /proc/uptime 2>/dev/null)"
}

fields=index,name,uuid,driver_version,memory.total,memory.used,utilization.gpu,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.max.sm,ecc.errors.uncorrected.volatile.total,retired_pages.pending,clocks_throttle_reasons.active,pci.bus_id
smi_rc=127
# nvidia-smi's own output goes to a file capped at CAP+1 bytes (more than CAP = it printed too much), its exit
# status is kept apart from the output, and `timeout` (124) tells a hang from a driver failure.
smi_out=$(mktemp 2>/dev/null || echo "/tmp/mcp-gpu-smi.$$")
if command -v nvidia-smi >/dev/null 2>&1; then
  { timeout -k 5 "$smi_t" nvidia-smi --query-gpu="$fields" --format=csv,noheader,nounits 2>&1; echo $? > "$smi_out.rc"; } \
    | head -c $((CAP + 1)) > "$smi_out"
  smi_rc=$(cat "$smi_out.rc" 2>/dev/null)
  [ -n "$smi_rc" ] || smi_rc=141  # head stopped reading: nvidia-smi was cut off mid-output
fi
sec_nvidia() {
  printf 'rc=%s\ntimeout_s=%s\nbytes=%s\n' "$smi_rc" "$smi_t" "$(wc -c < "$smi_out" 2>/dev/null || echo 0)"
  head -c "$((CAP - 200))" -- "$smi_out" 2>/dev/null
}
sec_remapped() {
  [ "$smi_rc" = 0 ] || return 0  # a hung or failing nvidia-smi is not asked again
  timeout -k 5 "$smi_t" nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv,noheader,nounits 2>/dev/null
}

sec_xid() {
if k=$(dmesg 2>/dev/null) || k=$(journalctl -k --no-pager -q 2>/dev/null); then
  echo readable=1; printf '%s\n' "$k" | grep -E 'NVRM: Xid' | tail -n 20 | cut -c1-400
else
  echo readable=0
fi
}

sec_df() {
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
# shellcheck disable=SC2016  # the literal spellings a profile may use, not expansions
tilde='~' dhome='$HOME'
for orig in "${extra[@]}"; do
  case $orig in "$tilde") p=$HOME;; "$tilde"/*) p=$HOME/${orig#"$tilde"/};; "$dhome"/*) p=$HOME/${orig#"$dhome"/};; *) p=$orig;; esac
  [ -e "$p" ] || continue
  b=$(df -P -B1 -- "$p" 2>/dev/null | tail -n 1)
  i=$(df -P -i -- "$p" 2>/dev/null | tail -n 1)
  printf 'path=%s\tbytes=%s\tinodes=%s\torig=%s\n' "$p" "$b" "$i" "$orig"
done
}

sec_cgroup() {
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
}

sec_meminfo() { grep -E '^(MemTotal|MemAvailable):' /proc/meminfo; }

sec_python() {
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
}

for s in meta nvidia remapped xid df cgroup meminfo python; do emit "$s" "sec_$s"; done
rm -f -- "$smi_out" "$smi_out.rc"
printf '@@end\n'
