# shellcheck shell=bash
# mcp-gpu observation probe: the facts of EVERY job on this host in ONE round trip (static text).
#
# Args: LOG_CAP (new log bytes per job) TOTAL_CAP (bytes of output in all) LIST_CAP (checkpoint-listing records)
# Stdin, NUL-separated fields:
#   R ROOT                                   a run root whose run dirs (ROOT/*/meta.json) are reported
#   J BACKEND RUN_DIR WORKDIR LOG_OFFSET TMUX_SOCKET TMUX_SESSION N_SCHED SCHED... N_OUT OUT...
# Stdout: NUL-ended KEY=VALUE records (lib/frame.sh): `h.*` host facts, `jN.*` facts of the N-th job (N counts
# the J entries, so one job's content can never be credited to another), `d` a run dir found under a root, and
# `jN.end` / `h.end` closing each part (a part without its end was cut off and proves nothing).
# include: lib/frame.sh
# include: lib/proc.sh
# include: lib/slurm.sh
# include: lib/logs.sh

observe_main() {
  local log_cap=$1 list_cap=$3
  local -a roots=() JB=() JRD=() JWD=() JOFF=() JSOCK=() JSESS=() JS0=() JSN=() JO0=() JON=() SCHED=() OUTS=()
  local tag b rd wd off sock sess n k x i tmp input=/dev/stdin
  tmp=$(mktemp -d 2> /dev/null) || tmp=
  # shellcheck disable=SC2064  # expand now: the path is fixed
  [ -n "$tmp" ] && trap "rm -rf -- '$tmp'" EXIT
  # bash reads a pipe one byte at a time but a regular file in blocks: land stdin in a file first
  if [ -n "$tmp" ] && cat > "$tmp/in"; then input=$tmp/in; fi
  while IFS= read -r -d '' tag; do
    case $tag in
      R) IFS= read -r -d '' x && roots+=("$x") ;;
      J)
        if ! { IFS= read -r -d '' b && IFS= read -r -d '' rd && IFS= read -r -d '' wd && IFS= read -r -d '' off &&
          IFS= read -r -d '' sock && IFS= read -r -d '' sess && IFS= read -r -d '' n; }; then break; fi
        JS0+=("${#SCHED[@]}")
        case $n in '' | *[!0-9]*) n=0 ;; esac
        for ((k = 0; k < n; k++)); do IFS= read -r -d '' x && SCHED+=("$x"); done
        JSN+=("$n")
        IFS= read -r -d '' n || break
        JO0+=("${#OUTS[@]}")
        case $n in '' | *[!0-9]*) n=0 ;; esac
        expand_home wd "$wd"
        for ((k = 0; k < n; k++)); do
          IFS= read -r -d '' x || break
          expand_home x "$x"
          case $x in /*) ;; *) x=${wd%/}/$x ;; esac  # relative outputs live in the job's workdir
          OUTS+=("$x")
        done
        JON+=("$n")
        expand_home rd "$rd"
        while [ "${#rd}" -gt 1 ] && [ "${rd%/}" != "$rd" ]; do rd=${rd%/}; done
        case $off in '' | *[!0-9]*) off=0 ;; esac
        JB+=("$b") JRD+=("$rd") JWD+=("$wd") JOFF+=("$off") JSOCK+=("$sock") JSESS+=("$sess")
        ;;
    esac
  done < "$input"
  local nj=${#JB[@]} now
  printf -v now '%(%s)T' -1
  rec h.now "$now"
  rec h.jobs "$nj"

  # --- host facts: memory-cgroup OOM kills, GPUs (bounded: a hung or chatty nvidia-smi cannot stall or flood us)
  local f cg line key val
  if [ -f /sys/fs/cgroup/memory.events ]; then
    cg=; while IFS=: read -r key _ val; do [ "$key" = 0 ] && cg=$val; done < /proc/self/cgroup
    f=/sys/fs/cgroup$cg/memory.events; [ -f "$f" ] || f=/sys/fs/cgroup/memory.events
  else
    cg=; while IFS=: read -r _ key val; do [ "$key" = memory ] && cg=$val; done < /proc/self/cgroup 2> /dev/null
    f=/sys/fs/cgroup/memory$cg/memory.oom_control; [ -f "$f" ] || f=/sys/fs/cgroup/memory/memory.oom_control
  fi
  if [ -f "$f" ]; then
    while read -r key val; do [ "$key" = oom_kill ] && rec h.oom_kill "$val"; done < "$f"
  fi
  if command -v nvidia-smi > /dev/null 2>&1; then
    x=$(timeout 15 nvidia-smi --query-gpu=uuid,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits 2> /dev/null | head -c 65536)
    rec h.gpus "$x"
    x=$(timeout 15 nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits 2> /dev/null | head -c 65536)
    rec h.apps "$x"
  fi

  # --- one snapshot each: processes, tmux sessions per socket, log/heartbeat stats, filesystems, checkpoints
  proc_snapshot
  rec h.proc_ok "$PROC_OK"
  local -A TMUXS=() TMUXOK=() FSZ=() FMT=() FS=() CK=() CKANY=() MEAS=()
  local have_tmux=0
  command -v tmux > /dev/null 2>&1 && have_tmux=1
  for ((i = 0; i < nj; i++)); do
    sock=${JSOCK[i]}
    if [ "${JB[i]}" != tmux ] || [ -z "$sock" ] || [ "$have_tmux" != 1 ] || [ -n "${TMUXOK[$sock]:-}" ]; then continue; fi
    TMUXOK[$sock]=1
    while IFS= read -r x; do TMUXS["$sock/$x"]=1; done < <(tmux -L "$sock" list-sessions -F '#{session_name}' 2> /dev/null | head -n 100000)
  done
  local -a rds=() dirs=() odirs=()
  local -A seen=()
  for ((i = 0; i < nj; i++)); do
    rd=${JRD[i]}
    case $rd in /?*) [ -d "$rd" ] && rds+=("$rd") ;; esac
  done
  if [ "${#rds[@]}" -gt 0 ] && [ -n "$tmp" ]; then
    find -H "${rds[@]}" -maxdepth 1 \( -name out.log -o -name heartbeat \) -printf '%h/%f\0%s\0%Ts\0' 2> /dev/null > "$tmp/st"
    while IFS= read -r -d '' f && IFS= read -r -d '' x && IFS= read -r -d '' val; do
      FSZ[$f]=$x FMT[$f]=$val
    done < "$tmp/st"
  fi
  # the filesystem of every output (its nearest existing ancestor when not made yet) and of every run dir
  for ((i = 0; i < nj; i++)); do
    for ((k = JO0[i]; k < JO0[i] + JON[i]; k++)); do
      x=${OUTS[k]}
      case $x in /*) ;; *) continue ;; esac
      if [ -d "$x" ] && [ -z "${seen[$x]:-}" ]; then seen[$x]=1; odirs+=("$x"); fi
      f=$x
      while [ -n "$f" ] && [ ! -d "$f" ]; do f=${f%/*}; done
      MEAS[$x]=${f:-/}
    done
    case ${JRD[i]} in /?*) MEAS[${JRD[i]}]=${JRD[i]} ;; esac
  done
  for x in "${MEAS[@]}"; do [ -n "${seen[#$x]:-}" ] || { seen[#$x]=1; dirs+=("$x"); }; done
  if [ "${#dirs[@]}" -gt 0 ] && [ -n "$tmp" ]; then
    stat -f --printf '%n\0%S %b %a %c %d %T\0' -- "${dirs[@]}" 2> /dev/null > "$tmp/fs"
    while IFS= read -r -d '' f && IFS= read -r -d '' x; do FS[$f]=$x; done < "$tmp/fs"
  fi
  # newest file per output dir (checkpoint-like names first); one find for all, its output bounded; -H: an
  # output that is a symlink to a big disk is followed (only the named paths, never links inside them)
  local cut=0 cnt=0 root mt sz rel
  if [ "${#odirs[@]}" -gt 0 ] && [ -n "$tmp" ]; then
    find -H "${odirs[@]}" -maxdepth 3 -type f ! -name '*.tmp*' ! -name '*.partial' -printf '%H\0%Ts\0%s\0%P\0' 2> /dev/null |
      head -z -n "$((list_cap * 4))" > "$tmp/ck"
    while IFS= read -r -d '' root && IFS= read -r -d '' mt && IFS= read -r -d '' sz && IFS= read -r -d '' rel; do
      cnt=$((cnt + 1))
      case $mt in '' | *[!0-9]*) continue ;; esac
      case $rel in
        *.pt | *.pth | *.ckpt | *.safetensors | *.npz | *.npy | *.bin | *.pkl | *.h5)
          x=${CK[$root]:-}
          [ -z "$x" ] || [ "$mt" -gt "${x%% *}" ] && CK[$root]="$mt $sz $rel" ;;
      esac
      x=${CKANY[$root]:-}
      [ -z "$x" ] || [ "$mt" -gt "${x%% *}" ] && CKANY[$root]="$mt $sz $rel"
    done < "$tmp/ck"
    [ "$cnt" -ge "$list_cap" ] && cut=1
  fi
  rec h.list_cut "$cut"

  # --- run dirs on this host that the caller may not know (the teardown gate refuses to forget them)
  local nd=0 m
  for root in "${roots[@]}"; do
    expand_home root "$root"
    for m in "$root"/*/meta.json; do
      [ -f "$m" ] || continue
      x=${m%/meta.json}
      rec d "${x##*/}"
      nd=$((nd + 1))
      [ "$nd" -ge 20000 ] && break 2
    done
  done

  # --- per job
  local ec cx pid pg log size from cnt2 hb sa o st
  local -a LOGS=()
  for ((i = 0; i < nj; i++)); do
    rd=${JRD[i]} b=${JB[i]}
    if [ -d "$rd" ]; then rec "j$i.rd" 1; else rec "j$i.rd" 0; fi
    read_small "$rd/exit_code" ec && rec "j$i.exit" "$ec"
    read_small "$rd/cancelled" cx && rec "j$i.cancelled" "$cx"
    read_small "$rd/pid" pid
    read_small "$rd/pgid" pg
    rec "j$i.pid" "$pid"
    rec "j$i.pgid" "$pg"
    x=0
    case $pid in '' | *[!0-9]* | 0 | 1) ;; *) [ -n "${PROC_PID[$pid]:-}" ] && x=1 ;; esac
    rec "j$i.pid_alive" "$x"
    x=0
    case $pg in '' | *[!0-9]* | 0 | 1) ;; *) [ -n "${PROC_PG[$pg]:-}" ] && x=1 ;; esac
    rec "j$i.group_alive" "$x"
    # shellcheck disable=SC2153  # PROC_PIDS comes from lib/proc.sh
    [ "$x" = 1 ] && rec "j$i.pids" "${PROC_PIDS[$pg]}"
    # the wrapper outlives the job's group to write exit_code: alive with no exit_code = the end is being recorded
    x=0
    read_small "$rd/wrapper_pid" o && case $o in '' | *[!0-9]* | 0 | 1) ;; *) [ -n "${PROC_PID[$o]:-}" ] && x=1 ;; esac
    rec "j$i.wrapper_alive" "$x"
    if [ "$b" = tmux ] && [ -n "${JSOCK[i]}" ] && [ "$have_tmux" = 1 ]; then
      sa=0; [ -n "${TMUXS["${JSOCK[i]}/${JSESS[i]}"]:-}" ] && sa=1
      rec "j$i.session" "$sa"
    fi
    case $b in
      slurm)
        if command -v squeue > /dev/null 2>&1 && [ "${JSN[i]}" -gt 0 ]; then
          x=$(slurm_observe "${SCHED[JS0[i]]}" "$rd" | head -c 16384)
          rec "j$i.slurm" "$x"
        fi ;;
      kubernetes)
        if command -v kubectl > /dev/null 2>&1 && [ "${JSN[i]}" -gt 0 ]; then
          local -a kf=("${SCHED[@]:JS0[i]+1:JSN[i]-1}")
          o=${SCHED[JS0[i]]}
          x=$(timeout 20 kubectl "${kf[@]}" get job "$o" -o json 2>&1 | head -c 1048576; exit "${PIPESTATUS[0]}")
          rec "j$i.k8s_job" "$? $x"
          x=$(timeout 20 kubectl "${kf[@]}" get pods -l "job-name=$o" -o json 2>&1 | head -c 1048576; exit "${PIPESTATUS[0]}")
          rec "j$i.k8s_pods" "$? $x"
        fi ;;
    esac
    log=$rd/out.log
    size=${FSZ[$log]:-}
    if [ -n "$size" ]; then
      rec "j$i.log" "$size $((now - ${FMT[$log]}))"
      from=${JOFF[i]}
      [ "$from" -gt "$size" ] && from=0  # truncated or rotated: read again from the start
      [ $((size - from)) -gt "$log_cap" ] && from=$((size - log_cap))
      if [ "$size" -gt "$from" ] && [ -f "$log" ]; then
        LOGS+=("$i" "$log" "$from" "$((size - from))")  # read after this loop, all in one go
      else
        rec "j$i.log_new" "$from "
      fi
    fi
    hb=${FMT[$rd/heartbeat]:-}
    [ -n "$hb" ] && rec "j$i.hb_age" "$((now - hb))"
    [ -n "${FS[$rd]:-}" ] && rec "j$i.rdfs" "${FS[$rd]}"
    cnt2=0
    for ((k = JO0[i]; k < JO0[i] + JON[i]; k++)); do
      o=${OUTS[k]}
      m=${MEAS[$o]:-}
      st=0; [ -d "$o" ] && st=1
      rec "j$i.out" "$cnt2 $st ${FS[$m]:--}"
      x=${CK[$o]:-${CKANY[$o]:-}}
      [ -n "$x" ] && rec "j$i.ckpt" "$cnt2 $x"
      cnt2=$((cnt2 + 1))
    done
    if [ "${#LOGS[@]}" -eq 0 ] || [ "${LOGS[-4]}" != "$i" ]; then rec "j$i.end" 1; fi
  done
  # the new log bytes of every job, base64 (one python3 for all where there is one; else a pipe per job); a
  # job's end record follows its log record, so a cut answer never passes half a job for a whole one
  read_logs "${LOGS[@]}"
  times > "${tmp:-/dev/null}/times" 2> /dev/null && {
    x=; while IFS= read -r line; do x+="$line "; done < "$tmp/times"
    rec h.times "$x"
  }
  rec h.end 1
}

set -u
export LC_ALL=C
observe_main "$@" | head -c "${2:-16777216}"
