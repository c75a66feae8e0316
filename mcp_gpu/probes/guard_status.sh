#!/usr/bin/env bash
# Report the guard's state and its events since OFFSET, every remote string base64-encoded (no file content can
# imitate the framing) and every read bounded. Args: GD OFFSET [disarm]
set -u
gd=$1 off=$2 act=${3:-}
case $off in ''|*[!0-9]*) off=0;; esac
[ -d "$gd" ] || { echo "present=0"; exit 0; }
pid=$(head -c 32 -- "$gd/pid" 2>/dev/null)
case $pid in ''|*[!0-9]*) pid=;; esac
alive=0
[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && alive=1
if [ "$act" = disarm ] && [ "$alive" = 1 ]; then
  kill -TERM -- "-$pid" 2>/dev/null
  i=0; while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  alive=0; kill -0 "$pid" 2>/dev/null && alive=1
fi
size=$(stat -c %s -- "$gd/events.log" 2>/dev/null || echo 0)
[ "$off" -le "$size" ] || off=0
printf 'present=1\nalive=%s\nnow=%s\nevents_size=%s\nevents_from=%s\n' "$alive" "$(date +%s)" "$size" "$off"
printf 'state_b64=%s\n' "$(head -c 2048 -- "$gd/state" 2>/dev/null | base64 -w0)"
printf 'events_b64=%s\n' "$(tail -c +$((off + 1)) -- "$gd/events.log" 2>/dev/null | head -c 65536 | base64 -w0)"
printf 'notice_b64=%s\n' "$(tail -c 4096 -- "$gd/NOTICE" 2>/dev/null | base64 -w0)"
