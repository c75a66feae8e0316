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
in_group() { case $1 in ''|*[!0-9]*) return 0;; esac
  awk -v g="$1" '$2==g && $3 !~ /^[ZX]/ {printf "%s,", $1}' <<< "$procs"; }
pid_alive() { case $1 in ''|*[!0-9]*) return 1;; esac
  awk -v p="$1" '$1==p && $3 !~ /^[ZX]/ {f=1} END {exit !f}' <<< "$procs"; }

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

while [ $# -gt 0 ]; do
  [ "$1" = JOB ] || { shift; continue; }
  id=$2 backend=$3 rd=$4 off=$5 sock=$6 sess=$7 sched=$8 nout=$9
  shift 9
  outs=()
  while [ "$nout" -gt 0 ] && [ $# -gt 0 ]; do outs+=("$1"); shift; nout=$((nout - 1)); done
  echo "@@job $id"
  [ -d "$rd" ] && echo "run_dir=1" || echo "run_dir=0"
  [ -f "$rd/exit_code" ] && echo "exit=$(head -c 200 -- "$rd/exit_code" | head -n 1)"
  [ -f "$rd/cancelled" ] && echo "cancelled=$(head -c 100 -- "$rd/cancelled")"
  pid=$(cat -- "$rd/pid" 2>/dev/null) pg=$(cat -- "$rd/pgid" 2>/dev/null)
  pa=0; pid_alive "$pid" && pa=1; echo "pid_alive=$pa"
  pids=$(in_group "$pg" | head -c 600)
  ga=0; [ -n "$pids" ] && ga=1; echo "group_alive=$ga"
  [ -n "$pids" ] && echo "pids=${pids%,}"
  if [ "$backend" = tmux ] && [ -n "$sock" ] && command -v tmux >/dev/null 2>&1; then
    sa=0; tmux -L "$sock" has-session -t "=$sess" 2>/dev/null && sa=1; echo "session=$sa"
  fi
  case $backend in
    slurm)
      if command -v squeue >/dev/null 2>&1 && [ -n "$sched" ]; then
        s=$(squeue -h -j "$sched" -o %T 2>/dev/null | head -n 1)
        [ -z "$s" ] && s=$(sacct -X -n -P -j "$sched" --format=State,ExitCode 2>/dev/null | head -n 1)
        [ -z "$s" ] && s=$(scontrol show job "$sched" 2>/dev/null | tr ' ' '\n' | grep -E '^(JobState|ExitCode)=' | tr '\n' ' ')
        echo "sched=$s"
      else
        echo "sched=?"
      fi ;;
    kubernetes)
      if command -v kubectl >/dev/null 2>&1 && [ -n "$sched" ]; then
        echo "k8s_b64=$(timeout 20 kubectl get job "$sched" -o json 2>/dev/null | base64 -w0)"
      else
        echo "sched=?"
      fi ;;
  esac
  log=$rd/out.log
  if [ -f "$log" ]; then
    size=$(stat -c %s -- "$log")
    echo "log_size=$size"; echo "log_age=$(age "$log")"
    from=$off
    [ "$from" -gt "$size" ] && from=0   # truncated or rotated: read again from the start
    if [ $(( size - from )) -gt "$cap" ]; then from=$(( size - cap )); fi
    echo "log_from=$from"
    [ "$size" -gt "$from" ] && echo "log_b64=$(tail -c +$(( from + 1 )) -- "$log" | head -c "$cap" | base64 -w0)"
  else
    echo "log_size=-"
  fi
  [ -f "$rd/heartbeat" ] && echo "hb_age=$(age "$rd/heartbeat")"
  for o in "${outs[@]}"; do
    [ -d "$o" ] || continue
    # checkpoint-like files first (a metrics.json written every step is not a checkpoint); any file otherwise
    newest=$(find "$o" -maxdepth 3 -type f \( -name '*.pt' -o -name '*.pth' -o -name '*.ckpt' -o -name '*.safetensors' \
      -o -name '*.npz' -o -name '*.npy' -o -name '*.bin' -o -name '*.pkl' -o -name '*.h5' \) ! -name '*.tmp*' \
      -printf '%T@ %s %p\n' 2>/dev/null | sort -n | tail -n 1)
    [ -n "$newest" ] || newest=$(find "$o" -maxdepth 3 -type f ! -name '*.tmp*' ! -name '*.partial' -printf '%T@ %s %p\n' 2>/dev/null | sort -n | tail -n 1)
    [ -n "$newest" ] && echo "ckpt=$newest"
  done
  df -P -B1 -- "$rd" 2>/dev/null | awk 'NR==2{print "disk="$6" "$2" "$4}'
  df -P -i -- "$rd" 2>/dev/null | awk 'NR==2{print "inodes="$2" "$4}'
done
echo "@@end"
