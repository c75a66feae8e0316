# shellcheck shell=bash
# Prepare a job's run directory (static; values arrive as arguments). Prints run_dir=... and workdir=...
# (absolute). Args: RUN_ROOT|'' JOB_ID SHA12 SCRIPT_TEXT WRAPPER_TEXT META_JSON WORKDIR
# Exit 10: workdir missing; 11: the script differs under a running job; 12: cannot write the run dir.
# include: lib/frame.sh
# include: lib/proc.sh
set -u
root=$1 job=$2 sha=$3 script=$4 wrapper=$5 meta=$6 wd=$7
[ -n "$root" ] || root="$HOME/.mcp-gpu/runs"
expand_home root "$root"
expand_home wd "$wd"
[ -d "$wd" ] || { echo "workdir does not exist: $wd" >&2; exit 10; }
wd=$(cd -- "$wd" && pwd -P) || exit 10
mkdir -p -- "$root" || exit 12
rd=$(cd -- "$root" && pwd -P)/$job || exit 12
# shellcheck disable=SC2174  # only the run dir itself (the deepest) must be private; the root exists already
mkdir -p -m 700 -- "$rd" || exit 12
put() { printf '%s' "$2" > "$1.tmp.$$" && chmod "$3" -- "$1.tmp.$$" && mv -f -- "$1.tmp.$$" "$1"; }
f=$rd/run-$sha.sh
if [ -e "$f" ] && ! cmp -s -- "$f" <(printf '%s' "$script"); then
  # running = a live process in its group or its pid, whatever an exit_code file says (backends/observe.py)
  p='' g='' live=''
  read_small "$rd/pid" p
  read_small "$rd/pgid" g
  proc_snapshot
  case $p in '' | *[!0-9]* | 0 | 1) ;; *) [ -n "${PROC_PID[$p]:-}" ] && live=1 ;; esac
  case $g in '' | *[!0-9]* | 0 | 1) ;; *) [ -n "${PROC_PG[$g]:-}" ] && live=1 ;; esac
  if [ -n "$live" ] || [ "$PROC_OK" != 1 ]; then  # cannot read the process table: refuse too
    echo "$f exists with different content and its job is running: refusing to overwrite it" >&2
    exit 11
  fi
fi
[ -e "$f" ] && cmp -s -- "$f" <(printf '%s' "$script") || put "$f" "$script" 0400 || exit 12
put "$rd/wrapper.sh" "$wrapper" 0500 || exit 12
put "$rd/meta.json" "$meta" 0600 || exit 12
printf 'run_dir=%s\nworkdir=%s\n' "$rd" "$wd"
