#!/usr/bin/env bash
# mcp-gpu guard: a small watcher ON the box that outlives the agent, the SSH session and the server.
# Static text; every value arrives as an argument. The stop credential, if any, arrives as one line on fd 3 (a
# pipe from the launcher, never written to disk nor put in an environment /proc shows); failing that it is read
# from the variable KEY_ENV the platform itself sets inside the instance (our env, then PID 1's).
# Args: GD RUN_ROOT DEADLINE IDLE_S GRACE_S INTERVAL_S GPU_IDLE_PCT METHOD URL BODY KEY_ENV
#   DEADLINE: epoch seconds, 0 = no deadline;  IDLE_S: 0 = no idle rule
#   METHOD: POST | PUT | PATCH (the platform's NON-destructive stop) or "none" (notice only)
# Files in GD: state (one line, rewritten), events.log (append-only: "<epoch> <event> <detail>"), NOTICE.
set -u
export LC_ALL=C
gd=$1 root=$2 deadline=$3 idle_s=$4 grace=$5 interval=$6 gpu_idle=$7 method=$8 url=$9 body=${10} key_env=${11}
key=
{ IFS= read -r -u 3 key || :; } 2>/dev/null
exec 3<&-
cd -- "$gd" || exit 97

log() { printf '%s %s %s\n' "$(date +%s)" "$1" "${2:-}" >> events.log; }
state() { printf '%s\n' "$*" > state.tmp.$$ && mv -f -- state.tmp.$$ state; }
notice() { printf '%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ) $1" >> NOTICE; log notice "$1"; }

# every live (non-zombie) process group of an mcp-gpu job under the run root, one `ps` for all of them
live_groups() {
  local rd pg table
  table=$(ps -e -o pgid=,stat= 2>/dev/null | awk '$2 !~ /^[ZX]/ {print $1}' | sort -u)
  for rd in "$root"/*/; do
    [ -f "$rd/pgid" ] || continue
    pg=
    read -r pg < "$rd/pgid" || true
    case $pg in ''|*[!0-9]*) continue;; esac
    [ "$pg" -gt 1 ] || continue
    grep -qx -- "$pg" <<< "$table" && printf '%s\n' "$pg"
  done
}

# 0 = every GPU below the idle threshold (or no GPU at all); 1 = busy; 2 = cannot tell
gpu_idle_now() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  local out u
  out=$(timeout 15 nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits 2>/dev/null | head -c 4096) \
    || return 2
  [ -n "$out" ] || return 2
  while read -r u; do
    u=${u%%[!0-9]*}
    [ -n "$u" ] || return 2
    [ "$u" -lt "$gpu_idle" ] || return 1
  done <<< "$out"
  return 0
}

credential() {
  [ -n "$key" ] && { printf '%s' "$key"; return; }
  [ -n "$key_env" ] || return
  local v=${!key_env:-}
  if [ -z "$v" ] && [ -r /proc/1/environ ]; then
    v=$(tr '\0' '\n' < /proc/1/environ 2>/dev/null | sed -n "s/^${key_env}=//p" | head -n 1)
  fi
  printf '%s' "$v"
}

fire() {
  local rule=$1 pgs pg end code cred
  log fire "$rule"
  state "firing rule=$rule"
  pgs=$(live_groups)
  for pg in $pgs; do kill -TERM -- "-$pg" 2>/dev/null && log term "$pg"; done
  end=$(( $(date +%s) + grace ))
  while [ -n "$(live_groups)" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 1; done
  pgs=$(live_groups)
  if [ -n "$pgs" ]; then
    for pg in $pgs; do kill -KILL -- "-$pg" 2>/dev/null && log kill "$pg after ${grace}s grace"; done
  elif [ -n "$(ls -A "$root" 2>/dev/null)" ]; then
    log jobs_ended "every job ended within the grace"
  fi
  if [ "$method" = none ]; then
    notice "GUARD FIRED ($rule) but did NOT stop the meter: $url. The machine is STILL BILLING: stop it by hand."
    state "fired rule=$rule stop=refused"
    exit 0
  fi
  cred=$(credential)
  if [ -z "$cred" ]; then
    log refuse "no credential (neither sent nor set by the platform as $key_env)"
    notice "GUARD FIRED ($rule) but had no credential to stop the meter. The machine is STILL BILLING."
    state "fired rule=$rule stop=no-credential"
    exit 0
  fi
  if ! command -v curl >/dev/null 2>&1; then
    notice "GUARD FIRED ($rule) but curl is missing on this box. The machine is STILL BILLING."
    state "fired rule=$rule stop=no-curl"
    exit 0
  fi
  # the key goes to curl on stdin (-H @-), never in argv where `ps` would show it
  code=$(printf 'Authorization: Bearer %s\n' "$cred" |
    curl -sS -o stop.out -w '%{http_code}' --max-time 60 -X "$method" -H @- -H 'Content-Type: application/json' \
      ${body:+--data "$body"} -- "$url" 2>>guard.err)
  case $code in
    2??) log stop "$method $url -> $code"; state "fired rule=$rule stop=done http=$code" ;;
    *) log stop_failed "$method $url -> ${code:-no answer}"
       notice "GUARD FIRED ($rule); the stop call failed (${code:-no answer}). The machine may STILL BE BILLING."
       state "fired rule=$rule stop=failed http=${code:-none}" ;;
  esac
  exit 0
}

trap 'log disarmed "TERM received"; state "disarmed"; exit 0' TERM
log armed "deadline=$deadline idle_s=$idle_s grace=$grace method=$method"
idle_since=
warned=0
while :; do
  now=$(date +%s)
  if [ "$deadline" -gt 0 ] && [ "$now" -ge "$deadline" ]; then fire deadline; fi
  busy=$(live_groups | head -n 1)
  if [ "$idle_s" -gt 0 ]; then
    if [ -z "$busy" ]; then
      gpu_idle_now; g=$?
      if [ "$g" = 0 ]; then
        [ -n "$idle_since" ] || { idle_since=$now; log idle_start "no job process, GPU idle"; }
        [ $(( now - idle_since )) -ge "$idle_s" ] && fire idle
      else
        [ -n "$idle_since" ] && log idle_end "GPU busy"
        idle_since=
        if [ "$g" = 2 ] && [ "$warned" = 0 ]; then log refuse "idle rule: cannot read GPU use; not idle"; warned=1; fi
      fi
    else
      [ -n "$idle_since" ] && log idle_end "job running"
      idle_since=
    fi
  fi
  state "armed deadline=$deadline idle_s=$idle_s idle_since=${idle_since:-0} checked=$now jobs=$( [ -n "$busy" ] && echo busy || echo none)"
  sleep "$interval" & wait $!
done
