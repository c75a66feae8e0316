# mcp-gpu patrol probe: ONE round trip per host for all its jobs. Static text; values arrive as arguments:
#   CAP  then, per job:  JOB ID BACKEND RUN_DIR OFFSET TMUX_SOCK TMUX_SESS SCHED_ID N_OUT OUT_1 .. OUT_N
# Prints "@@host" facts, then "@@job ID" blocks of key=value lines; new log bytes come base64-encoded.
set -u
export LC_ALL=C
cap=$1; shift
now=$(date +%s)
age() { local m; m=$(stat -c %Y -- "$1" 2>/dev/null) && echo $(( now - m )) || echo -; }
# one process table for every job: "pid pgid stat" (zombies count as gone; tmux may reap late)
procs=$(ps -e -o pid=,pgid=,stat= 2>/dev/null)

echo "@@host"
echo "now=$now"
if [ -f /sys/fs/cgroup/memory.events ]; then
  cg=$(awk -F: '$1=="0"{print $3}' /proc/self/cgroup); f=/sys/fs/cgroup$cg/memory.events; [ -f "$f" ] || f=/sys/fs/cgroup/memory.events
  echo "oom_kill=$(awk '$1=="oom_kill"{print $2}' "$f" 2>/dev/null)"
elif [ -d /sys/fs/cgroup/memory ]; then
  cg=$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup); f=/sys/fs/cgroup/memory$cg/memory.oom_control; [ -f "$f" ] || f=/sys/fs/cgroup/memory/memory.oom_control
  echo "oom_kill=$(awk '$1=="oom_kill"{print $2}' "$f" 2>/dev/null)"
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 15 nvidia-smi --query-gpu=uuid,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits 2>/dev/null | sed 's/^/gpu=/'
  timeout 15 nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits 2>/dev/null | sed 's/^/app=/'
fi

ids=(); dirs=()
while [ $# -gt 0 ]; do
  [ "$1" = JOB ] || { shift; continue; }
  id=$2 backend=$3 rd=$4 off=$5 sock=$6 sess=$7 sched=$8 nout=$9
  shift 9
  outs=()
  while [ "$nout" -gt 0 ] && [ $# -gt 0 ]; do outs+=("$1"); shift; nout=$((nout - 1)); done
  echo "@@job $id"
  # few forks per job: file reads use the `read` builtin; one awk answers pid and group liveness
  if [ -d "$rd" ]; then echo "run_dir=1"; ids+=("$id"); dirs+=("$rd"); else echo "run_dir=0"; fi
  ec=; [ -f "$rd/exit_code" ] && { read -r ec < "$rd/exit_code" || true; echo "exit=$ec"; }
  cx=; [ -f "$rd/cancelled" ] && { read -r cx < "$rd/cancelled" || true; echo "cancelled=$cx"; }
  pid=; pg=; [ -f "$rd/pid" ] && read -r pid < "$rd/pid"; [ -f "$rd/pgid" ] && read -r pg < "$rd/pgid"
  case $pid in ''|*[!0-9]*) pid=0;; esac
  case $pg in ''|*[!0-9]*) pg=0;; esac
  awk -v p="$pid" -v g="$pg" '$3 !~ /^[ZX]/ { if ($1 == p) pa = 1; if ($2 == g && n < 64) { l = l (n ? "," : "") $1; n++ } }
    END { print "pid_alive=" (pa ? 1 : 0); print "group_alive=" (n ? 1 : 0); if (n) print "pids=" l }' <<< "$procs"
  if [ "$backend" = tmux ] && [ -n "$sock" ] && command -v tmux >/dev/null 2>&1; then
    sa=0; tmux -L "$sock" has-session -t "=$sess" 2>/dev/null && sa=1; echo "session=$sa"
  fi
  case $backend in
    slurm)  # the Slurm backend's own observe script (squeue, sacct or scontrol), defined above this text
      if command -v squeue >/dev/null 2>&1 && [ -n "$sched" ]; then
        slurm_observe "$sched" "$rd" | sed 's/^/slurm./'
      fi ;;
    kubernetes)  # $sched is "NAME [kubectl flags...]" built by the Kubernetes backend
      if command -v kubectl >/dev/null 2>&1 && [ -n "$sched" ]; then
        read -r -a k <<< "$sched"
        echo "k8s_job_b64=$(timeout 20 kubectl "${k[@]:1}" get job "${k[0]}" -o json 2>/dev/null | base64 -w0)"
        echo "k8s_pods_b64=$(timeout 20 kubectl "${k[@]:1}" get pods -l "job-name=${k[0]}" -o json 2>/dev/null | base64 -w0)"
      fi ;;
  esac
  log=$rd/out.log
  if [ -f "$log" ]; then
    st=$(stat -c '%s %Y' -- "$log" "$rd/heartbeat" 2>/dev/null)
    size=${st%% *}; lm=${st#* }; lm=${lm%%$'\n'*}
    echo "log_size=$size"; echo "log_age=$(( now - lm ))"
    case $st in *$'\n'*) hm=${st##* }; echo "hb_age=$(( now - hm ))";; esac
    from=$off
    [ "$from" -gt "$size" ] && from=0   # truncated or rotated: read again from the start
    if [ $(( size - from )) -gt "$cap" ]; then from=$(( size - cap )); fi
    echo "log_from=$from"
    [ "$size" -gt "$from" ] && echo "log_b64=$(tail -c +$(( from + 1 )) -- "$log" | head -c "$cap" | base64 -w0)"
  else
    echo "log_size=-"
    [ -f "$rd/heartbeat" ] && echo "hb_age=$(age "$rd/heartbeat")"
  fi
  for o in "${outs[@]}"; do
    [ -d "$o" ] || continue
    # the newest checkpoint-like file (a metrics.json written every step is not a checkpoint); any file otherwise
    find "$o" -maxdepth 3 -type f ! -name '*.tmp*' ! -name '*.partial' -printf '%T@ %s %p\n' 2>/dev/null |
      awk '{ c = ($3 ~ /\.(pt|pth|ckpt|safetensors|npz|npy|bin|pkl|h5)$/) }
           c && $1 > bc { bc = $1; b = $0 } $1 > ba { ba = $1; a = $0 }
           END { if (b != "") print "ckpt=" b; else if (a != "") print "ckpt=" a }'
  done
done
# one df for every run dir (bytes and inodes), in argument order
if [ ${#dirs[@]} -gt 0 ]; then
  echo "@@df"
  paste <(printf '%s\n' "${ids[@]}") <(df -P -B1 -- "${dirs[@]}" 2>/dev/null | awk 'NR>1{print $6" "$2" "$4}') \
        <(df -P -i -- "${dirs[@]}" 2>/dev/null | awk 'NR>1{print $2" "$4}') | awk -F'\t' '{print "df=" $1 " " $2 " " $3}'
fi
echo "@@end"
